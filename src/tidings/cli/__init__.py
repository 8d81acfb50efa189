"""The ``tidings`` command line."""

from tidings.cli.main import main

__all__ = ["main"]
