"""Operating a deployment: health, delivery figures, draining the outbox,
rebuilding feeds from the canonical store, reader tiers and fan-out
reclassification."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from tidings.canonical.store import CanonicalStore
from tidings.core.fanout import Strategy
from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.results import Stats
from tidings.delivery.deliverer import Deliverer
from tidings.delivery.rebuild import Upkeep
from tidings.stores.base import TimelineStore


class AdminService:
    """``feeds.admin``: what ``tidings`` commands and ``/metrics`` use."""

    def __init__(
        self,
        canonical: CanonicalStore,
        timeline: TimelineStore,
        deliverer: Deliverer,
        upkeep: Upkeep,
        feed_groups: Mapping[str, FeedGroup],
        *,
        now_ms: Callable[[], int],
        flush_reads: Callable[[], None],
    ) -> None:
        self._canonical = canonical
        self._timeline = timeline
        self._deliverer = deliverer
        self._upkeep = upkeep
        self._feed_groups = feed_groups
        self._now_ms = now_ms
        self._flush_reads = flush_reads

    def health(self) -> int:
        """Touch both stores; returns the number of pending deliveries."""
        feed_group = next(iter(self._feed_groups))
        cap = self._deliverer.cap(feed_group)
        self._timeline.page(f"{feed_group}:healthz", limit=1, before=None, cap=cap)
        return self._canonical.outbox.pending()

    def drain(self) -> int:
        """Carry out every pending delivery (and regeneration) in this thread;
        returns outbox rows done."""
        return self._deliverer.run_pending()

    def pending(self) -> int:
        """Outbox rows not yet carried out."""
        return self._canonical.outbox.pending()

    def stats(self) -> Stats:
        """Delivery figures for monitoring: rows delivered by this process, rows
        pending, and the age of the oldest pending one (0 when none)."""
        pending, oldest = self._canonical.outbox.outbox_stats()
        lag = max(0.0, (self._now_ms() - oldest) / 1000) if oldest is not None else 0.0
        return Stats(delivered=self._deliverer.completed, pending=pending, lag_seconds=lag)

    def delivered(self) -> int:
        """Outbox rows carried out by this process since it started (no store is
        asked, unlike :meth:`stats`)."""
        return self._deliverer.completed

    def flush_reads(self) -> None:
        """Write the reads noted in memory to the canonical store (the background
        thread does so every second); wakes idle feeds read meanwhile."""
        self._flush_reads()

    def fanout_strategy(self, source: str) -> Strategy:
        """How ``source`` reaches its flat followers: ``push``, ``pull`` or ``draining``."""
        parse_feed_id(source, self._feed_groups)
        return self._canonical.fanout.strategy(source)

    def known_feeds(self) -> list[str]:
        """Every feed of a configured group that the canonical store knows of
        (published to, addressed, or following), sorted."""
        groups = self._feed_groups
        return [f for f in self._canonical.history.feeds() if f.partition(":")[0] in groups]

    def feeds_written_since(self, ms: int) -> list[str]:
        """Every feed of a configured group that a delivery, a history copy or an
        unfollow's removal accepted at or after ``ms`` (milliseconds since the
        epoch) may have written to, sorted: the feeds to rebuild after the timeline
        store lost its writes since then (a Redis failover to a replica that
        lagged behind its master). Activities deleted since are not found."""
        groups = self._feed_groups
        found = self._canonical.history.feeds_since(ms)
        return [f for f in found if f.partition(":")[0] in groups]

    def rebuild(self, feeds: Iterable[str] | None = None) -> Iterator[str]:
        """Rebuild feeds (None: every feed the canonical store knows) in the timeline
        and aggregate stores from the canonical store; yields each feed when done.

        A flat feed gets the newest ``max_length`` entries of its history (what
        reading past the cap walks). An aggregated feed gets its newest
        ``REBUILD_AGGREGATED_HISTORY`` activities, aggregated again under the keys fixed
        at publish, with the seen/read state the recorded marks give them.
        """
        if feeds is None:
            chosen = self.known_feeds()
        else:
            chosen = list(feeds)
            for feed in chosen:
                parse_feed_id(feed, self._feed_groups)
        for feed in chosen:
            self._deliverer.rebuild(feed)
            yield feed

    def sweep_readers(self) -> list[str]:
        """Sort follows into delivery tiers by when their follower was last read,
        and idle the follower feeds not read for ``inactive_days``: deliveries
        skip them and their stores are cleared. Returns the feeds newly idle.

        An idle feed read again is rebuilt from the canonical store (reads are
        served from there meanwhile). ``tidings reclassify`` runs this.
        """
        return self._upkeep.sweep_readers()

    def reclassify(self, threshold: int | None = None) -> list[tuple[str, Strategy, Strategy]]:
        """Move sources between push and pull by follower count (with hysteresis);
        returns the changes as ``(source, before, after)``.

        ``threshold`` overrides ``pull_threshold`` for this run. A source going
        back to push is first marked draining (delivered again, still merged by
        readers), then its newest activities are copied into its flat
        followers, and only then is it pushed: no reader misses an entry, and
        a run cut short is finished by the next one.
        """
        return self._upkeep.reclassify(threshold)
