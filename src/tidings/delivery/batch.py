"""Deliveries of many activities at once.

Most activities reach few feeds (a mean of ~50 on a power-law graph), and
carrying each out alone costs the same fixed round trips whatever its size:
a followers query, a store call per feed group, a commit to complete it.
A batch pays them once for many rows: the followers of all its sources in two
queries (one, for sources whose follower lists are kept unchanged), one store call per flat feed group for every (feed, id) pair of the
batch (each feed trimmed once), and one transaction completing every row.

Only fresh deliveries of sources with at most :data:`SMALL_SOURCE` followers
(and no more than a delivery chunk) are batched; the rest (retractions, rows
resumed from a recorded position, big sources, history copies) go one at a
time through the chunked path, which records progress as it goes.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol, TypeGuard

from tidings.canonical.follower_lists import FollowerList
from tidings.canonical.rows import Claimed, OutboxRow
from tidings.canonical.store import CanonicalStore
from tidings.core.clock import Deadline
from tidings.core.fanout import OutboxKind, direct_targets
from tidings.delivery.planner import Delivery, Planner
from tidings.stores.base import send_together

log = logging.getLogger("tidings.delivery.batch")

#: ``(follower, since_row)`` of each small source's follows.
Follows = dict[str, FollowerList]

#: Followers a source may have for its deliveries to be batched.
SMALL_SOURCE = 2_000
#: (feed, id) pairs a batch is cut at: bounds a store call and its memory.
BATCH_ENTRIES = 100_000
#: Direct writes remembered as done at publish (see :class:`DirectWrites`).
DIRECT_WRITES_KEPT = 100_000
#: How long a runner waits for a publish's direct writes under way before it
#: makes them itself (they are idempotent, and the bus announces an activity
#: once per feed).
FLIGHT_WAIT_SECONDS = 5.0


class DirectWrites:
    """Activities whose direct targets (own feed, ``to``) this process wrote at
    publish, so that its runner does not write them a second time.

    A publish marks its activities in flight (:meth:`begin`) inside its
    transaction, before its outbox rows can be claimed, and ends the flight
    once its writes are made (:meth:`add_many`) or failed (:meth:`drop`): a
    runner that claims a row meanwhile waits for that (:meth:`take`) rather
    than writing the feed, and announcing it, a second time. (A delivery
    process learns of the writes only once they are made: a pass of its that
    claims the row sooner makes them again.)

    Held in memory only: a row carried out by another process (a Celery
    worker, another API worker's runner, a runner after a restart) writes
    them again, which is idempotent; the bus announces each activity once
    per feed whichever process writes it (:mod:`tidings.bus.redis`).
    Bounded; the oldest are forgotten first (their rows are long done).
    """

    def __init__(self, limit: int = DIRECT_WRITES_KEPT) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()
        self._flight: set[str] = set()
        self._landed = threading.Condition(self._lock)
        #: Also told of each batch added: a runner in another process
        #: (:class:`tidings.task_runners.process.ProcessRunner`) keeps its own.
        self.forward: Callable[[Sequence[str]], None] | None = None

    def begin(self, activity_ids: Sequence[str]) -> None:
        """The direct writes of ``activity_ids`` are under way."""
        with self._lock:
            self._flight.update(activity_ids)

    def drop(self, activity_ids: Sequence[str]) -> None:
        """Those writes failed, or their activities were not stored: the
        runner makes them."""
        with self._lock:
            self._flight.difference_update(activity_ids)
            self._landed.notify_all()

    def add_many(self, activity_ids: Sequence[str]) -> None:
        """Remember ``activity_ids`` as written; called after a commit, so it
        never raises (forgetting costs a second, idempotent write)."""
        if self.forward is not None:
            # This process's deliveries are another's: it keeps them.
            try:
                self.forward(activity_ids)
            except Exception:
                log.exception("direct writes of %d activities not passed on", len(activity_ids))
            self.drop(activity_ids)
            return
        with self._lock:
            for activity_id in activity_ids:
                self._ids[activity_id] = None
            while len(self._ids) > self._limit:
                self._ids.popitem(last=False)
            self._flight.difference_update(activity_ids)
            self._landed.notify_all()

    def take(self, activity_id: str) -> bool:
        """Whether the activity's direct writes were done (and forget it);
        while they are under way, waits for them."""
        with self._lock:
            deadline: Deadline | None = None
            while activity_id in self._flight:
                deadline = deadline or Deadline(FLIGHT_WAIT_SECONDS)  # (a real wait)
                if deadline.passed:
                    log.warning("direct writes of %s still under way; made again", activity_id)
                    self._flight.discard(activity_id)
                    break
                self._landed.wait(deadline.left())
            if activity_id not in self._ids:
                return False
            del self._ids[activity_id]
            return True


def batchable(row: Claimed) -> TypeGuard[OutboxRow]:
    """A fresh delivery: no progress recorded, so it may be done in one go."""
    return isinstance(row, OutboxRow) and row.kind == OutboxKind.DELIVER and row.position is None


class Deliverer(Protocol):
    """What a batch needs of :class:`tidings.delivery.deliverer.Deliverer`."""

    canonical: CanonicalStore
    planner: Planner
    chunk_size: int
    now_ms: Callable[[], int]
    direct: DirectWrites

    @property
    def joins_writes(self) -> bool: ...

    def pushes_flat_many(self, rows: Sequence[OutboxRow]) -> set[int]: ...

    def take_back_unfollowed(
        self, rows: Sequence[OutboxRow], written: Mapping[str, Sequence[str]], started_ms: int
    ) -> None: ...

    def count_completed(self, rows: int) -> None: ...


class Batcher:
    """Carries out batches of small deliveries for a deliverer."""

    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer
        self.canonical = deliverer.canonical

    def run(self, rows: Sequence[Claimed]) -> tuple[int, list[Claimed]]:
        """Carry out the batchable ``rows`` of small sources; returns how many
        completed and the rows left to the one-at-a-time path."""
        fresh = [r for r in rows if batchable(r)]
        rest = [r for r in rows if not batchable(r)]
        if not fresh:
            return 0, rest
        sources = sorted({r.source for r in fresh})
        started = self.deliverer.now_ms()
        # A source bigger than a chunk is delivered in chunks, its progress
        # recorded as it goes.
        at_most = min(SMALL_SOURCE, self.deliverer.chunk_size)
        follows = self.canonical.follows.small_followers(sources, at_most)
        small = [r for r in fresh if r.source in follows]
        rest += [r for r in fresh if r.source not in follows]
        completed = 0
        for batch in _cut(small, lambda r: len(follows[r.source])):
            completed += self._deliver(batch, follows, started)
        return completed, rest

    def cut(self, rows: Sequence[Claimed]) -> tuple[list[list[OutboxRow]], list[Claimed]]:
        """The batchable ``rows`` of small sources cut into batches (by follower
        counts: a distributed runner sends each batch as one task), and the
        rest, for the one-at-a-time path."""
        fresh = [r for r in rows if batchable(r)]
        rest = [r for r in rows if not batchable(r)]
        at_most = min(SMALL_SOURCE, self.deliverer.chunk_size)
        counts = self.canonical.follows.follower_counts([r.source for r in fresh])
        small = [r for r in fresh if counts.get(r.source, 0) <= at_most]
        rest += [r for r in fresh if counts.get(r.source, 0) > at_most]
        return list(_cut(small, lambda r: counts.get(r.source, 0))), rest

    def _deliver(self, rows: Sequence[OutboxRow], follows: Follows, started: int) -> int:
        deliverer = self.deliverer
        flat = deliverer.pushes_flat_many(rows)
        # Feeds whose owner took an activity out while it waited here.
        hidden = self.canonical.hidden.hidden_of([r.activity_id for r in rows])
        deliveries: list[Delivery] = []
        for row in rows:
            keys = row.aggregate_keys
            # Direct targets join the batch's writes, unless publish wrote them.
            if not deliverer.direct.take(row.activity_id):
                direct = direct_targets(row.source, row.targets)
                deliveries.append(Delivery(row.activity, keys, direct, flat=True))
            reached = _reached(row, follows)
            if row.activity_id in hidden:
                reached = [f for f in reached if f not in hidden[row.activity_id]]
            deliveries.append(
                Delivery(row.activity, keys, reached, flat=row.id in flat, presorted=True)
            )
        planner = deliverer.planner
        writes = planner.plan_many(deliveries, announce=False)
        written = {s: [f for f, _ in reached] for s, reached in follows.items()}

        def write_and_complete() -> list[int]:
            # Several writes to Redis share one round trip.
            send_together(writes)
            deliverer.take_back_unfollowed(rows, written, started)
            return self.canonical.outbox.complete_many(rows)

        if deliverer.joins_writes:
            # The entries and the rows' completion commit together: one commit
            # (SQLite's costs one write of every page it dirtied), and a
            # crash leaves the batch either all done or all to do.
            db = self.canonical.db
            with db.write() as conn, db.joining(conn):
                done = write_and_complete()
        else:
            done = write_and_complete()
        announcement = planner.announcement(deliveries) if writes else None
        if announcement is not None:
            announcement()
        deliverer.count_completed(len(done))
        return len(done)


def _reached(row: OutboxRow, follows: Follows) -> list[str]:
    """The followers of ``row``'s source that followed before it was accepted."""
    return [f for f, since_row in follows[row.source] if since_row < row.id]


def _cut(
    rows: Sequence[OutboxRow], followers: Callable[[OutboxRow], int]
) -> Iterator[list[OutboxRow]]:
    """``rows`` in batches of about :data:`BATCH_ENTRIES` entries, in order."""
    batch: list[OutboxRow] = []
    entries = 0
    for row in rows:
        size = followers(row) + 1 + len(row.targets)
        if batch and entries + size > BATCH_ENTRIES:
            yield batch
            batch, entries = [], 0
        batch.append(row)
        entries += size
    if batch:
        yield batch
