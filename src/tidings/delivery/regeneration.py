"""Regenerations: rebuilds of idle feeds whose readers came back, queued by
the readers (:mod:`tidings.reading.gate`) and carried out by a runner
between deliveries."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tidings.canonical.rows import Regeneration
from tidings.canonical.store import CanonicalStore
from tidings.core.feeds import FeedGroup

log = logging.getLogger("tidings.delivery.regeneration")

#: How long a runner owns a regeneration before another may take it over.
REGENERATION_LEASE_MS = 30_000
#: When a failed regeneration is tried again.
REGENERATION_RETRY_MS = 10_000
#: Regenerations a runner carries out before turning to deliveries again.
REGENERATIONS_PER_TURN = 64


class Regenerations:
    """Claims queued rebuilds and carries them out, never raising."""

    def __init__(
        self,
        canonical: CanonicalStore,
        rebuild: Callable[[str], None],
        feed_groups: Mapping[str, FeedGroup],
        now_ms: Callable[[], int],
    ) -> None:
        self.canonical = canonical
        self.rebuild = rebuild
        self.feed_groups = feed_groups
        self.now_ms = now_ms

    def run(self, limit: int = REGENERATIONS_PER_TURN) -> int:
        """Try up to ``limit`` rebuilds of feeds whose owners came back after being
        idle; returns the rebuilds that succeeded. Bounded (failures count), so
        a wave of returning readers shares the runner with deliveries instead
        of holding them up."""
        tried = done = 0
        while tried < limit:
            jobs = self.canonical.readers.claim_regenerations(
                self.now_ms(), REGENERATION_LEASE_MS, limit=min(16, limit - tried)
            )
            if not jobs:
                break
            for job in jobs:
                tried += 1
                done += self.regenerate(job)
        return done

    def regenerate(self, job: Regeneration) -> bool:
        """Carry out one rebuild; a failure is logged and retried later (after
        ``REGENERATION_RETRY_MS``), never raised: reads of the feed are served
        from the canonical store meanwhile, and deliveries must go on."""
        try:
            if job.feed.partition(":")[0] in self.feed_groups:
                self.rebuild(job.feed)
            self.canonical.readers.regenerated(job, self.now_ms())
        except Exception:
            log.exception(
                "rebuild of %s failed; retrying in %d ms", job.feed, REGENERATION_RETRY_MS
            )
            self.canonical.readers.retry_regeneration(job, self.now_ms() + REGENERATION_RETRY_MS)
            return False
        return True
