"""Benchmarks of tidings: run with ``python -m bench`` (see ``bench/__main__.py``)."""
