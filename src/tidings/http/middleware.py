"""ASGI middleware of the service: the request body limit and request metrics."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

from tidings.core.clock import real_monotonic
from tidings.core.limits import MAX_BODY_BYTES
from tidings.http.metrics import Metrics
from tidings.http.problems import problem

#: Largest request body accepted: a batch of 100 activities of 10 KB each.

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """ASGI middleware: body size limit (413) and request metrics."""

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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = self.monotonic()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, sending)
        except Exception as exc:
            # (ServerErrorMiddleware, outside, answers 500.)
            self.metrics.failed(exc)
            raise
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
