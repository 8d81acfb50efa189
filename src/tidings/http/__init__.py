"""The HTTP service: a REST API over the engine (``tidings serve``)."""

from tidings.http.app import create_app

__all__ = ["create_app"]
