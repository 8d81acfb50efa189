"""The process entry point of ``tidings serve``: an app factory for uvicorn,
and the connection limits uvicorn runs it with.

Each worker process builds its own engine (and its in-process delivery
runner) from the settings in its environment, read once here; outbox leases
keep the workers' runners off each other's rows.
"""

from __future__ import annotations

import asyncio
import gc
from functools import partial
from typing import Any, cast

from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tidings.http.app import create_app
from tidings.settings import Settings


def app() -> FastAPI:
    """``uvicorn --factory tidings.http.server:app``"""
    app = create_app(settings=Settings.load())
    # The modules loaded by now (FastAPI, pydantic, SQLAlchemy: ~85k objects)
    # live as long as the process. Out of the collector's sight, they no longer
    # make each full collection a ~20 ms pause for every request in flight.
    gc.freeze()
    return app


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of ``uvicorn.run`` that bound what connections may hold."""
    protocol = partial(HeaderTimeoutProtocol, header_timeout=settings.http_header_timeout_seconds)
    return {
        # uvicorn calls it as it would the class; a partial, unlike a class
        # made here, pickles for the worker processes.
        "http": cast("type[asyncio.Protocol]", protocol),
        "timeout_keep_alive": settings.http_keepalive_seconds,
        "limit_concurrency": settings.http_max_connections,
    }


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a deadline for each request header.

    uvicorn closes a connection left idle after a response (its keep-alive
    timeout), but not one that has yet to send a complete request header:
    a client could hold sockets forever by connecting and sending nothing,
    half a header, or a header a byte at a time (slowloris). Here, whenever no
    request is in progress, the header must be complete within
    ``header_timeout`` seconds of the connection opening or of the first byte
    after a response; later bytes do not move the deadline.
    """

    def __init__(self, *args: Any, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_deadline()

    def data_received(self, data: bytes) -> None:
        # Armed before the bytes are parsed: headers they complete disarm it.
        # uvicorn drops its keep-alive timer on any byte, even a blank line.
        if self.cycle is None or self.cycle.response_complete:
            self._start_header_deadline()
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._cancel_header_deadline()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        super().connection_lost(exc)

    def _start_header_deadline(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.header_timeout, self._header_late)

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _header_late(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()
