"""Distributed delivery: a claimed row's direct targets written here, its
followers split into parts and handed to workers (Celery), one task each, or
small rows sent as batches; each part carried out idempotently where it lands."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from tidings.canonical.rows import Claimed, CopyRow, OutboxRow, Part
from tidings.canonical.store import CanonicalStore
from tidings.core.fanout import OutboxKind
from tidings.core.limits import CLAIM_ROWS
from tidings.delivery.batch import Batcher
from tidings.delivery.copies import Copier
from tidings.delivery.planner import Planner

log = logging.getLogger("tidings.delivery.distributed")


class Deliverer(Protocol):
    """What distributed delivery needs of :class:`tidings.delivery.deliverer.Deliverer`."""

    canonical: CanonicalStore
    planner: Planner
    batcher: Batcher
    copier: Copier
    chunk_size: int

    def now_ms(self) -> int: ...

    def run(self, row: Claimed) -> bool: ...

    def write_row_direct(self, row: OutboxRow) -> None: ...

    def complete(self, row: Claimed) -> bool: ...

    def pushes_flat(self, row: OutboxRow) -> bool: ...

    def take_back_unfollowed(
        self, rows: Sequence[OutboxRow], written: Mapping[str, Sequence[str]], started_ms: int
    ) -> None: ...

    def count_completed(self, rows: int) -> None: ...


class DistributedDelivery:
    """The deliverer's work as a dispatcher and its workers see it."""

    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer

    def dispatch_pending(
        self,
        send: Callable[[Sequence[Part]], None],
        lease_ms: int,
        send_batch: Callable[[Sequence[OutboxRow]], None] | None = None,
    ) -> int:
        """Claim pending rows, write their direct targets and hand their undone
        parts to ``send``; returns the rows claimed. Copy rows are carried out
        here (bounded: up to 1,000 follows of up to 1,000 activities each).

        A row stays leased for ``lease_ms`` after its parts are sent: if it is
        still pending then (a worker died holding a part, the broker lost a
        message), the next dispatch sends its undone parts again.
        """
        claimed = self.deliverer.canonical.outbox.claim(
            self.deliverer.now_ms(), lease_ms, limit=CLAIM_ROWS
        )
        rows: Sequence[Claimed] = claimed
        if send_batch is not None:
            # Small deliveries travel as batches: a task each would cost more
            # than the writes (Celery runs hundreds of tasks a second).
            batches, rows = self.deliverer.batcher.cut(claimed)
            for n, batch in enumerate(batches):
                try:
                    send_batch(batch)
                except Exception:
                    log.exception("sending a batch of %d rows failed; will retry", len(batch))
                    for unsent in batches[n:]:
                        for held in unsent:
                            self.deliverer.canonical.outbox.release(held)
                    raise
        for row in rows:
            try:
                self._dispatch(row, send)
            except Exception:
                log.exception("dispatch of outbox row %d failed; will retry", row.id)
                self.deliverer.canonical.outbox.release(row)
                raise
        return len(claimed)

    def run_batch(self, keys: Sequence[tuple[int, int]]) -> int:
        """Carry out the rows a dispatcher sent as a batch (``(row id, claim
        token)``), those still under its claims; returns the rows completed.
        Idempotent: a batch run twice writes the same entries."""
        rows = self.deliverer.canonical.outbox.held_rows(keys)
        done, rest = self.deliverer.batcher.run(rows)
        for row in rest:  # its source grew past a batch meanwhile
            done += self.deliverer.run(row)
        return done

    def _dispatch(self, row: Claimed, send: Callable[[Sequence[Part]], None]) -> None:
        if isinstance(row, CopyRow):
            self.deliverer.copier.copy(row)
            return
        self.deliverer.write_row_direct(row)
        parts = self.deliverer.canonical.outbox.split(
            row, self.deliverer.chunk_size, self.deliverer.now_ms()
        )
        if parts:
            send(parts)
        elif parts is not None:  # no followers: nothing is left to hand out
            self.deliverer.complete(row)

    def run_part(self, part: Part) -> bool:
        """Deliver ``part``; True when it completed its row. Idempotent: a part run
        twice (a retry, a re-send) writes the same entries and changes nothing."""
        recorded = self.deliverer.canonical.outbox.recorded_part(part)
        if recorded is None:
            return False  # done already, or its row was cancelled or completed
        part = recorded
        row = self.deliverer.canonical.outbox.outbox_row(part.row_id)
        if row is None:
            return False  # cancelled by remove_activity meanwhile
        started = self.deliverer.now_ms()
        followers = self.deliverer.canonical.outbox.part_followers(row.source, part)
        if row.kind == OutboxKind.DELIVER:
            hidden = self.deliverer.canonical.hidden.hidden_of([row.activity_id]).get(
                row.activity_id
            )
            if hidden:
                followers = [f for f in followers if f not in hidden]
        # As in the in-process runner: flat followers of a pulled source merge
        # it at read time (parts still span every follower).
        flat = self.deliverer.pushes_flat(row)
        writes = self.deliverer.planner.plan(
            row.kind, followers, row.activity, row.aggregate_keys, presorted=True, flat=flat
        )
        for write in writes:
            write()
        self.deliverer.take_back_unfollowed([row], {row.source: followers}, started)
        if not self.deliverer.canonical.outbox.finish_part(part):
            return False
        self.deliverer.count_completed(1)
        return True
