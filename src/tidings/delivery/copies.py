"""Copying sources' history into new followers: the COPY outbox rows a
follow queues in its own transaction (see
:meth:`tidings.canonical.follows.Follows.follow`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol

from tidings.canonical.rows import CopyRow
from tidings.canonical.store import CanonicalStore
from tidings.core.aggregation import Member
from tidings.core.fanout import Strategy, by_feed_group
from tidings.core.feeds import FeedGroup
from tidings.core.limits import LEASE_MS
from tidings.delivery.planner import Planner

log = logging.getLogger("tidings.delivery.copies")

#: Entries a copy row writes (at most) between progress records: follows of
#: ``copy_limit`` 100 go 1,000 at a time. One chunk is one read of its
#: sources' history and one store call, so larger chunks share more.
COPY_ENTRIES = 100_000


#: Told the activities a copy of history wrote into each feed (no event says
#: so: a declared hook, :meth:`tidings.bus.emitter.LiveEvents.copied`).
Copied = Callable[[Mapping[str, Sequence[str]]], None]


class Deliverer(Protocol):
    """What a copy needs of :class:`tidings.delivery.deliverer.Deliverer`."""

    canonical: CanonicalStore
    planner: Planner
    feed_groups: Mapping[str, FeedGroup]
    now_ms: Callable[[], int]
    copied: Copied | None

    def stored_members(self, feed_group: str, activity_ids: Sequence[str]) -> list[Member]: ...

    @property
    def joins_writes(self) -> bool: ...


class Copier:
    """Carries out copy rows for a deliverer."""

    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer
        self.canonical = deliverer.canonical

    def copy(self, row: CopyRow) -> bool:
        """Give each follow of ``row`` its copied history, from the follows done;
        False if the row stopped being this claim's meanwhile. Idempotent."""
        done = row.done
        size = max(1, COPY_ENTRIES // max(1, row.limit))
        outbox = self.canonical.outbox
        while done < len(row.follows):
            chunk = row.follows[done : done + size]
            done += len(chunk)
            # Where the feeds are rows of the SQLite database, a chunk's entries and
            # its progress (or the row's completion) commit together.
            with self._transaction():
                self._copy(row.limit, chunk)
                if done == len(row.follows):
                    return outbox.complete(row)  # (not a delivery: not counted as one)
                if not outbox.advance(row, str(done), self.deliverer.now_ms() + LEASE_MS):
                    return False
        return outbox.complete(row)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        if not self.deliverer.joins_writes:
            yield
            return
        db = self.canonical.db
        with db.write() as conn, db.joining(conn):
            yield

    def _copy(self, limit: int, follows: Sequence[tuple[str, str, str]]) -> None:
        # Follows removed meanwhile are skipped: unfollow took back what they
        # brought. The rest share copies by source (and span).
        starts = self.canonical.follows.history_starts([(f, s) for f, s, _ in follows])
        targets: dict[tuple[str, str, str], list[str]] = {}
        for follower, source, newest in follows:
            start = starts.get((follower, source))
            if start is not None:
                targets.setdefault((source, start, newest), []).append(follower)
        pulled = self.canonical.fanout.strategies(sorted({source for source, _, _ in targets}))
        # Every copy of the chunk, by feed group and feed, written in one call
        # per feed group: a batch of follows costs about as much as one.
        spans = self.canonical.follows.copied_ids_many(list(targets), limit)
        # Entries an owner removed from their feed (a follow made again) stay out.
        hidden = self.canonical.hidden.hidden_in(
            sorted({f for followers in targets.values() for f in followers}),
            sorted({i for copied in spans.values() for i in copied}),
        )
        copies: dict[str, dict[str, list[str]]] = {}
        feed_groups, templates = self.deliverer.feed_groups, self.deliverer.planner.templates
        for (source, start, newest), followers in targets.items():
            copied = spans[source, start, newest]
            for feed_group, feeds in by_feed_group(followers).items():
                if feed_group not in feed_groups:
                    log.warning(
                        "skipping %d feeds of unconfigured group %r", len(feeds), feed_group
                    )
                elif feed_group in templates or pulled.get(source) != Strategy.PULL:
                    # (A pulled source's copies to flat feeds are merged at read
                    # time instead.)
                    entries = copies.setdefault(feed_group, {})
                    for feed in feeds:
                        kept = [i for i in copied if (feed, i) not in hidden] if hidden else copied
                        entries.setdefault(feed, []).extend(kept)
        for feed_group, entries in copies.items():
            self._write(feed_group, entries)
            if self.deliverer.copied is not None:
                self.deliverer.copied(entries)

    def _write(self, feed_group: str, entries: Mapping[str, Sequence[str]]) -> None:
        planner = self.deliverer.planner
        if feed_group not in planner.templates:
            planner.timeline.add_each(entries, planner.cap(feed_group))
            return
        wanted = sorted({i for ids in entries.values() for i in ids})
        members = {m.id: m for m in self.deliverer.stored_members(feed_group, wanted)}
        joined = {f: [members[i] for i in ids if i in members] for f, ids in entries.items()}
        planner.aggregates.prepare_add_each(joined, planner.aggregate_cap(feed_group))()
