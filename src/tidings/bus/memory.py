"""The in-process bus of the embedded default: events live in this process.

Each watched feed keeps its events of the last ``retention_ms`` in a deque,
so a subscriber of this process that reconnects replays what it missed.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from tidings.bus.base import (
    BACK,
    DEFAULT_RETENTION_MS,
    FIREHOSE_KEPT,
    Bus,
    Emit,
    announced_members,
    news_key,
)
from tidings.core.clock import real_monotonic, wall_ms
from tidings.core.events import (
    FIREHOSE,
    Event,
    format_event_id,
    next_event_id,
    parse_event_id,
)


class _Stream:
    __slots__ = ("announced", "events", "floor", "last")

    def __init__(self, floor: tuple[int, int]) -> None:
        self.events: deque[tuple[tuple[int, int], Event]] = deque()
        #: Activities announced as added, and when (ms), oldest first: a
        #: delivery made again (a publish's own feed written by a runner too)
        #: announces nothing new.
        self.announced: dict[str, int] = {}
        #: The newest id not kept (a replay from before it has a gap).
        self.floor = floor
        self.last: tuple[int, int] = (0, 0)


class MemoryBus(Bus):
    def __init__(
        self,
        retention_ms: int = DEFAULT_RETENTION_MS,
        now_ms: Callable[[], int] = wall_ms,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        super().__init__(retention_ms, monotonic)
        self.now_ms = now_ms
        self._streams: dict[str, _Stream] = {}
        #: Feeds without subscribers still kept until then (ms).
        self._kept_until: dict[str, int] = {}
        #: The soonest of them (a write looks no further unless it has come).
        self._next_expiry = float("inf")
        #: Held from giving ids to handing events out, so that every
        #: subscriber sees a feed's events in id order.
        self._publishing = threading.Lock()

    def _refresh(self) -> None:
        # (under the lock) Expired feeds go, with their events.
        now = self.now_ms()
        for feed in [f for f, until in self._kept_until.items() if until <= now]:
            del self._kept_until[feed]
            if feed not in self._subscribers:
                self._streams.pop(feed, None)
        self._next_expiry = min(self._kept_until.values(), default=float("inf"))
        self._others = frozenset(self._kept_until)
        self._watched = self._local | self._others

    def _watch(self, feed: str) -> None:
        with self._lock:
            self._kept_until.pop(feed, None)
            self._refresh()

    def _ready(self, feed: str) -> None:
        return None  # (events are handed out in this process as they are made)

    def _unwatch(self, feed: str) -> None:
        with self._lock:
            self._kept_until[feed] = self.now_ms() + self.retention_ms
            self._refresh()

    def _publish(self, items: Sequence[Emit]) -> None:
        with self._publishing:
            self._publish_locked(items)

    def _publish_locked(self, items: Sequence[Emit]) -> None:
        now = self.now_ms()
        cutoff = (now - self.retention_ms, 0)
        made: list[Event] = []
        with self._lock:
            if now >= self._next_expiry:
                self._refresh()
            for feed, kind, data in items:
                if feed not in self._watched:
                    continue
                stream = self._streams.get(feed)
                if stream is None:
                    # Nothing before now is kept: an older id resyncs.
                    stream = self._streams[feed] = _Stream(floor=(now, -1))
                if feed != FIREHOSE and not _first_news(stream, kind, data, now, cutoff[0]):
                    continue
                if kind == BACK:
                    continue  # (recorded as news, sent to no one)
                stream.last = key = next_event_id(stream.last, now)
                event = Event(feed, format_event_id(*key), kind, data)
                stream.events.append((key, event))
                limit = FIREHOSE_KEPT if feed == FIREHOSE else None
                while stream.events and (
                    stream.events[0][0] < cutoff
                    or (limit is not None and len(stream.events) > limit)
                ):
                    stream.floor = stream.events.popleft()[0]
                made.append(event)
        self.deliver(made)

    def _replay(self, feed: str, after: str) -> list[Event] | None:
        key = parse_event_id(after)
        with self._lock:
            stream = self._streams.get(feed)
            if stream is None or stream.floor > key:
                return None  # kept nowhere (this process restarted), or trimmed past it
            return [event for k, event in stream.events if k > key]


def _first_news(stream: _Stream, kind: str, data: dict[str, Any], now: int, cutoff: int) -> bool:
    """Whether an event is news to ``stream`` (:func:`news_key`): one that
    announces only what ``stream`` announced within the retention is not, as
    ``_EMIT`` of the Redis bus decides."""
    key = news_key(kind, data)
    if not key:
        return True
    kept, forgotten = announced_members(key)
    announced = stream.announced
    while announced and next(iter(announced.values())) < cutoff:
        del announced[next(iter(announced))]

    if all(member in announced for member in kept):
        return False
    for member in forgotten:
        announced.pop(member, None)
    for member in kept:
        announced.pop(member, None)  # (to the end: oldest first, as the pruning reads)
        announced[member] = now
    return True
