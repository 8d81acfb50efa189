"""The HTTP service: a REST API over the engine (``tidings serve``), and the
pieces to mount it in an app of your own."""

from tidings.http.app import create_app
from tidings.http.mounting import engine_dependency, lifespan

__all__ = ["create_app", "engine_dependency", "lifespan"]
