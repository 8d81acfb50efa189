"""The REST API: an ASGI app over the engine facade.

Nothing here touches a store: every route calls :class:`tidings.Tidings`'s
public methods. ``create_app`` only assembles the app: the fast path
(:mod:`tidings.http.fastpath`), the routers (:mod:`tidings.http.routes`), the
error handlers (:mod:`tidings.http.problems`) and the middleware.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware

from tidings.core.clock import Clock
from tidings.core.errors import ConfigurationError
from tidings.core.limits import MAX_BODY_BYTES
from tidings.engine import Tidings
from tidings.http import auth, fastpath, publishing
from tidings.http.metrics import Metrics
from tidings.http.middleware import Guard
from tidings.http.problems import ERRORS, HANDLERS, MEDIA_TYPE
from tidings.http.routes import ROUTERS
from tidings.http.streams import LiveConnections
from tidings.settings import Settings

__all__ = ["MAX_BODY_BYTES", "MIN_SECRET_LENGTH", "create_app"]

MIN_SECRET_LENGTH = 32


def create_app(engine: Tidings | None = None, *, settings: Settings | None = None) -> FastAPI:
    """The API over ``engine``, or over an engine built from ``settings`` for the app's life.

    The settings' ``secret`` signs and checks tokens; there is no default.
    """
    settings = engine.settings if engine is not None else (settings or Settings.load())
    secret = settings.secret
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        raise ConfigurationError(
            f"the HTTP service needs TIDINGS_SECRET of at least {MIN_SECRET_LENGTH} characters "
            "(HS256 keys shorter than the hash are brute-forceable)"
        )
    metrics = Metrics()
    clock = _EngineClock()
    app = FastAPI(
        title="tidings",
        version="1",
        summary="Activity feeds: publish, follow, read.",
        # The router tries routes in order, and the fast path and the publish
        # route are the ones nearly all traffic takes: given here, they come
        # before the docs routes FastAPI adds on creation (no other route has
        # their shape and method, so no match changes) and before the routers
        # included below.
        routes=[fastpath.route, publishing.route],
        lifespan=partial(_lifespan, None if engine is not None else settings, metrics),
        responses=ERRORS,
        middleware=[Middleware(Guard, metrics=metrics, monotonic=clock.monotonic)],
    )
    for exc_type, handler in HANDLERS.items():
        app.add_exception_handler(exc_type, handler)
    if engine is not None:
        app.state.engine = engine
    clock.app = app
    app.state.tokens = auth.TokenCache(secret, now=clock.timestamp)
    app.state.live_connections = LiveConnections(settings.live_connections_per_user)
    app.state.metrics = metrics
    if settings.stream_keys:
        # (imported only where the protocol is served) Before the routers: the
        # router tries routes in order, and trying every /v1 route first took
        # ~0.2 ms of each Stream request; no /v1 route has these prefixes.
        from tidings.http.getstream import MOUNT_PATH, create_stream_app, unoffered

        app.mount(MOUNT_PATH, create_stream_app(app, settings.stream_keys))
        unoffered.mount(app)
    for router in ROUTERS:
        app.include_router(router)
    if settings.web_app:
        from tidings.webapp import install  # the app's files are read only when served

        install(app, settings)
    app.openapi = partial(_openapi, app)  # type: ignore[method-assign]
    return app


class _EngineClock:
    """The clock of the app's engine (which the lifespan may make after the
    app), for parts made with the app: the real one while there is none."""

    _real = Clock()

    def __init__(self) -> None:
        self.app: FastAPI | None = None

    def _clock(self) -> Clock:
        engine: Tidings | None = (
            None if self.app is None else getattr(self.app.state, "engine", None)
        )
        return self._real if engine is None else engine.clock

    def timestamp(self) -> float:
        return self._clock().timestamp()

    def monotonic(self) -> float:
        return self._clock().monotonic()


@asynccontextmanager
async def _lifespan(
    settings: Settings | None, metrics: Metrics, app: FastAPI
) -> AsyncIterator[None]:
    """The app's life: the metrics sampled from its engine; and with
    ``settings`` (no engine given), an engine built from them, closed at the end."""
    if settings is not None:
        app.state.engine = await run_in_threadpool(Tidings, settings)
    engine: Tidings = app.state.engine
    metrics.start(engine)
    try:
        yield
    finally:
        await run_in_threadpool(metrics.stop, engine)
        if settings is not None:
            del app.state.engine
            await run_in_threadpool(engine.close)


def _openapi(app: FastAPI) -> dict[str, Any]:
    # FastAPI documents a response model under the route's media type
    # (application/json); problems are sent as application/problem+json.
    cached = app.openapi_schema
    if cached is None:
        cached = FastAPI.openapi(app)  # builds and caches app.openapi_schema
        for item in cached["paths"].values():
            for operation in item.values():
                for response in operation.get("responses", {}).values():
                    content = response.get("content", {})
                    if MEDIA_TYPE in content and "application/json" in content:
                        content[MEDIA_TYPE] = content.pop("application/json")
    return cached
