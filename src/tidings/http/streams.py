"""What bounds the live streams (SSE and WebSocket) a worker process serves:
how many one user holds open, and their end when the server shuts down.

A live stream never ends by itself, so a server waiting for its connections
to finish would wait forever: the server's protocol
(:mod:`tidings.http.server`) hands each request a :class:`Closing`, under
the ASGI scope extension :data:`CLOSING`, and closes it when the server asks
the connection to finish; a stream then ends with a last event.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, MutableMapping
from typing import Any

from tidings.http.auth import Principal

#: The ASGI scope extension whose ``"closing"`` is a request's :class:`Closing`.
CLOSING = "tidings.closing"


class Closing:
    """Whether the server has asked a connection to finish, and what to do then."""

    def __init__(self) -> None:
        self.closed = False
        self._callbacks: list[Callable[[], None]] = []

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the server asks the connection to finish (now, if it has)."""
        if self.closed:
            callback()
        else:
            self._callbacks.append(callback)

    def close(self) -> None:
        """The server asks the connection to finish (it is shutting down)."""
        self.closed = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


def closing_of(scope: MutableMapping[str, Any]) -> Closing | None:
    """The request's :class:`Closing`; None under a server that gives none."""
    closing = scope.get("extensions", {}).get(CLOSING, {}).get("closing")
    return closing if isinstance(closing, Closing) else None


class LiveConnections:
    """Live connections (SSE streams and WebSockets) open per user token
    subject, in this process: each worker counts its own.

    Server tokens are not counted: they are the application's backend.
    """

    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self._open: Counter[str] = Counter()

    def open(self, who: Principal) -> bool:
        """Count a connection of ``who``; False (nothing counted) at the limit."""
        if who.server:
            return True
        if self._open[who.subject] >= self.per_user:
            return False
        self._open[who.subject] += 1
        return True

    def close(self, who: Principal) -> None:
        """A connection ``open`` counted has ended."""
        if who.server:
            return
        self._open[who.subject] -= 1
        if self._open[who.subject] <= 0:
            del self._open[who.subject]

    def refusal(self, who: Principal) -> str:
        """Why ``open`` said no, for the client."""
        return (
            f"{who.subject!r} has {self.per_user} live connections (SSE streams and "
            "WebSockets) open on this server process, its limit (live_connections_per_user)"
        )
