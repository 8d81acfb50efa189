"""Planning deliveries: which store, which cap, which aggregate, which writes.

Nothing here reads the canonical store: given the configured feed groups and
the activity, the planner answers what its feeds hold it as (an id in a flat
feed, a member of an aggregate in an aggregated one) and prepares the store writes
that deliver or retract it. The deliverer decides when they run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tidings.core.activity import Activity
from tidings.core.aggregation import AggregateCap, KeyTemplate, Member, member
from tidings.core.fanout import OutboxKind, by_feed_group
from tidings.core.feeds import FeedGroup
from tidings.stores.base import AggregateStore, Cap, TimelineStore
from tidings.stores.caps import Caps

log = logging.getLogger("tidings.delivery.planner")

#: A prepared store write.
Write = Callable[[], None]
#: One activity a plan delivered: with its aggregate keys and the feeds written.
Written = tuple[Activity, Mapping[str, str], Sequence[str]]
#: Told what a plan's writes did once they have all run: the kind, and each
#: activity written (live events).
Changes = Callable[[OutboxKind, Sequence[Written]], None]
#: A batch whose feeds share their ids this many at a time (on average) is
#: written one call per set of ids instead of one entry list per feed.
SHARED_IDS_MIN_FEEDS = 8


@dataclass(frozen=True, slots=True)
class Delivery:
    """One activity to write into ``feeds`` (a part of a batch); without
    ``flat``, only into the aggregated ones among them."""

    activity: Activity
    keys: Mapping[str, str]
    feeds: Sequence[str]
    flat: bool = True
    #: ``feeds`` are sorted and unique (a follower list): split by feed group
    #: without touching every feed when they all share one.
    presorted: bool = False


class Planner:
    def __init__(
        self,
        feed_groups: Mapping[str, FeedGroup],
        timeline: TimelineStore,
        aggregates: AggregateStore,
        now_ms: Callable[[], int],
        changes: Changes | None = None,
    ) -> None:
        self.feed_groups = feed_groups
        self.timeline = timeline
        self.aggregates = aggregates
        self.now_ms = now_ms
        self.caps = Caps(feed_groups, now_ms)
        #: Told what each plan's writes did (wiring connects the live events,
        #: :mod:`tidings.bus.emitter`, through a :class:`~tidings.core.hooks.Hook`).
        self.changes = changes
        self.templates = {
            name: KeyTemplate.parse(g.template_source)
            for name, g in feed_groups.items()
            if g.aggregated
        }

    def cap(self, feed_group: str) -> Cap:
        """The limits of a flat feed group's feeds, its age floor as of now."""
        return self.caps.cap(feed_group)

    def aggregate_cap(self, feed_group: str) -> AggregateCap:
        return self.caps.aggregate_cap(feed_group)

    def aggregate_keys(self, activity: Activity) -> dict[str, str]:
        """The aggregate ``activity`` joins in each aggregated feed group (fixed at publish)."""
        return {feed_group: t.render(activity) for feed_group, t in self.templates.items()}

    def members(
        self,
        feed_group: str,
        activities: Sequence[Activity],
        keys: Mapping[str, Mapping[str, str]],
    ) -> list[Member]:
        """The activities as feeds of an aggregated ``feed_group`` hold them; ``keys`` are the
        aggregate keys fixed at publish, by activity id."""
        return [self.member(feed_group, a, keys.get(a.id, {})) for a in activities]

    def member(self, feed_group: str, activity: Activity, keys: Mapping[str, str]) -> Member:
        # A key fixed at publish wins: removing an activity must find the aggregate
        # it joined even after its `extra` or the aggregate's template changed.
        key = keys.get(feed_group)
        if key is None:
            return member(self.templates[feed_group], activity)
        return Member(activity.id, key, activity.actor)

    def plan_many(self, deliveries: Sequence[Delivery], *, announce: bool = True) -> list[Write]:
        """The store writes of a batch of deliveries: one per feed group, for all
        of its (feed, entry) pairs; then, unless ``announce`` is false, their
        live events (see :meth:`announcement`)."""
        flat: dict[str, dict[str, list[str]]] = {}
        aggregated: dict[str, dict[str, list[Member]]] = {}
        for d in deliveries:
            for feed_group, targets in by_feed_group(d.feeds, presorted=d.presorted).items():
                if feed_group not in self.feed_groups:
                    log.warning(
                        "skipping %d feeds of unconfigured feed group %r", len(targets), feed_group
                    )
                elif feed_group in self.templates:
                    member = self.member(feed_group, d.activity, d.keys)
                    members = aggregated.setdefault(feed_group, {})
                    for feed in targets:
                        members.setdefault(feed, []).append(member)
                elif d.flat:
                    entries = flat.setdefault(feed_group, {})
                    for feed in targets:
                        entries.setdefault(feed, []).append(d.activity.id)
        writes = [w for g, entries in flat.items() for w in self._flat_writes(entries, self.cap(g))]
        writes += [
            self.aggregates.prepare_add_each(m, self.aggregate_cap(g))
            for g, m in aggregated.items()
        ]
        announcement = self.announcement(deliveries) if announce and writes else None
        if announcement is not None:
            writes.append(announcement)
        return writes

    def announcement(self, deliveries: Sequence[Delivery]) -> Write | None:
        """The live events of ``deliveries``' writes, to run once they are
        written (committed, where they share a transaction); None when live
        events are off."""
        changes = self.changes
        if changes is None:
            return None
        done = [
            (d.activity, d.keys, d.feeds if d.flat else self._aggregated(d.feeds))
            for d in deliveries
        ]
        return functools.partial(changes, OutboxKind.DELIVER, done)

    def _aggregated(self, feeds: Sequence[str]) -> list[str]:
        return [f for f in feeds if f.partition(":")[0] in self.templates]

    def _flat_writes(self, entries: Mapping[str, Sequence[str]], cap: Cap) -> list[Write]:
        """The writes of a batch's entries into flat feeds. Feeds that get the
        same ids (followers of the same sources; all of them, for one activity)
        share them: the store gets them once rather than once a feed. Sent
        together (see ``send_together``), the writes to Redis take one round
        trip; to the database, they join one transaction."""
        shared: dict[tuple[str, ...], list[str]] = {}
        for feed, got in entries.items():
            shared.setdefault(tuple(got), []).append(feed)
        if len(shared) * SHARED_IDS_MIN_FEEDS > len(entries):
            return [self.timeline.prepare_add_each(entries, cap)]
        return [self.timeline.prepare_add(feeds, got, cap) for got, feeds in shared.items()]

    def plan(
        self,
        kind: OutboxKind,
        feeds: Sequence[str],
        activity: Activity,
        keys: Mapping[str, str],
        *,
        presorted: bool = False,
        flat: bool = True,
    ) -> list[Write]:
        """The store writes that deliver (or retract) an activity to ``feeds``, prepared;
        without ``flat``, only to the aggregated ones."""
        writes: list[Write] = []
        for feed_group, targets in by_feed_group(feeds, presorted=presorted).items():
            if feed_group not in self.feed_groups:
                # A feed group removed from configuration after delivery was planned.
                log.warning(
                    "skipping %d feeds of unconfigured feed group %r", len(targets), feed_group
                )
            elif not flat and feed_group not in self.templates:
                continue
            elif feed_group in self.templates:
                members, cap = (
                    [self.member(feed_group, activity, keys)],
                    self.aggregate_cap(feed_group),
                )
                if kind == OutboxKind.DELIVER:
                    writes.append(self.aggregates.prepare_add(targets, members, cap))
                else:
                    writes.append(functools.partial(self.aggregates.remove, targets, members, cap))
            elif kind == OutboxKind.DELIVER:
                writes.append(
                    self.timeline.prepare_add(targets, [activity.id], self.cap(feed_group))
                )
            else:
                remove = self.timeline.remove
                writes.append(
                    functools.partial(remove, targets, [activity.id], self.cap(feed_group))
                )
        changes = self.changes
        if changes is not None and writes:
            written = feeds if flat else self._aggregated(feeds)
            writes.append(functools.partial(changes, kind, [(activity, keys, written)]))
        return writes
