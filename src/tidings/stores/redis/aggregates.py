"""Aggregated and notification feeds in Redis, aggregated inside Redis by Lua.

Layout and costs in ``lua/groups.lua``: one script call writes a whole chunk
of follower feeds, and one reads a page of aggregates with their newest
activities.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidings.core import ids
from tidings.core.aggregation import (
    EXACT_ACTORS,
    AggregateCap,
    Member,
    Position,
    StoredAggregate,
    StoredAggregatePage,
    actor_tag,
)
from tidings.stores.base import no_call
from tidings.stores.redis.cache import cached_docs
from tidings.stores.redis.keys import RedisKeys
from tidings.stores.redis.transport import is_cluster, lua, scripts_for


class RedisAggregateStore:
    """Aggregated and notification feeds, aggregated inside Redis by Lua."""

    def __init__(self, client: Any, namespace: str = "tidings", *, cluster: bool = False) -> None:
        self.client = client
        self.keys = RedisKeys(namespace)
        self.cluster = cluster or is_cluster(client)
        self._scripts = scripts_for(client)
        shared = lua("groups.lua")
        load = self._scripts.load
        self._add = load(shared + "\n" + lua("group_add.lua"))
        self._remove = load(shared + "\n" + lua("group_remove.lua"))
        self._page = load(shared + "\n" + lua("group_page.lua"))
        self._admin = load(shared + "\n" + lua("group_admin.lua"))

    @staticmethod
    def _members(members: Sequence[Member]) -> list[bytes]:
        args: list[bytes] = []
        for m in dict.fromkeys(members):
            args += [ids.decode(m.id), m.aggregate.encode(), actor_tag(m.actor)]
        return args

    def add(self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap) -> None:
        self.prepare_add(feeds, members, cap)()

    def prepare_add(
        self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap
    ) -> Callable[[], None]:
        if not feeds or not members:
            return no_call
        args = [cap.max_length, EXACT_ACTORS, *self._members(members)]
        write: Callable[[], None] = self._scripts.prepare(
            self._add, self.keys.aggregated_many(feeds), args
        )
        return write

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[Member]], cap: AggregateCap
    ) -> Callable[[], None]:
        # Feeds with the same members share a script call (followers of the
        # same sources, in a batch of deliveries).
        by_members: dict[tuple[Member, ...], list[str]] = {}
        for feed, members in entries.items():
            by_members.setdefault(tuple(dict.fromkeys(members)), []).append(feed)
        writes = [self.prepare_add(feeds, list(ms), cap) for ms, feeds in by_members.items()]

        def write() -> None:
            for each in writes:
                each()

        return write

    def remove(self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap) -> None:
        if feeds and members:
            keys = self.keys.aggregated_many(feeds)
            self._scripts.prepare(self._remove, keys, self._members(members))()

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
        args = [
            limit,
            cap.max_aggregate_size,
            ids.decode(snapshot) if snapshot else b"",
            after.ms if after else b"",
            after.key.encode() if after else b"",
            self.keys.activity_prefix if docs and not self.cluster else b"",
        ]
        reply = self._scripts.prepare(self._page, [self.keys.aggregated(feed)], args)()
        return _aggregates_page(reply, snapshot)

    def member_ids(self, feed: str) -> list[str]:
        raw = self._scripts.prepare(self._admin, [self.keys.aggregated(feed)], ["ids"])()
        return ids.encode_many(raw)

    def mark(self, feed: str, aggregates: Sequence[str] | None, *, read: bool) -> None:
        if aggregates is not None and not aggregates:
            return
        args = ["read" if read else "seen", *(aggregates or [])]
        self._scripts.prepare(self._admin, [self.keys.aggregated(feed)], args)()

    def clear(self, feeds: Sequence[str]) -> None:
        for key in self.keys.aggregated_many(feeds):
            self._scripts.prepare(self._admin, [key], ["clear"])()

    def close(self) -> None:
        return None


def _aggregates_page(reply: Any, snapshot: str | None) -> StoredAggregatePage:
    """The page ``lua/group_page.lua`` returned: counts, 7 fields per aggregate, then docs."""
    raw_snapshot, unseen, unread, count = reply[:4]
    aggregates: list[StoredAggregate] = []
    shown: list[str] = []
    end = 4 + 7 * count
    for at in range(4, end, 7):
        key, position, flags, n, actors, raw_ids, oldest = reply[at : at + 7]
        newest_first = ids.encode_many(raw_ids)[::-1]
        shown += newest_first
        aggregates.append(
            StoredAggregate(
                key=key.decode(),
                activity_ids=newest_first,
                activity_count=n,
                actor_count=actors,
                oldest=ids.encode(oldest),
                newest=newest_first[0],
                position=position,
                is_seen=bool(flags & 1),
                is_read=bool(flags & 2),
            )
        )
    found = cached_docs(shown, reply[end:])
    snap = ids.encode(raw_snapshot) if raw_snapshot else snapshot
    return StoredAggregatePage(aggregates, snap, int(unseen), int(unread), found)
