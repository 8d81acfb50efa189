"""The process entry point of ``tidings serve``: an app factory for uvicorn,
and the connection limits and the shutdown uvicorn runs it with.

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
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from tidings.http.app import create_app
from tidings.http.problems import MEDIA_TYPE, problem_body
from tidings.http.streams import CLOSING, Closing
from tidings.settings import Settings

#: After refusing a request, how long its connection is still read (and the
#: bytes dropped) before it is closed: closing a socket with unread bytes makes
#: the kernel send a reset, and a reset can reach the client before it has read
#: the refusal. Long enough for a client to finish sending a large header on
#: any network fit to serve from, and bounded, so a refused client holds no
#: socket for long.
LINGER_SECONDS = 2.0
#: How long uvicorn's supervisor waits for a worker to answer its ping before
#: it kills the worker as hung and starts another. A worker answers only once
#: its imports are done (~1.3 s of CPU): on a busy two-core host that took
#: 7 to 9 s, past uvicorn's 5 s, and ``--workers N`` killed and restarted its
#: workers without end. A worker whose event loop is blocked still answers
#: (a thread of its own does), so this catches only a process frozen whole.
WORKER_HEALTHCHECK_SECONDS = 30


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
    protocol = partial(
        HttpProtocol,
        header_timeout=settings.http_header_timeout_seconds,
        max_header_bytes=settings.http_max_header_bytes,
    )
    return {
        # uvicorn calls it as it would the class; a partial, unlike a class
        # made here, pickles for the worker processes.
        "http": cast("type[asyncio.Protocol]", protocol),
        "ws": WebSocketProtocol,
        "timeout_keep_alive": settings.http_keepalive_seconds,
        "limit_concurrency": settings.http_max_connections,
        "timeout_graceful_shutdown": settings.http_shutdown_timeout_seconds,
        "timeout_worker_healthcheck": WORKER_HEALTHCHECK_SECONDS,
    }


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the limits it lacks.

    - **A deadline for each request header.** uvicorn closes a connection
      left idle after a response (its keep-alive timeout), but not one that
      has yet to send a complete request header: a client could hold sockets
      forever by connecting and sending nothing, half a header, or a header a
      byte at a time (slowloris). Here, whenever no request is in progress,
      the header must be complete within ``header_timeout`` seconds of the
      connection opening or of the first byte after a response; later bytes
      do not move the deadline.
    - **A size for each request header.** httptools holds a header until it
      is complete, growing it by copies (a 100 MB one takes seconds and
      leaves hundreds of MB resident): bytes of a request line and headers
      beyond ``max_header_bytes`` are answered 431 and never parsed.
    - **WebSocket handshakes within** ``limit_concurrency``: uvicorn counts an
      upgraded connection among those open, but lets any handshake through.
    - **Live streams end on shutdown**: each request carries a
      :class:`~tidings.http.streams.Closing` (scope extension ``CLOSING``),
      closed when the server asks the connection to finish.
    """

    def __init__(
        self, *args: Any, header_timeout: float, max_header_bytes: int, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
        self.max_header_bytes = max_header_bytes
        self._header_deadline: asyncio.TimerHandle | None = None
        #: Bytes of the request header received so far; None while none is
        #: being read (its header complete, its body or response under way).
        self._header_bytes: int | None = 0
        self._refused = False
        self._closing = Closing()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._refused:  # lingering: dropped unread
            return
        # Armed before the bytes are parsed: headers they complete disarm it.
        # uvicorn drops its keep-alive timer on any byte, even a blank line.
        if self.cycle is None or self.cycle.response_complete:
            self._start_header_deadline()
        # A header is parsed only as far as its limit: fed in parts that end
        # there, until the parser has seen the whole header (or refused it).
        while data and self._header_bytes is not None:
            room = self.max_header_bytes - self._header_bytes
            if room <= 0:
                self._refuse(
                    431,
                    f"the request line and headers are larger than {self.max_header_bytes} "
                    "bytes (http_max_header_bytes)",
                )
                return
            part, data = data[:room], data[room:]
            self._header_bytes += len(part)
            super().data_received(part)
            if self._refused or self.transport.is_closing():
                return  # refused (431, 503) or closed (400)
            if self.transport.get_protocol() is not self:
                return  # upgraded: the WebSocket protocol was handed the handshake
        if data:
            super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._closing = Closing()
        self.scope["extensions"] = {CLOSING: {"closing": self._closing}}

    def on_headers_complete(self) -> None:
        self._header_bytes = None
        self._cancel_header_deadline()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._header_bytes = 0  # the next request's header
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        # The check uvicorn makes of every other request (on_headers_complete),
        # this connection among those counted.
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self.logger.warning("Exceeded concurrency limit.")
            self._refuse(
                503,
                f"this server process has {limit} connections open or requests in "
                "progress, its limit (http_max_connections)",
            )
            return
        super().handle_websocket_upgrade()

    def shutdown(self) -> None:
        self._closing.close()
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        super().connection_lost(exc)

    def _refuse(self, status: int, detail: str) -> None:
        """Answer ``status`` with a problem and end the connection: the
        write side at once, the read side after :data:`LINGER_SECONDS`."""
        self._refused = True
        self._cancel_header_deadline()
        body = problem_body(status, detail)
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: " + MEDIA_TYPE.encode() + b"\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:  # TLS: no half-close
            self.transport.close()

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


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, closing with 1001 (going away) on shutdown.

    uvicorn closes open WebSockets with 1012 (service restart) when it shuts
    down; a server stopping, to come back or not, is going away (RFC 6455).
    """

    def shutdown(self) -> None:
        if not self.handshake_complete or self.close_sent:
            super().shutdown()
            return
        self.stop_keepalive()
        self.close_sent = True
        self.queue.put_nowait({"type": "websocket.disconnect", "code": 1001})
        self.conn.send_close(1001, "server shutting down")
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.transport.close()
