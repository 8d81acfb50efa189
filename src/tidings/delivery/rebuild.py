"""Repair: feeds rebuilt from the canonical store, and the upkeep that needs it.

:class:`Rebuilder` rebuilds one feed, on request or when a returning reader
of an idle feed queued it (the runners carry those out, through the
deliverer). :class:`Upkeep` is what ``tidings reclassify`` runs: sorting
readers into delivery tiers and idling the unread (whose feeds are rebuilt
when read again), and moving sources between push and pull fan-out
(backfilling flat followers on the way back to push).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from tidings.canonical.store import CanonicalStore
from tidings.core.activity import Activity
from tidings.core.aggregation import Member
from tidings.core.errors import ValidationError
from tidings.core.fanout import Strategy, backfill_plan, by_feed_group, classify, merge_newest
from tidings.core.feeds import FeedGroup, FeedKind
from tidings.delivery.planner import Planner
from tidings.settings import Settings
from tidings.stores.base import AggregateStore, TimelineStore

log = logging.getLogger("tidings.delivery.rebuild")

#: Activities a rebuild aggregates again into an aggregated feed (its newest).
REBUILD_AGGREGATED_HISTORY = 10_000


class Rebuilder:
    def __init__(self, canonical: CanonicalStore, planner: Planner) -> None:
        self.canonical = canonical
        self.planner = planner
        self.feed_groups = planner.feed_groups

    # The planner's stores, as the deliverer that shares it has them now.

    @property
    def timeline(self) -> TimelineStore:
        return self.planner.timeline

    @property
    def aggregates(self) -> AggregateStore:
        return self.planner.aggregates

    def rebuild(self, feed: str) -> None:
        """Rebuild ``feed`` in its store from the canonical store.

        A flat feed gets the newest ``max_length`` entries of its history (what
        reading past the cap walks); an aggregated feed, its newest
        ``REBUILD_AGGREGATED_HISTORY`` activities aggregated again under the keys fixed
        at publish; a notification feed's aggregates get back the seen/read state
        its recorded marks give them.

        The feed is cleared *before* its history is read: an activity a
        concurrent delivery writes before the clear was committed before the
        read, and so is in the history; one written after the clear stays.
        Deliveries may run meanwhile; nothing they write is lost.
        """
        feed_group = feed.partition(":")[0]
        config = self.feed_groups[feed_group]
        aggregated = config.aggregated
        limit = REBUILD_AGGREGATED_HISTORY if aggregated else config.max_length
        cap = self.planner.cap(feed_group)
        if aggregated:
            self.aggregates.clear([feed])
        else:
            self.timeline.clear([feed])
        entries = self.canonical.history.history(feed, before=None, floor=cap.floor, limit=limit)
        newest = merge_newest(entries.lists, limit)
        if aggregated:
            found = [Activity.from_json(entries.docs[i]) for i in newest[::-1]]
            keys = self.canonical.activities.aggregate_keys([a.id for a in found])
            members = self.planner.members(feed_group, found, keys)
            self.aggregates.add([feed], members, self.planner.aggregate_cap(feed_group))
            if config.kind == FeedKind.NOTIFICATION:
                self._restore_marks(feed, members)
        else:
            self.timeline.add([feed], newest, cap)

    def _restore_marks(self, feed: str, members: Sequence[Member]) -> None:
        """Mark the rebuilt aggregates of a notification feed as their recorded marks
        say: an aggregate is seen (read) if marked seen (read) — by key, or all at
        once — after its last member was accepted."""
        (every_seen, every_read), marks = self.canonical.marks.marks(feed)
        if not (every_seen or marks):
            return
        accepted = self.canonical.marks.accepted_us([m.id for m in members])
        last: dict[str, int] = {}
        for m in members:
            last[m.aggregate] = max(last.get(m.aggregate, 0), accepted.get(m.id, 0))
        seen: list[str] = []
        read: list[str] = []
        for key, newest in last.items():
            seen_us, read_us = marks.get(key, (0, 0))
            if max(read_us, every_read) >= newest:
                read.append(key)
            elif max(seen_us, every_seen) >= newest:
                seen.append(key)
        if seen:
            self.aggregates.mark(feed, seen, read=False)
        if read:
            self.aggregates.mark(feed, read, read=True)


class Upkeep:
    """Reader tiers and idling, and fan-out reclassification.

    ``flush_reads`` records the reads noted in memory (a sweep must see them);
    ``states_changed`` tells this process's readers to look feed states up
    again; ``notify`` tells the runner there is work.
    """

    def __init__(
        self,
        settings: Settings,
        canonical: CanonicalStore,
        timeline: TimelineStore,
        aggregates: AggregateStore,
        planner: Planner,
        *,
        flush_reads: Callable[[], None],
        states_changed: Callable[[], None],
        notify: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.canonical = canonical
        self.timeline = timeline
        self.aggregates = aggregates
        self.planner = planner
        self.feed_groups: Mapping[str, FeedGroup] = planner.feed_groups
        self.now_ms = planner.now_ms
        self.flush_reads = flush_reads
        self.states_changed = states_changed
        self.notify = notify

    def sweep_readers(self) -> list[str]:
        self.flush_reads()
        days = self.settings.inactive_days
        can_idle = {g for g, c in self.feed_groups.items() if c.kind != FeedKind.NOTIFICATION}
        chunks = self.canonical.readers.sweep_readers(
            self.now_ms,
            recent_ms=int(self.settings.recent_read_hours * 3_600_000),
            idle_ms=int(days * 86_400_000) if days > 0 else None,
            can_idle=lambda feed: feed.partition(":")[0] in can_idle,
        )
        idled: list[str] = []
        for part in chunks:
            if not part:
                continue
            self.states_changed()
            try:
                for feed_group, feeds in by_feed_group(part, presorted=True).items():
                    if self.feed_groups[feed_group].aggregated:
                        self.aggregates.clear(feeds)
                    else:
                        self.timeline.clear(feeds)
            finally:
                # A feed read between the sweep's commit and the clear woke up
                # and may have been rebuilt already: the clear undid that (or
                # part of it, if the clear failed), so again.
                if self.canonical.readers.regenerate(part, self.now_ms()):
                    self.notify()
            idled += part
        if idled:
            log.info("%d follower feeds idle (not read for %g days)", len(idled), days)
        return idled

    def reclassify(self, threshold: int | None) -> list[tuple[str, Strategy, Strategy]]:
        limit = self.settings.pull_threshold if threshold is None else threshold
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ValidationError("must be a non-negative integer", field="threshold")
        hysteresis = self.settings.pull_hysteresis
        changes: list[tuple[str, Strategy, Strategy]] = []
        for source, followers, current in self.canonical.fanout.fanout_candidates(limit):
            target = classify(current, followers, limit, hysteresis)
            if target == current:
                continue
            if target == Strategy.PUSH:
                if current == Strategy.PULL:
                    self.canonical.fanout.set_strategy(source, Strategy.DRAINING, self.now_ms())
                self._backfill(source)
            self.canonical.fanout.set_strategy(source, target, self.now_ms())
            log.info("fan-out of %s: %s -> %s (%d followers)", source, current, target, followers)
            changes.append((source, current, target))
        return changes

    def _backfill(self, source: str) -> None:
        """Copy the newest activities of ``source`` into its flat followers, as far
        as each follower's cap and history go (idempotent)."""
        caps = {
            g: self.planner.cap(g)
            for g, config in self.feed_groups.items()
            if not config.aggregated
        }
        if not caps:
            return
        newest = self.canonical.activities.newest_ids(
            source, max(c.max_length for c in caps.values())
        )
        after = None
        while spans := self.canonical.follows.follower_spans(
            source, after, self.settings.delivery_chunk_size
        ):
            after = spans[-1][0]
            starts = dict(spans)
            for feed_group, feeds in by_feed_group([f for f, _ in spans], presorted=True).items():
                cap = caps.get(feed_group)
                if cap is None:  # aggregated, or no longer configured
                    continue
                for copied, targets in backfill_plan(
                    newest[: cap.max_length], [(f, starts[f]) for f in feeds]
                ):
                    for ids, kept in self.canonical.hidden.without_hidden(targets, copied):
                        self.timeline.add(kept, ids, cap)
