"""Live events: what a subscriber to a feed (or to the firehose) receives.

An event id is ``<ms>-<seq>``, the form of a Redis stream entry id, whichever
bus made it: strictly increasing per feed, so "every event after this one" is
a comparison, and a client can hand back the last id it saw (SSE's
``Last-Event-ID``) to any API process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from tidings.core.errors import ValidationError

#: The topic the firehose's events are published under; no feed id has a ``$``.
FIREHOSE = "$firehose"

_EVENT_ID = re.compile(r"(\d{1,15})-(\d{1,19})")


class EventType(StrEnum):
    #: A flat feed received an activity (``data``: the activity as a read shows it).
    ACTIVITY_ADDED = "activity.added"
    #: An activity left a flat feed (``data``: ``{"id": …}``).
    ACTIVITY_REMOVED = "activity.removed"
    #: An activity a flat feed holds changed (``data``: the activity after).
    ACTIVITY_UPDATED = "activity.updated"
    #: A reaction to an activity a flat or ranked feed holds was added
    #: (``data``: the reaction, and the activity's ``reaction_counts`` after).
    REACTION_ADDED = "reaction.added"
    #: A reaction was removed (``data``: as for ``reaction.added``).
    REACTION_REMOVED = "reaction.removed"
    #: An aggregate of an aggregated or notification feed changed (``data``: the
    #: aggregate as ``read_aggregates`` returns it, or ``{"group": key, "removed": true}``).
    AGGREGATE_UPDATED = "group.updated"
    #: A notification feed's ``unseen`` / ``unread`` counts changed.
    COUNTS_CHANGED = "counts.changed"
    #: The events after the id the client gave are no longer kept: re-read the feed.
    RESYNC = "resync"
    #: Firehose: an activity was removed (``data``: ``{"id": …}``).
    DELETE = "delete"
    #: Firehose: events this connection missed because it fell behind.
    LIMIT = "limit"
    #: The server ends the stream (``data``: ``{"error": …}``).
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Event:
    """One event of ``feed`` (a feed id, or :data:`FIREHOSE`)."""

    feed: str
    id: str
    type: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"feed": self.feed, "id": self.id, "type": self.type, "data": self.data}

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())

    @classmethod
    def from_json(cls, raw: bytes | str) -> Event:
        d = orjson.loads(raw)
        return cls(d["feed"], d["id"], d["type"], d["data"])


def parse_event_id(text: object, field: str = "last_event_id") -> tuple[int, int]:
    """``(ms, seq)`` of an event id; ValidationError naming ``field`` if malformed."""
    match = _EVENT_ID.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        shown = str(text)[:40]
        raise ValidationError(f"not an event id (<ms>-<seq>): {shown!r}", field=field)
    return int(match[1]), int(match[2])


def format_event_id(ms: int, seq: int) -> str:
    return f"{ms}-{seq}"


def next_event_id(last: tuple[int, int], now_ms: int) -> tuple[int, int]:
    """The id after ``last`` at ``now_ms``: the clock's, or ``last``'s next
    sequence number when the clock has not moved past it (strictly increasing
    even if the clock steps back)."""
    if now_ms > last[0]:
        return now_ms, 0
    return last[0], last[1] + 1
