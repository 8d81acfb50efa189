"""The reference stores: plain Python, exact, used by property tests."""

from __future__ import annotations

import bisect
import functools
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tidings.core import ids
from tidings.core.aggregation import GroupCap, Member, Position, StoredGroup, StoredGroupPage, place
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
class _Group:
    members: list[str] = field(default_factory=list)  # ascending ids
    actors: Counter[str] = field(default_factory=Counter)
    seen: bool = False
    read: bool = False


class MemoryGroupStore:
    """The reference model of aggregated feeds: every group in full, counts exact."""

    def __init__(self) -> None:
        self._feeds: dict[str, dict[str, _Group]] = {}
        self._lock = threading.Lock()

    def add(self, feeds: Sequence[str], members: Sequence[Member], cap: GroupCap) -> None:
        with self._lock:
            for feed in feeds:
                groups = self._feeds.setdefault(feed, {})
                held = len(groups)
                for m in members:
                    group = groups.setdefault(m.group, _Group())
                    i = bisect.bisect_left(group.members, m.id)
                    if i < len(group.members) and group.members[i] == m.id:
                        continue
                    group.members.insert(i, m.id)
                    group.actors[m.actor] += 1
                    group.seen = group.read = False
                # The cap applies when a write creates a group (as in the SQL and
                # Redis stores, which count groups only then): a lowered
                # max_length takes effect with the next new group.
                if len(groups) > held and len(groups) > cap.max_length:
                    ranked = sorted(groups, key=lambda k: (ids.id_ms(groups[k].members[-1]), k))
                    for key in ranked[: len(groups) - cap.max_length]:
                        del groups[key]
                if not groups:
                    del self._feeds[feed]

    def prepare_add(
        self, feeds: Sequence[str], members: Sequence[Member], cap: GroupCap
    ) -> Callable[[], None]:
        return functools.partial(self.add, feeds, members, cap)

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[Member]], cap: GroupCap
    ) -> Callable[[], None]:
        def write() -> None:
            for feed, members in entries.items():
                self.add([feed], members, cap)

        return write

    def remove(self, feeds: Sequence[str], members: Sequence[Member], cap: GroupCap) -> None:
        with self._lock:
            for feed in feeds:
                groups = self._feeds.get(feed, {})
                for m in members:
                    group = groups.get(m.group)
                    if group is None or m.id not in group.members:
                        continue
                    group.members.remove(m.id)
                    group.actors[m.actor] -= 1
                    if group.actors[m.actor] <= 0:
                        del group.actors[m.actor]
                    if not group.members:
                        del groups[m.group]
                if not groups:
                    self._feeds.pop(feed, None)

    def page(
        self,
        feed: str,
        *,
        limit: int,
        snapshot: str | None,
        after: Position | None,
        cap: GroupCap,
        docs: bool = False,
    ) -> StoredGroupPage:
        with self._lock:
            groups = self._feeds.get(feed, {})
            if snapshot is None and groups:
                snapshot = max(g.members[-1] for g in groups.values())
            placed = []
            for key, group in groups.items():
                position = place(group.members, key, snapshot)
                if position is not None and (after is None or position < after):
                    placed.append((position, key))
            placed.sort(reverse=True)
            out = [
                self._stored(groups[key], key, position, cap) for position, key in placed[:limit]
            ]
            unseen = sum(not g.seen for g in groups.values())
            unread = sum(not g.read for g in groups.values())
        return StoredGroupPage(out, snapshot, unseen, unread, {})

    @staticmethod
    def _stored(group: _Group, key: str, position: Position, cap: GroupCap) -> StoredGroup:
        return StoredGroup(
            key=key,
            activity_ids=group.members[::-1][: cap.max_group_size],
            activity_count=len(group.members),
            actor_count=len(group.actors),
            oldest=group.members[0],
            newest=group.members[-1],
            position=position.ms,
            is_seen=group.seen,
            is_read=group.read,
        )

    def member_ids(self, feed: str) -> list[str]:
        with self._lock:
            return [i for g in self._feeds.get(feed, {}).values() for i in g.members]

    def mark(self, feed: str, groups: Sequence[str] | None, *, read: bool) -> None:
        with self._lock:
            held = self._feeds.get(feed, {})
            for key in held if groups is None else groups:
                group = held.get(key)
                if group is not None:
                    group.seen = True
                    group.read = group.read or read

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
