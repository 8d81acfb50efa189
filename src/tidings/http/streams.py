"""What bounds the live streams (SSE and WebSocket) a worker process serves:
how many one user holds open."""

from __future__ import annotations

from collections import Counter

from tidings.http.auth import Principal


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
