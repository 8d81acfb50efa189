"""Turning store writes into live events, for the watched feeds only.

The planner calls :meth:`LiveEvents.written` after each batch of store writes
has run (so what an event announces is readable), with the activities and the
feeds they went to; publishing and removing call :meth:`published` and
:meth:`deleted` for the firehose. A feed nobody watches costs a set lookup.

Flat feeds get ``activity.added`` / ``activity.removed`` with the activity as
a read shows it; aggregated feeds get ``group.updated`` with the aggregate as
``read_aggregates`` returns it (read once per feed per batch) and the ids of
the members the batch added (``added``: those the aggregate shows) or took
out (``withdrawn``), and notification feeds ``counts.changed`` as well.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from tidings.bus.base import BACK, Bus, Emit
from tidings.canonical.store import CanonicalStore
from tidings.core.activity import Activity
from tidings.core.aggregation import AggregatePage, Member
from tidings.core.events import FIREHOSE, EventType
from tidings.core.fanout import OutboxKind
from tidings.core.feeds import FeedGroup
from tidings.core.reactions import Reaction
from tidings.core.rules import Context

log = logging.getLogger("tidings.bus.emitter")

#: Aggregates read per feed to find the ones a batch changed (the newest: a new
#: member moves its aggregate to the top).
AGGREGATES_READ = 25

#: The aggregate an activity is a member of in an aggregated feed group, given the
#: keys fixed at its publish (the planner answers: a declared hook, so the
#: bus does not import delivery).
MemberOf = Callable[[str, Activity, Mapping[str, str]], Member]
#: Whether the rules of a feed's owner hide an activity (in its JSON shape) there.
Hidden = Callable[[str, Mapping[str, Any], Context], bool]
#: Given the feeds a batch writes, :data:`Hidden` for them (their owners'
#: rules looked up once, in one batch, for the whole of it).
Hiders = Callable[[Sequence[str]], Hidden]

#: ``(activity, its aggregate keys, the feeds written)``.
Written = tuple[Activity, Mapping[str, str], Sequence[str]]


def activity_data(activity: Activity) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(activity.to_json())
    return data


def firehose_data(feed: str, activity: Activity) -> dict[str, Any]:
    """An activity as the firehose carries it: with ``feed``, the feed it was
    published in, by which a user token's firehose decides whether the token
    may see it (the rule of reading that feed)."""
    data = activity_data(activity)
    data["feed"] = feed
    return data


class LiveEvents:
    def __init__(
        self,
        bus: Bus,
        feed_groups: Mapping[str, FeedGroup],
        member_of: MemberOf,
        read_aggregates: Callable[[str, int], AggregatePage],
        canonical: CanonicalStore,
        hiders: Hiders | None = None,
    ) -> None:
        #: Whether the rules of a feed's owner hide an activity there: no event.
        self.hiders = hiders
        self.bus = bus
        self.canonical = canonical
        self.member_of = member_of
        self.feed_groups = feed_groups
        #: A page of an aggregated feed as its owner reads it (their rules applied).
        self.read_aggregates = read_aggregates

    def written(self, kind: OutboxKind, items: Sequence[Written]) -> None:
        """Events for what ``items`` wrote (or, for a retraction, took out)."""
        try:
            self._written(kind, items)
        except Exception:
            log.exception("events of %d writes not made", len(items))

    def _written(self, kind: OutboxKind, items: Sequence[Written]) -> None:
        watched = self.bus.watching()
        if not watched:
            return
        out: list[Emit] = []
        #: feed -> aggregate key -> the ids of the activities the batch moved there
        touched: dict[str, dict[str, list[str]]] = {}
        #: ``[foreign_id, time]`` of the activities retracted that have a foreign_id
        identities = (
            {}
            if kind == OutboxKind.DELIVER
            else {a.id: i for a, _, _ in items if (i := foreign_identity(a)) is not None}
        )
        hidden: Hidden | None = None
        if self.hiders is not None and kind == OutboxKind.DELIVER:
            reached = set().union(*(watched.intersection(feeds) for _, _, feeds in items))
            hidden = self.hiders(sorted(reached)) if reached else None
        for activity, keys, feeds in items:
            hit = watched.intersection(feeds)
            if not hit:
                continue
            data: dict[str, Any] | None = None
            for feed in sorted(hit):
                feed_group = feed.partition(":")[0]
                config = self.feed_groups.get(feed_group)
                if config is None:
                    continue
                if hidden is not None and not config.aggregated:
                    # (An aggregated feed's events are made from its owner's view of
                    # the aggregates: a hidden member still moves its aggregate.)
                    data = data or activity_data(activity)
                    if hidden(feed, data, Context.TIMELINE):
                        continue
                if config.aggregated:
                    aggregate = self.member_of(feed_group, activity, keys).aggregate
                    moved = touched.setdefault(feed, {}).setdefault(aggregate, [])
                    moved.append(activity.id)
                elif kind == OutboxKind.DELIVER:
                    data = data or activity_data(activity)
                    out.append((feed, EventType.ACTIVITY_ADDED, data))
                else:
                    out.append((feed, EventType.ACTIVITY_REMOVED, removed_data(activity)))
        for feed, aggregates in touched.items():
            out.extend(self._aggregates(kind, feed, aggregates, identities))
        self.bus.emit(out)

    def _aggregates(
        self,
        kind: OutboxKind,
        feed: str,
        aggregates: Mapping[str, Sequence[str]],
        identities: Mapping[str, list[str]] | None = None,
    ) -> list[Emit]:
        """``group.updated`` for the aggregates of ``feed`` that the activities
        given (by aggregate key) joined or left; ``identities``: the
        ``[foreign_id, time]`` of those that left and have a foreign_id."""
        page = self.read_aggregates(feed, AGGREGATES_READ)
        out: list[Emit] = []
        shown = {g.key: g for g in page.results}
        for key in sorted(aggregates):
            found = shown.get(key)
            moved = list(dict.fromkeys(aggregates[key]))
            if found is not None:
                data = _json(found.to_dict())
                if kind == OutboxKind.DELIVER:
                    # Only the members the owner's view shows: one their rules
                    # hide is not named, as a flat feed sends no event for it.
                    members = {a["id"] for a in data["activities"]}
                    data["added"] = [i for i in moved if i in members]
                else:
                    data["withdrawn"] = moved
                    _with_foreign_ids(data, moved, identities)
                out.append((feed, EventType.AGGREGATE_UPDATED, data))
            elif kind != OutboxKind.DELIVER:
                # Emptied by the retraction (or, rarely, now below the aggregates read).
                gone = {"group": key, "removed": True, "withdrawn": moved}
                out.append(
                    (feed, EventType.AGGREGATE_UPDATED, _with_foreign_ids(gone, moved, identities))
                )
        if page.unseen is not None:
            out.append(_counts(feed, page.unseen, page.unread or 0))
        return out

    def taken_back(self, feed: str, activity_ids: Sequence[str], aggregates: Sequence[str]) -> None:
        """Events for what an unfollow took out of ``feed``: ``activity_ids``,
        and for an aggregated feed the aggregate each of them left (in order)."""
        try:
            if feed not in self.bus.watching():
                return
            if aggregates:
                # (parallel: the i-th activity left the i-th aggregate)
                left: dict[str, list[str]] = {}
                for activity_id, key in zip(activity_ids, aggregates, strict=True):
                    left.setdefault(key, []).append(activity_id)
                self.bus.emit(self._aggregates(OutboxKind.RETRACT, feed, left))
            else:
                removed = EventType.ACTIVITY_REMOVED
                self.bus.emit([(feed, removed, {"id": i}) for i in activity_ids])
        except Exception:
            log.exception("events of an unfollow from %s not made", feed)

    def copied(self, entries: Mapping[str, Sequence[str]]) -> None:
        """A follow's copy of history brought ``entries`` (feed -> activity
        ids) into their feeds without an event: the watched ones record them
        as there, so that their next removal is news (:data:`BACK`)."""
        try:
            watched = self.bus.watching()
            self.bus.emit(
                [
                    (f, BACK, {"ids": list(ids)})
                    for f, ids in entries.items()
                    if ids and f in watched
                ]
            )
        except Exception:
            log.exception("copies into %d feeds not recorded", len(entries))

    def counts_changed(
        self,
        feed: str,
        unseen: int,
        unread: int,
        marked: Mapping[str, bool | list[str]] | None = None,
    ) -> None:
        """``counts.changed`` for a notification feed just marked seen or read,
        with ``marked``: what the mark changed (``seen`` and, for a mark read,
        ``read``: ``true`` for every aggregate, or the keys of those marked)."""
        if feed in self.bus.watching():
            event = _counts(feed, unseen, unread)
            if marked is not None:
                event[2]["marked"] = dict(marked)
            self.bus.emit([event])

    def updated(self, activity: Activity) -> None:
        """``activity.updated`` in the watched flat feeds that hold ``activity``:
        its own feed, its ``to`` feeds and its feed's followers."""
        try:
            holders = self._holders(activity)
            if holders:
                data = activity_data(activity)
                self.bus.emit([(f, EventType.ACTIVITY_UPDATED, data) for f in holders])
        except Exception:
            log.exception("update events of %s not made", activity.id)

    def _holders(self, activity: Activity) -> list[str]:
        """The watched flat (and ranked) feeds that hold ``activity``: its own
        feed, its ``to`` feeds and its feed's followers (but for one placed)."""
        watched = [f for f in sorted(self.bus.watching()) if self._flat(f)]
        if not watched:
            return []
        source = self.canonical.activities.feed_of(activity.id)
        holders = {*activity.to, *([source] if source else [])}.intersection(watched)
        # (one placed in feeds is in those alone: its feed's followers lack it)
        if source is not None and not self.canonical.placements.is_placed(activity.id):
            holders.update(self.canonical.follows.followers_among(source, watched))
        return sorted(holders)

    def reaction_changed(self, kind: EventType, reaction: Reaction) -> None:
        """``reaction.added`` / ``reaction.removed`` in the watched feeds holding
        the activity reacted to, with its exact ``reaction_counts`` after."""
        try:
            if not any(self._flat(f) for f in self.bus.watching()):
                return
            activity = self.canonical.activities.get_activity(reaction.activity_id)
            if activity is None:
                return
            holders = self._holders(activity)
            if holders:
                counts = self.canonical.reaction_reads.counts([activity.id]).get(activity.id, {})
                data = _json({**reaction.to_dict(), "reaction_counts": counts})
                self.bus.emit([(f, kind, data) for f in holders])
        except Exception:
            log.exception("reaction events of %s not made", reaction.id)

    def _flat(self, feed: str) -> bool:
        config = self.feed_groups.get(feed.partition(":")[0])
        return config is not None and not config.aggregated

    def published(self, created: Sequence[tuple[str, Activity]]) -> None:
        """The firehose: activities just accepted, with the feed each was published in."""
        if created and self.bus.watches_firehose():
            self.bus.emit(
                [(FIREHOSE, EventType.ACTIVITY_ADDED, firehose_data(f, a)) for f, a in created]
            )

    def deleted(self, feed: str, activity: Activity) -> None:
        """The firehose: an activity removed from ``feed`` (sent to the clients it matches)."""
        if self.bus.watches_firehose():
            self.bus.emit([(FIREHOSE, EventType.DELETE, firehose_data(feed, activity))])


def foreign_identity(activity: Activity) -> list[str] | None:
    """``[foreign_id, time]`` of an activity with a foreign_id (time as its JSON
    writes it): how a client that keeps foreign ids, not ours, tells which
    activity a removal took out."""
    if activity.foreign_id is None:
        return None
    when: str = orjson.loads(orjson.dumps(activity.time, option=orjson.OPT_UTC_Z))
    return [activity.foreign_id, when]


def removed_data(activity: Activity) -> dict[str, Any]:
    """``activity.removed``'s data: its ``id``, and its ``foreign_id`` and
    ``time`` when it has a foreign_id."""
    identity = foreign_identity(activity)
    if identity is None:
        return {"id": activity.id}
    return {"id": activity.id, "foreign_id": identity[0], "time": identity[1]}


def _with_foreign_ids(
    data: dict[str, Any], moved: Sequence[str], identities: Mapping[str, list[str]] | None
) -> dict[str, Any]:
    """``data`` with ``withdrawn_foreign_ids``: ``[foreign_id, time]`` of the
    members withdrawn that have one (left out when none has)."""
    found = [identities[i] for i in moved if identities and i in identities]
    if found:
        data["withdrawn_foreign_ids"] = found
    return data


def _counts(feed: str, unseen: int, unread: int) -> Emit:
    return (feed, EventType.COUNTS_CHANGED, {"unseen": unseen, "unread": unread})


def _json(value: dict[str, Any]) -> dict[str, Any]:
    # Times and nested activities as the API serialises them.
    data: dict[str, Any] = orjson.loads(orjson.dumps(value, option=orjson.OPT_UTC_Z))
    return data
