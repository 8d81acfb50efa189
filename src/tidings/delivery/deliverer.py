"""Delivery: carrying out the outbox, chunk by chunk, resumably.

A row is carried out in two parts: the direct targets (the source feed and
``to``), then the source's followers in follower order, ``chunk_size`` at a
time. After each chunk the last follower done is recorded, so a runner that
dies resumes after it. Every store write is idempotent, so redoing a chunk
whose progress was not recorded changes nothing. A COPY row (new follows'
history) is carried out the same way by :mod:`tidings.delivery.copies`.

A runner acts on a row only under the claim it read it with: a row removed
and replaced meanwhile (a removal queues a retraction), or claimed again by
another runner after the lease lapsed, is no longer the runner's, which
stops at its next step.

What a row writes where is the :class:`~tidings.delivery.planner.Planner`'s
answer; rebuilding feeds is :mod:`tidings.delivery.rebuild`'s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from tidings.canonical.rows import Claimed, CopyRow, OutboxRow
from tidings.canonical.store import CanonicalStore
from tidings.core.activity import Activity
from tidings.core.aggregation import AggregateCap, Member
from tidings.core.fanout import OutboxKind, direct_targets
from tidings.core.feeds import FeedGroup
from tidings.core.limits import CLAIM_ROWS, LEASE_MS
from tidings.delivery.batch import Batcher, DirectWrites
from tidings.delivery.copies import Copied, Copier
from tidings.delivery.distributed import DistributedDelivery
from tidings.delivery.planner import Changes, Planner, Write
from tidings.delivery.readahead import ReadAhead
from tidings.delivery.rebuild import Rebuilder
from tidings.delivery.regeneration import Regenerations
from tidings.stores.base import AggregateStore, Cap, TimelineStore
from tidings.stores.sql import in_database

log = logging.getLogger("tidings.delivery.deliverer")

#: Followers in the first chunk of a delivery (later chunks: ``chunk_size``).
FIRST_CHUNK = 1000
#: How far before a delivery started it looks for unfollows that raced it:
#: allowance for clocks of different processes.
UNFOLLOW_MARGIN_MS = 60_000
#: A chunk of a delivery: its last follower, its prepared writes, whether it
#: is the last chunk, and its followers.
Chunk = tuple[str, list[Write], bool, list[str]]


class Deliverer:
    def __init__(
        self,
        canonical: CanonicalStore,
        timeline: TimelineStore,
        feed_groups: Mapping[str, FeedGroup],
        *,
        aggregates: AggregateStore,
        chunk_size: int,
        now_ms: Callable[[], int],
        pull_grace_ms: int = 0,
        changes: Changes | None = None,
        watched: Callable[[], Iterable[str]] | None = None,
        copied: Copied | None = None,
    ) -> None:
        self.canonical = canonical
        #: Told the activities each copy of history wrote, by feed.
        self.copied = copied
        self.feed_groups = feed_groups
        self.planner = Planner(feed_groups, timeline, aggregates, now_ms, changes)
        self.rebuilder = Rebuilder(canonical, self.planner)
        self.chunk_size = chunk_size
        self.pull_grace_ms = pull_grace_ms
        self.now_ms = now_ms
        #: Outbox rows carried out by this process (for metrics).
        self.completed = 0
        self._count_lock = threading.Lock()
        #: Activities whose direct targets this process's publishes wrote.
        self.direct = DirectWrites()
        self.batcher = Batcher(self)
        self.copier = Copier(self)
        #: Rebuilds queued by readers of idle feeds.
        self.regenerations = Regenerations(canonical, self.rebuild, feed_groups, now_ms)
        #: Rows split into parts for workers (Celery), one task each.
        self.distributed = DistributedDelivery(self)
        #: The feeds with a live subscriber in this process (the bus's): a big
        #: delivery writes them first. None: none here.
        self.watched = watched

    # The stores are the planner's, so that replacing one (tests wrap them to
    # fail on cue) reaches every write the deliverer plans.

    @property
    def timeline(self) -> TimelineStore:
        return self.planner.timeline

    @timeline.setter
    def timeline(self, store: TimelineStore) -> None:
        self.planner.timeline = store

    @property
    def aggregates(self) -> AggregateStore:
        return self.planner.aggregates

    @aggregates.setter
    def aggregates(self, store: AggregateStore) -> None:
        self.planner.aggregates = store

    @property
    def joins_writes(self) -> bool:
        """Whether feed writes join the canonical store's transactions: both
        stores keep feeds as rows of its database, and that database is
        SQLite. A publish then writes its own feed in its own transaction,
        and a batch's entries commit with the completion of its rows.

        Only SQLite, where one write transaction runs at a time: an unfollow
        commits wholly before or after a batch, so the batch's look at the
        unfollow log (``take_back_unfollowed``) stays sound. On PostgreSQL an
        unfollow could commit between that look and the batch's commit, and
        take back nothing of entries it cannot see yet.
        """
        db = self.canonical.db
        return db.dialect == "sqlite" and in_database(db, self.timeline, self.aggregates)

    # -- planning and rebuilding, asked of the deliverer ------------------------

    def cap(self, feed_group: str) -> Cap:
        return self.planner.cap(feed_group)

    def aggregate_cap(self, feed_group: str) -> AggregateCap:
        return self.planner.aggregate_cap(feed_group)

    def aggregate_keys(self, activity: Activity) -> dict[str, str]:
        """The aggregate ``activity`` joins in each aggregated feed group (fixed at publish)."""
        return self.planner.aggregate_keys(activity)

    def members(
        self,
        feed_group: str,
        activities: Sequence[Activity],
        keys: Mapping[str, Mapping[str, str]],
    ) -> list[Member]:
        """The activities as feeds of an aggregated ``feed_group`` hold them; ``keys`` are the
        aggregate keys fixed at publish, by activity id."""
        return self.planner.members(feed_group, activities, keys)

    def rebuild(self, feed: str) -> None:
        """Rebuild ``feed`` in its store from the canonical store (see :class:`Rebuilder`)."""
        self.rebuilder.rebuild(feed)

    # -- delivering -------------------------------------------------------------

    def write(
        self, kind: OutboxKind, feeds: Sequence[str], activity: Activity, keys: Mapping[str, str]
    ) -> None:
        for write in self.planner.plan(kind, feeds, activity, keys):
            write()

    def write_direct(
        self,
        row_kind: OutboxKind,
        activity: Activity,
        keys: Mapping[str, str],
        source: str,
        to: Sequence[str],
    ) -> None:
        self.write(row_kind, direct_targets(source, to), activity, keys)

    def write_row_direct(self, row: OutboxRow) -> None:
        """``row``'s direct targets, unless this process's publish wrote them
        already (:class:`tidings.delivery.batch.DirectWrites`)."""
        if row.kind == OutboxKind.DELIVER and self.direct.take(row.activity_id):
            return
        self.write_direct(row.kind, row.activity, row.aggregate_keys, row.source, row.targets)

    def run(self, row: Claimed) -> bool:
        """Carry out ``row`` from its recorded position; False if it stopped being
        this claim's meanwhile (cancelled, or claimed again)."""
        if isinstance(row, CopyRow):
            return self.copier.copy(row)
        started = self.now_ms()
        self.write_row_direct(row)
        early = self._watched_first(row, started)
        for last, writes, final, chunk in self._follower_writes(row, early):
            for write in writes:
                write()
            self.take_back_unfollowed([row], {row.source: chunk}, started)
            # The last chunk's progress is the completion itself: one
            # transaction fewer for the many deliveries of a single chunk.
            if not final and not self.canonical.outbox.advance(row, last, self.now_ms() + LEASE_MS):
                return False
        return self.complete(row)

    def _watched_first(self, row: OutboxRow, started_ms: int) -> frozenset[str]:
        """Write ``row`` first into the followers someone watches live now, and
        return them (the chunks after skip them).

        A big delivery (only sources past the batcher's size get here) writes
        chunks of thousands of feeds in follower order; a reader with the
        timeline open would wait behind every feed id sorting before theirs.
        The same rules as a chunk: followers after the row's position, that it
        reaches (``since_row``, not idle), with unfollows taken back. Feeds
        with a subscriber in this process only (not those kept for replay,
        nor other processes'), at most a chunk of them, so this stays one
        small write; none while nobody is subscribed.
        """
        if row.kind != OutboxKind.DELIVER or self.watched is None:
            return frozenset()
        after = row.position or ""
        watched = [f for f in self.watched() if f > after and ":" in f]
        if watched and not self.pushes_flat(row):  # flat followers merge a pulled source
            watched = [f for f in watched if f.partition(":")[0] in self.planner.templates]
        if not watched:
            return frozenset()
        feeds = self.canonical.follows.followers_among(row.source, watched, row_id=row.id)
        feeds = feeds[: self.chunk_size]  # past a chunk, the rest come in order
        if not feeds:
            return frozenset()
        for write in self.planner.plan(row.kind, feeds, row.activity, row.aggregate_keys):
            write()
        self.take_back_unfollowed([row], {row.source: feeds}, started_ms)
        return frozenset(feeds)

    def complete(self, row: Claimed) -> bool:
        """Record ``row`` done (False: it was no longer this runner's)."""
        if not self.canonical.outbox.complete(row):
            return False
        self.count_completed(1)
        return True

    def take_back_unfollowed(
        self, rows: Sequence[OutboxRow], written: Mapping[str, Sequence[str]], started_ms: int
    ) -> None:
        """Undo the writes of ``rows`` (to ``written``: followers by source) into
        feeds that unfollowed the source since the delivery started.

        An unfollow deletes the follow, then takes the source's entries out of
        the feed; a write landing after that would stay for good. Looking up
        the unfollow log after writing closes the gap: an unfollow logged by
        then is undone here, a later one by the unfollow itself. The log is
        read from well before ``started_ms`` (clocks of processes differ) and
        the lookup is one indexed query that finds nothing, nearly always. A
        feed the activity names in ``to`` keeps it, as unfollow keeps it.
        """
        sources = [r.source for r in rows if r.kind == OutboxKind.DELIVER]
        if not sources:
            return
        since = started_ms - UNFOLLOW_MARGIN_MS
        gone = self.canonical.follows.unfollowed_since(sources, since)
        if not gone:
            return
        for row in rows:
            feeds = [
                f
                for f in written.get(row.source, ())
                if (f, row.source) in gone and f not in row.targets
            ]
            if feeds and row.kind == OutboxKind.DELIVER:
                plan = self.planner.plan(
                    OutboxKind.RETRACT, feeds, row.activity, row.aggregate_keys
                )
                for write in plan:
                    write()

    def count_completed(self, rows: int) -> None:
        with self._count_lock:
            self.completed += rows

    def stored_members(self, feed_group: str, activity_ids: Sequence[str]) -> list[Member]:
        """Those of the activities that still exist, as feeds of ``feed_group`` hold them."""
        docs = self.canonical.activities.get_docs(activity_ids)
        found = [Activity.from_json(docs[i]) for i in activity_ids if i in docs]
        return self.planner.members(
            feed_group, found, self.canonical.activities.aggregate_keys(list(docs))
        )

    def _follower_writes(
        self, row: OutboxRow, written: AbstractSet[str] = frozenset()
    ) -> Iterator[Chunk]:
        """Per follower chunk: its last follower, its prepared writes (none to
        the feeds already ``written``), whether it is the final chunk, and its
        followers. Past the first chunk, a thread reads and prepares the next
        chunks while the store writes the current one."""
        chunks = self._prepare_chunks(row, written)
        first = next(chunks, None)
        if first is None:
            return
        if first[2]:
            yield first
            return
        with ReadAhead(chunks, depth=2) as ahead:
            yield first
            yield from ahead

    def pushes_flat(self, row: OutboxRow) -> bool:
        """Whether ``row`` is written to the source's flat followers: not when
        they merge a pulled source at read time, once the grace period that lets
        every reader notice the switch has passed."""
        return row.id in self.pushes_flat_many([row])

    def pushes_flat_many(self, rows: Sequence[OutboxRow]) -> set[int]:
        """The ids of ``rows`` that :meth:`pushes_flat`, in one query (none when
        no source is pulled at all, the common case). Retractions reach
        everyone, so stores hold no dead ids."""
        pulled = self.canonical.fanout.pulled_sinces(
            sorted({r.source for r in rows if r.kind == OutboxKind.DELIVER})
        )
        now = self.now_ms()
        return {
            r.id
            for r in rows
            if r.kind != OutboxKind.DELIVER
            or r.source not in pulled
            or now < pulled[r.source] + self.pull_grace_ms
        }

    def _prepare_chunks(self, row: OutboxRow, written: AbstractSet[str]) -> Iterator[Chunk]:
        position = row.position
        # A small first chunk gets the store busy sooner: the read-ahead thread
        # prepares the next, full-size chunk while the store writes it.
        size = min(self.chunk_size, FIRST_CHUNK)
        # Flat followers of a pulled source merge it at read time. Aggregated ones
        # are still pushed (aggregates are built at write time), and retractions
        # reach everyone so stores hold no dead ids. A source switched while
        # this runs is at worst pushed once more: reads drop duplicates.
        flat = self.pushes_flat(row)
        # Followers sort by feed id, so each feed group's feeds are one range: a
        # pulled source visits only its aggregated followers' ranges, not its
        # (possibly millions of) flat followers.
        prefixes = (
            [""] if flat else sorted(f"{feed_group}:" for feed_group in self.planner.templates)
        )
        # Feeds whose owner took the activity out (a retraction reaches them all).
        hidden = (
            self.canonical.hidden.hidden_of([row.activity_id]).get(row.activity_id, set())
            if row.kind == OutboxKind.DELIVER
            else set()
        )
        for n, prefix in enumerate(prefixes):
            if position is None or position < prefix:
                position = prefix or None
            while True:
                chunk = self.canonical.follows.follower_chunk(
                    row.source, position, size, row_id=row.id
                )
                ended = len(chunk) < size
                if prefix and chunk and not chunk[-1].startswith(prefix):
                    chunk = [f for f in chunk if f.startswith(prefix)]
                    ended = True
                if not chunk:
                    break
                position = chunk[-1]
                targets = [f for f in chunk if f not in written] if written else chunk
                if hidden:
                    targets = [f for f in targets if f not in hidden]
                writes = self.planner.plan(
                    row.kind, targets, row.activity, row.aggregate_keys, presorted=True, flat=flat
                )
                yield position, writes, ended and n == len(prefixes) - 1, chunk
                if ended:
                    break
                size = self.chunk_size

    # -- in-process delivery -----------------------------------------------------

    def run_pending(self, max_rows: int | None = None) -> int:
        """Claim and carry out pending rows until none is left; returns rows done.

        Regenerations go first, and again between batches of rows (a reader is
        waiting for each; steady publishing must not starve them).
        """
        done = 0
        while max_rows is None or done < max_rows:
            limit = CLAIM_ROWS if max_rows is None else min(CLAIM_ROWS, max_rows - done)
            claimed, finished = self.run_pass(limit)
            if not claimed:
                break
            done += finished
        return done

    def run_pass(self, limit: int = CLAIM_ROWS) -> tuple[int, int]:
        """One pass: the regenerations waiting, then one claim of up to ``limit``
        rows carried out; returns ``(rows claimed, rows done)``. A runner that
        waits between passes lets publishes gather into larger batches."""
        self.regenerations.run()
        rows = self.canonical.outbox.claim(self.now_ms(), LEASE_MS, limit=limit)
        if not rows:
            return 0, 0
        claimed = len(rows)
        try:
            done, rows = self.batcher.run(rows)
        except Exception:
            log.exception("a batch of %d outbox rows failed; will retry", len(rows))
            for row in rows:
                self.canonical.outbox.release(row)
            raise
        for row in rows:
            try:
                self.run(row)
            except Exception:
                log.exception("outbox row %d failed; will retry", row.id)
                self.canonical.outbox.release(row)
                raise
            done += 1
        return claimed, done
