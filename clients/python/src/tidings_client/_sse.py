"""Server-sent events: parsing the stream, and resuming it where it broke.

A feed's events carry an id (``<ms>-<seq>``, increasing per feed). After a
dropped connection the stream is opened again with ``Last-Event-ID``, and the
service replays every event after it: none is missed. An event whose id is
not after the last one seen is skipped, so none is seen twice even if a
replay overlaps. The firehose has no ids and no replay: it reconnects, and
what was published meanwhile is not seen (a ``limit`` event counts what a
slow reader missed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tidings_client._core import STREAM_RETRY, Attempts, Retry, loads
from tidings_client.errors import ApiError, StreamEnded, TidingsClientError

_EVENT_ID = re.compile(r"(\d{1,15})-(\d{1,19})")
#: The ``error`` the service ends its streams with when it shuts down.
SHUTTING_DOWN = "server shutting down"
TOKEN_EXPIRED = "token expired"
#: Answers to opening a stream that are worth opening it again.
_REOPEN_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Event:
    """One live event: ``type`` (``activity.added``, ``group.updated``,
    ``resync``...), its ``id`` (None for ``resync``, ``limit`` and the
    firehose's events without one), and its JSON ``data``."""

    type: str
    id: str | None
    data: dict[str, Any]


def _order(event_id: str) -> tuple[int, int] | None:
    match = _EVENT_ID.fullmatch(event_id)
    return (int(match[1]), int(match[2])) if match else None


class Parser:
    """Turns the stream's lines into events (the WHATWG rules the service's
    frames need: ``event``, ``id``, ``data``, comments, blank-line dispatch)."""

    __slots__ = ("_data", "_id", "_type")

    def __init__(self) -> None:
        self._type = ""
        self._id: str | None = None
        self._data: list[str] = []

    def line(self, line: str) -> Event | None:
        """The event a blank ``line`` completes, else None."""
        if not line:
            if not self._data:
                self._type, self._id = "", None
                return None
            raw = "\n".join(self._data)
            event = Event(self._type or "message", self._id, loads(raw.encode()))
            self._type, self._id, self._data = "", None, []
            return event
        if line[0] == ":":
            return None  # a comment: "connected", heartbeats
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


class Resume:
    """One stream's state across its connections: the last event id seen,
    and the failures in a row since the last connection that opened."""

    def __init__(self, last_event_id: str | None, retry: Retry | None) -> None:
        self.last_event_id = last_event_id
        self._last = None if last_event_id is None else _order(last_event_id)
        self.retry = retry or STREAM_RETRY
        self._attempts = Attempts(self.retry, idempotent=True)

    def headers(self) -> dict[str, str]:
        """The request headers of the next connection."""
        headers = {"accept": "text/event-stream", "cache-control": "no-cache"}
        if self.last_event_id is not None:
            headers["last-event-id"] = self.last_event_id
        return headers

    def opened(self) -> None:
        """A connection opened: the next failure is the first again."""
        self._attempts = Attempts(self.retry, idempotent=True)

    def refused(self, error: ApiError) -> float:
        """Seconds before opening again after ``error``; raises it when the
        answer will not change (401, 403, 404...) or retries are spent."""
        if error.status not in _REOPEN_STATUSES:
            raise error
        return self._attempts.after(error)

    def dropped(self, error: TidingsClientError) -> float:
        """Seconds before opening again after the connection failed or ended."""
        return self._attempts.after(error)

    def accept(self, event: Event) -> bool:
        """Whether to hand ``event`` to the caller (and remember its id).

        An ``error`` event ends the connection: one for an expired token
        raises (a new connection would be refused too); any other (the server
        shutting down, a reader too slow) is not shown, and the stream is
        opened again from the last id.
        """
        if event.type == "error":
            reason = event.data.get("error")
            if reason == TOKEN_EXPIRED:
                raise StreamEnded("the stream's token expired: open it again with a new token")
            return False
        if event.id is None:
            return True
        order = _order(event.id)
        if order is not None:
            if self._last is not None and order <= self._last:
                return False  # already seen before a reconnection
            self._last = order
        self.last_event_id = event.id
        return True


__all__ = ["SHUTTING_DOWN", "TOKEN_EXPIRED", "Event", "Parser", "Resume"]


class Opened:
    """What a stream's connection loop yields once a connection is open, so
    that ``with`` can return connected; never handed to a caller."""


OPENED = Opened()
