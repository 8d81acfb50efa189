"""The reference stores: plain Python, exact, used by property tests."""

from __future__ import annotations

import bisect
import functools
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tidings.core import ids
from tidings.core.aggregation import (
    AggregateCap,
    Member,
    Position,
    StoredAggregate,
    StoredAggregatePage,
    place,
)
from tidings.stores.base import Cap


class MemoryTimelineStore:
    def __init__(self) -> None:
        self._feeds: dict[str, list[str]] = {}  # ascending ids
        self._lock = threading.Lock()

    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        self.add_each(dict.fromkeys(feeds, activity_ids), cap)

    def add_each(self, entries: Mapping[str, Sequence[str]], cap: Cap) -> None:
        with self._lock:
            for feed, activity_ids in entries.items():
                held = self._feeds.setdefault(feed, [])
                for aid in activity_ids:
                    i = bisect.bisect_left(held, aid)
                    if i == len(held) or held[i] != aid:
                        held.insert(i, aid)
                if len(held) > cap.max_length:
                    del held[: len(held) - cap.max_length]
                if cap.floor is not None:
                    del held[: bisect.bisect_left(held, cap.floor)]
                if not held:
                    del self._feeds[feed]

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[str]], cap: Cap
    ) -> Callable[[], None]:
        return functools.partial(self.add_each, entries, cap)

    def prepare_add(
        self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap
    ) -> Callable[[], None]:
        return functools.partial(self.add, feeds, activity_ids, cap)

    def remove(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        drop = set(activity_ids)
        with self._lock:
            for feed in feeds:
                entries = self._feeds.get(feed)
                if entries is None:
                    continue
                entries[:] = [e for e in entries if e not in drop]
                if not entries:
                    del self._feeds[feed]

    def page(self, feed: str, *, limit: int, before: str | None, cap: Cap) -> list[str]:
        with self._lock:
            entries = self._feeds.get(feed, [])
            end = len(entries) if before is None else bisect.bisect_left(entries, before)
            start = 0 if cap.floor is None else bisect.bisect_left(entries, cap.floor)
            start = max(start, end - limit)
            return entries[start:end][::-1]

    def page_docs(
        self, feed: str, *, limit: int, before: str | None, cap: Cap
    ) -> tuple[list[str], dict[str, bytes]]:
        return self.page(feed, limit=limit, before=before, cap=cap), {}

    def clear(self, feeds: Sequence[str]) -> None:
        with self._lock:
            for feed in feeds:
                self._feeds.pop(feed, None)

    def close(self) -> None:
        return None


@dataclass(slots=True)
class _Aggregate:
    members: list[str] = field(default_factory=list)  # ascending ids
    actors: Counter[str] = field(default_factory=Counter)
    seen: bool = False
    read: bool = False


class MemoryAggregateStore:
    """The reference model of aggregated feeds: every aggregate in full, counts exact."""

    def __init__(self) -> None:
        self._feeds: dict[str, dict[str, _Aggregate]] = {}
        self._lock = threading.Lock()

    def add(self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap) -> None:
        with self._lock:
            for feed in feeds:
                aggregates = self._feeds.setdefault(feed, {})
                held = len(aggregates)
                for m in members:
                    aggregate = aggregates.setdefault(m.aggregate, _Aggregate())
                    i = bisect.bisect_left(aggregate.members, m.id)
                    if i < len(aggregate.members) and aggregate.members[i] == m.id:
                        continue
                    aggregate.members.insert(i, m.id)
                    aggregate.actors[m.actor] += 1
                    aggregate.seen = aggregate.read = False
                # The cap applies when a write creates an aggregate (as in the SQL and
                # Redis stores, which count aggregates only then): a lowered
                # max_length takes effect with the next new aggregate.
                if len(aggregates) > held and len(aggregates) > cap.max_length:
                    ranked = sorted(
                        aggregates, key=lambda k: (ids.id_ms(aggregates[k].members[-1]), k)
                    )
                    for key in ranked[: len(aggregates) - cap.max_length]:
                        del aggregates[key]
                if not aggregates:
                    del self._feeds[feed]

    def prepare_add(
        self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap
    ) -> Callable[[], None]:
        return functools.partial(self.add, feeds, members, cap)

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[Member]], cap: AggregateCap
    ) -> Callable[[], None]:
        def write() -> None:
            for feed, members in entries.items():
                self.add([feed], members, cap)

        return write

    def remove(self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap) -> None:
        with self._lock:
            for feed in feeds:
                aggregates = self._feeds.get(feed, {})
                for m in members:
                    aggregate = aggregates.get(m.aggregate)
                    if aggregate is None or m.id not in aggregate.members:
                        continue
                    aggregate.members.remove(m.id)
                    aggregate.actors[m.actor] -= 1
                    if aggregate.actors[m.actor] <= 0:
                        del aggregate.actors[m.actor]
                    if not aggregate.members:
                        del aggregates[m.aggregate]
                if not aggregates:
                    self._feeds.pop(feed, None)

    def page(
        self,
        feed: str,
        *,
        limit: int,
        snapshot: str | None,
        after: Position | None,
        cap: AggregateCap,
        docs: bool = False,
    ) -> StoredAggregatePage:
        with self._lock:
            aggregates = self._feeds.get(feed, {})
            if snapshot is None and aggregates:
                snapshot = max(g.members[-1] for g in aggregates.values())
            placed = []
            for key, aggregate in aggregates.items():
                position = place(aggregate.members, key, snapshot)
                if position is not None and (after is None or position < after):
                    placed.append((position, key))
            placed.sort(reverse=True)
            out = [
                self._stored(aggregates[key], key, position, cap)
                for position, key in placed[:limit]
            ]
            unseen = sum(not g.seen for g in aggregates.values())
            unread = sum(not g.read for g in aggregates.values())
        return StoredAggregatePage(out, snapshot, unseen, unread, {})

    @staticmethod
    def _stored(
        aggregate: _Aggregate, key: str, position: Position, cap: AggregateCap
    ) -> StoredAggregate:
        return StoredAggregate(
            key=key,
            activity_ids=aggregate.members[::-1][: cap.max_aggregate_size],
            activity_count=len(aggregate.members),
            actor_count=len(aggregate.actors),
            oldest=aggregate.members[0],
            newest=aggregate.members[-1],
            position=position.ms,
            is_seen=aggregate.seen,
            is_read=aggregate.read,
        )

    def member_ids(self, feed: str) -> list[str]:
        with self._lock:
            return [i for g in self._feeds.get(feed, {}).values() for i in g.members]

    def mark(self, feed: str, aggregates: Sequence[str] | None, *, read: bool) -> None:
        with self._lock:
            held = self._feeds.get(feed, {})
            for key in held if aggregates is None else aggregates:
                aggregate = held.get(key)
                if aggregate is not None:
                    aggregate.seen = True
                    aggregate.read = aggregate.read or read

    def clear(self, feeds: Sequence[str]) -> None:
        with self._lock:
            for feed in feeds:
                self._feeds.pop(feed, None)

    def close(self) -> None:
        return None


class MemorySnapshotStore:
    """Snapshots in this process; ``now_ms`` is the engine's clock."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self._held: dict[str, tuple[int, bytes]] = {}
        self._lock = threading.Lock()

    def put(self, key: str, body: bytes, ttl_ms: int) -> None:
        now = self._now_ms()
        with self._lock:
            # Expired snapshots go as new ones come: the store never holds more
            # than the snapshots of one TTL.
            for old in [k for k, (expires, _) in self._held.items() if expires <= now]:
                del self._held[old]
            self._held[key] = (now + ttl_ms, body)

    def get(self, key: str) -> bytes | None:
        with self._lock:
            found = self._held.get(key)
        if found is None or found[0] <= self._now_ms():
            return None
        return found[1]
