"""The process entry point of ``tidings serve``: an app factory for uvicorn.

Each worker process builds its own engine (and its in-process delivery
runner) from the settings in its environment, read once here; outbox leases
keep the workers' runners off each other's rows.
"""

from __future__ import annotations

from fastapi import FastAPI

from tidings.http.app import create_app
from tidings.settings import Settings


def app() -> FastAPI:
    """``uvicorn --factory tidings.http.server:app``"""
    return create_app(settings=Settings.load())
