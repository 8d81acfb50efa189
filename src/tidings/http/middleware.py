"""ASGI middleware of the service: the request body limit, request metrics,
and 503 when a store cannot be reached."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

from tidings.core.clock import real_monotonic
from tidings.core.limits import MAX_BODY_BYTES
from tidings.http.metrics import Metrics
from tidings.http.problems import STORE_RETRY_AFTER, OutageLog, problem, unavailable_problem

log = logging.getLogger("tidings.http")

#: Largest request body accepted: a batch of 100 activities of 10 KB each.

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """ASGI middleware: body size limit (413), request metrics, and a store
    that cannot be reached answered 503 with ``Retry-After`` (not 500), in
    one place for every route; its exception counted in the store-errors
    metric and logged by :class:`~tidings.http.problems.OutageLog`."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        self.app = app
        self.metrics = metrics
        #: Times requests (the engine's clock).
        self.monotonic = monotonic
        self.outages = OutageLog(log, monotonic)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = self.monotonic()
        status = 500
        answering = False

        async def sending(message: Message) -> None:
            nonlocal status, answering
            if message["type"] == "http.response.start":
                status, answering = message["status"], True
            await send(message)

        try:
            await self._guarded(scope, receive, sending)
        except Exception as exc:
            self.metrics.failed(exc)
            found = None if answering else unavailable_problem(exc)
            if found is None:
                raise  # (ServerErrorMiddleware, outside, answers 500.)
            store, kind, detail = found
            self.outages(store, kind, exc)
            retry = {"Retry-After": str(STORE_RETRY_AFTER)}
            await problem(503, detail, **retry)(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            self.metrics.observe(scope["method"], template, status, self.monotonic() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            response = problem(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
            await response(scope, receive, send)
            return
        received = 0

        async def receiving() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > MAX_BODY_BYTES:
                raise _BodyTooLarge()
            return message

        try:
            await self.app(scope, receiving, send)
        except _BodyTooLarge:
            response = problem(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
            await response(scope, receive, send)


class _BodyTooLarge(HTTPException):
    """Raised from ``receive``: an HTTPException, so FastAPI passes it on instead of
    turning it into 400 "error parsing the body"; the problem handler answers 413."""

    def __init__(self) -> None:
        super().__init__(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
