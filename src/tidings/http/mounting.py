"""The tidings API inside an application of your own (FastAPI or Starlette).

``create_app(settings=...)`` is an ASGI app you can mount under a path of
yours. Starlette runs only the outer app's lifespan, so a mounted app's
engine would never start: :func:`lifespan` gives your lifespan the one to
enter, and :func:`engine_dependency` hands your own routes the same engine.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI

from tidings.core.errors import ConfigurationError
from tidings.engine import Tidings

__all__ = ["engine_dependency", "lifespan"]


def lifespan(api: FastAPI) -> AbstractAsyncContextManager[object]:
    """The mounted API's lifespan, to enter inside your app's: the engine
    built from the settings given to ``create_app`` starts when your app
    starts and is closed when it stops. (Given an engine, ``create_app``
    leaves its life to you, and this only samples the engine for ``/metrics``.)"""
    context: AbstractAsyncContextManager[object] = api.router.lifespan_context(api)
    return context


def engine_dependency(api: FastAPI) -> Callable[[], Coroutine[Any, Any, Tidings]]:
    """A FastAPI dependency for your own routes: the engine ``api`` serves
    (``Annotated[Tidings, Depends(engine_dependency(api))]``)."""

    async def engine() -> Tidings:
        feeds: Tidings | None = getattr(api.state, "engine", None)
        if feeds is None:
            raise ConfigurationError(
                "the tidings API has no engine yet: enter tidings.http.lifespan(api) "
                "in your app's lifespan (or give create_app an engine)"
            )
        return feeds

    return engine
