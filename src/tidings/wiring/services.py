"""Connecting the services over built parts (:func:`assemble`).

Here a lower layer is handed what a higher one offers, as the declared hook
types of the lower layer (the planner's ``Changes``, the emitter's
``MemberOf``, the reads' ``CountsChanged``…): nothing below imports upward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tidings.bus.emitter import LiveEvents
from tidings.bus.firehose import FirehoseMatcher
from tidings.core.feeds import FeedGroup
from tidings.delivery.rebuild import Upkeep
from tidings.reading.aggregated import AggregatedReads
from tidings.reading.docs import ActivityDocs
from tidings.reading.enrich import Enricher
from tidings.reading.flat import FlatReads
from tidings.reading.gate import ReaderGate
from tidings.reading.ranked import RankedReads
from tidings.reading.reactions import ReactionReads
from tidings.services.access import Access
from tidings.services.activities import ActivityService
from tidings.services.admin import AdminService
from tidings.services.live import LiveService
from tidings.services.reactions import ReactionService
from tidings.services.reads import Reads
from tidings.services.rules import RuleService
from tidings.services.users import ObjectService, UserService
from tidings.wiring.parts import Parts
from tidings.writes.activities import ActivityWrites
from tidings.writes.follows import FollowWrites
from tidings.writes.reactions import ReactionWrites
from tidings.writes.rules import UserRules
from tidings.writes.users import UserWrites


@dataclass(frozen=True)
class Services:
    """The engine's services over built parts, connected: what the facade
    (:class:`tidings.Tidings`) holds and hands out."""

    activities: ActivityService
    reads: Reads
    access: Access
    reactions: ReactionService
    users: UserService
    objects: ObjectService
    rules: RuleService
    live: LiveService
    admin: AdminService
    #: The writes behind the facade's everyday verbs.
    publishing: ActivityWrites
    follows: FollowWrites
    #: Notes reads and wakes idle feeds (a thread started with the engine).
    gate: ReaderGate


@dataclass(frozen=True)
class _ReadSide:
    gate: ReaderGate
    flat: FlatReads
    aggregated: AggregatedReads
    ranked: RankedReads
    reactions: ReactionReads


def _read_side(parts: Parts) -> _ReadSide:
    settings, clock, canonical = parts.settings, parts.clock, parts.canonical
    caps = parts.deliverer.planner.caps
    gate = ReaderGate(
        canonical,
        settings,
        now_ms=clock.ms,
        notify=parts.task_runner.notify,
        monotonic=clock.monotonic,
    )
    docs = ActivityDocs(parts.cache, canonical)
    flat = FlatReads(
        canonical,
        parts.timeline,
        caps,
        docs,
        gate,
        parts.cursors,
        pull_grace_seconds=settings.pull_grace_seconds,
        # SQLite answers in microseconds in this process; a database
        # server's round trip would hold up an event loop.
        inline=parts.db.dialect == "sqlite",
        monotonic=clock.monotonic,
    )
    aggregated = AggregatedReads(
        canonical, parts.aggregates, caps, docs, gate, parts.cursors, now_us=clock.us
    )
    ranked = RankedReads(
        canonical,
        flat,
        docs,
        parts.snapshots,
        parts.cursors,
        settings.groups,
        now_ms=clock.ms,
        profile_group=settings.profile_group,
    )
    reactions = ReactionReads(canonical, parts.cursors, settings.latest_reactions)
    return _ReadSide(gate, flat, aggregated, ranked, reactions)


def assemble(parts: Parts) -> Services:
    """Every service over ``parts``, connected."""
    settings, clock, canonical = parts.settings, parts.clock, parts.canonical
    groups: Mapping[str, FeedGroup] = settings.groups
    deliverer, notify = parts.deliverer, parts.task_runner.notify
    side = _read_side(parts)
    user_rules = UserRules(canonical, clock, groups, cache_seconds=settings.rules_cache_seconds)
    access = Access(canonical, groups, user_rules, side.aggregated, clock)
    live = LiveEvents(
        parts.bus,
        groups,
        deliverer.planner.member,
        access.aggregates_as_read,
        canonical,
        hiders=access.event_hiders,
    )
    parts.written.connect(live.written)
    parts.copied.connect(live.copied)
    publishing = ActivityWrites(
        canonical,
        parts.cache,
        deliverer,
        clock,
        notify=notify,
        published=live.published,
        updated=live.updated,
        deleted=live.deleted,
        sender=parts.sender,
    )
    follows = FollowWrites(
        canonical,
        parts.timeline,
        parts.aggregates,
        deliverer,
        parts.cursors,
        now_ms=clock.ms,
        notify=notify,
        taken_back=live.taken_back,
    )
    reads = Reads(
        groups,
        access,
        side.flat,
        side.aggregated,
        side.ranked,
        side.reactions,
        Enricher(canonical),
        parts.sender,
        counts_changed=live.counts_changed,
        watching=parts.bus.watching,
    )
    return _services(parts, side, live, access, reads, publishing, follows, user_rules)


def _services(
    parts: Parts,
    side: _ReadSide,
    live: LiveEvents,
    access: Access,
    reads: Reads,
    publishing: ActivityWrites,
    follows: FollowWrites,
    user_rules: UserRules,
) -> Services:
    settings, clock, canonical = parts.settings, parts.clock, parts.canonical
    groups = settings.groups
    reaction_writes = ReactionWrites(
        canonical,
        publishing,
        clock,
        unique=settings.unique_reactions,
        changed=live.reaction_changed,
    )
    users = UserWrites(
        canonical,
        clock,
        reserved=settings.reserved_handles,
        keep_seconds=settings.handle_keep_seconds,
        profile_group=settings.profile_group,
        home_group=settings.home_group,
    )
    upkeep = Upkeep(
        settings,
        canonical,
        parts.timeline,
        parts.aggregates,
        parts.deliverer.planner,
        flush_reads=side.gate.flush,
        states_changed=side.gate.unsettled.expire,  # readers here look states up again
        notify=parts.task_runner.notify,
    )
    admin = AdminService(
        canonical,
        parts.timeline,
        parts.deliverer,
        upkeep,
        groups,
        now_ms=clock.ms,
        flush_reads=side.gate.flush,
    )
    return Services(
        activities=ActivityService(publishing),
        reads=reads,
        access=access,
        reactions=ReactionService(reaction_writes, side.reactions, canonical),
        users=UserService(users, groups),
        objects=ObjectService(users),
        rules=RuleService(user_rules, follows),
        live=LiveService(parts.bus, FirehoseMatcher(parts.bus), groups, settings.events_buffer),
        admin=admin,
        publishing=publishing,
        follows=follows,
        gate=side.gate,
    )
