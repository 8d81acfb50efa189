"""Delivery: carrying out the outbox, chunk by chunk, resumably.

A row is carried out in two parts: the direct targets (the source feed and
``to``), then the source's followers in follower order, ``chunk_size`` at a
time. After each chunk the last follower done is recorded, so a runner that
dies resumes after it. Every store write is idempotent, so redoing a chunk
whose progress was not recorded changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from tidings import ids
from tidings.canonical import CanonicalStore, OutboxRow
from tidings.fanout import by_group, direct_targets
from tidings.feeds import FeedGroup
from tidings.stores.base import Cap, TimelineStore

log = logging.getLogger("tidings.delivery")

#: How long a runner owns a row before another may take it over.
LEASE_MS = 60_000


class Deliverer:
    def __init__(
        self,
        canonical: CanonicalStore,
        timeline: TimelineStore,
        groups: Mapping[str, FeedGroup],
        *,
        chunk_size: int,
        now_ms: Callable[[], int],
    ) -> None:
        self.canonical = canonical
        self.timeline = timeline
        self.groups = groups
        self.chunk_size = chunk_size
        self.now_ms = now_ms

    def cap(self, group: str) -> Cap:
        config = self.groups[group]
        ttl = config.ttl_ms
        floor = None if ttl is None else ids.floor_id(self.now_ms() - ttl)
        return Cap(config.max_length, floor, ttl)

    def write(self, kind: str, feeds: Sequence[str], activity_id: str) -> None:
        for group, members in by_group(feeds).items():
            if group not in self.groups:
                # A group removed from configuration after delivery was planned.
                log.warning("skipping %d feeds of unconfigured group %r", len(members), group)
                continue
            if kind == "deliver":
                self.timeline.add(members, [activity_id], self.cap(group))
            else:
                self.timeline.remove(members, [activity_id])

    def write_direct(self, row_kind: str, activity_id: str, source: str, to: Sequence[str]) -> None:
        self.write(row_kind, direct_targets(source, to), activity_id)

    def run(self, row: OutboxRow) -> bool:
        """Carry out ``row`` from its recorded position; False if it was cancelled meanwhile."""
        self.write_direct(row.kind, row.activity_id, row.source, row.targets)
        position = row.position
        while True:
            chunk = self.canonical.follower_chunk(row.source, position, self.chunk_size)
            if not chunk:
                break
            self.write(row.kind, chunk, row.activity_id)
            position = chunk[-1]
            if not self.canonical.advance(row.id, position, self.now_ms() + LEASE_MS):
                return False
            if len(chunk) < self.chunk_size:
                break
        self.canonical.complete(row.id)
        return True

    def run_pending(self, max_rows: int | None = None) -> int:
        """Claim and carry out pending rows until none is left; returns rows done."""
        done = 0
        while max_rows is None or done < max_rows:
            rows = self.canonical.claim(self.now_ms(), LEASE_MS, limit=8)
            if not rows:
                break
            for row in rows:
                try:
                    self.run(row)
                except Exception:
                    log.exception("delivery of outbox row %d failed; will retry", row.id)
                    self.canonical.release(row.id)
                    raise
                done += 1
        return done
