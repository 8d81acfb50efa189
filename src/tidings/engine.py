"""The engine: the one facade every entry point (library, CLI, HTTP) calls.

It holds built parts (:mod:`tidings.wiring`) and hands each call to the
module that does the work: publishing (:mod:`tidings.delivery.activities`),
follows (:mod:`tidings.delivery.follows`), reads (:mod:`tidings.reading`),
repair (:mod:`tidings.delivery.rebuild`) and delivery itself
(:mod:`tidings.delivery.deliverer`, through the task runner).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from tidings.bus.emitter import LiveEvents
from tidings.bus.firehose import FirehoseMatcher
from tidings.bus.subscription import Subscription
from tidings.core.activity import Activity, NewActivity
from tidings.core.aggregation import ActivityGroup, GroupPage
from tidings.core.errors import ValidationError
from tidings.core.fanout import Strategy
from tidings.core.feeds import FeedGroup, FeedKind, parse_feed_id
from tidings.core.firehose import Filter
from tidings.core.reactions import Include, Reaction, parse_includes
from tidings.core.results import FeedStats, Follow, Page, Stats
from tidings.core.rules import Context, KeywordFilter, Mute, Seen, seen
from tidings.core.users import StoredObject, User
from tidings.delivery.activities import Activities, ActivityRef
from tidings.delivery.follows import Follows
from tidings.delivery.reactions import Reactions
from tidings.delivery.rebuild import Upkeep
from tidings.delivery.rules import UserRules
from tidings.delivery.users import Users
from tidings.reading.docs import ActivityDocs
from tidings.reading.enrich import Enricher, parse_fields
from tidings.reading.flat import FlatReads
from tidings.reading.gate import ReaderGate
from tidings.reading.grouped import GroupedReads
from tidings.reading.ranked import RankedReads
from tidings.reading.reactions import ReactionReads
from tidings.settings import Settings
from tidings.stores.base import ActivityCache, GroupStore, TimelineStore
from tidings.wiring import DeliveryMode, Parts, build

__all__ = ["ActivityRef", "DeliveryMode", "Tidings"]

#: Activities whose words the read side keeps (by their JSON) for rules.
SEEN_CACHED = 50_000


class Tidings:
    """Activity feeds over a canonical SQL store and a timeline store.

    ``delivery`` picks the runner: ``thread`` (background threads),
    ``process`` (a child process built from ``settings``), ``celery``
    (dispatched to ``tidings worker`` processes), ``sync``
    (delivered before ``add_activity`` returns) or ``manual`` (call
    :meth:`drain`). Left out, it is the ``task_runner`` setting.

    Constructed so, the engine builds its parts from ``settings`` (parts
    given are used as they are) and starts; :meth:`from_parts` takes parts
    built elsewhere and starts on :meth:`start` (or ``with``).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        timeline: TimelineStore | None = None,
        aggregates: GroupStore | None = None,
        cache: ActivityCache | None = None,
        redis_client: Any = None,
        delivery: DeliveryMode | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        config = settings or Settings.load()
        parts = build(
            config,
            timeline=timeline,
            aggregates=aggregates,
            cache=cache,
            redis_client=redis_client,
            delivery=delivery,
            clock=clock,
            engine_factory=lambda: Tidings(config, delivery="manual"),
        )
        self._assemble(parts)
        try:
            self.start()
        except BaseException:
            # (A runner that could not start its process): nothing left open.
            self.close()
            raise

    @classmethod
    def from_parts(cls, parts: Parts) -> Tidings:
        """An engine on ``parts`` (see :func:`tidings.wiring.build`), not started."""
        engine = cls.__new__(cls)
        engine._assemble(parts)
        return engine

    def _assemble(self, parts: Parts) -> None:
        self.parts = parts
        self.settings = parts.settings
        self.feed_groups: Mapping[str, FeedGroup] = parts.settings.groups
        self.db = parts.db
        self.canonical = parts.canonical
        self.timeline = parts.timeline
        self.aggregates = parts.aggregates
        self.cache = parts.cache
        self.cursors = parts.cursors
        self.deliverer = parts.deliverer
        self.runner = parts.runner
        self.bus = parts.bus
        self._clock = parts.clock
        self._assemble_reads()
        self._assemble_writes()
        self._started = self._closed = False

    def _assemble_reads(self) -> None:
        clock, planner = self._clock, self.deliverer.planner
        self._gate = gate = ReaderGate(
            self.canonical, self.settings, now_ms=clock.ms, notify=self.runner.notify
        )
        self.reads = gate.reads
        docs = ActivityDocs(self.cache, self.canonical)
        self._flat = FlatReads(
            self.canonical,
            self.timeline,
            planner,
            docs,
            gate,
            self.cursors,
            pull_grace_seconds=self.settings.pull_grace_seconds,
            # SQLite answers in microseconds in this process; a database
            # server's round trip would hold up an event loop.
            inline=self.db.dialect == "sqlite",
        )
        self._merges_pulled = self._flat.merges_pulled
        self._grouped = GroupedReads(
            self.canonical, self.aggregates, planner, docs, gate, self.cursors, now_us=clock.us
        )
        self._ranked = RankedReads(
            self.canonical,
            self._flat,
            docs,
            self.parts.snapshots,
            self.cursors,
            self.feed_groups,
            now_ms=clock.ms,
            profile_group=self.settings.profile_group,
        )
        self._reaction_reads = ReactionReads(
            self.canonical, self.cursors, self.settings.latest_reactions
        )
        self._enricher = Enricher(self.canonical)
        self._seen: dict[bytes, Seen] = {}
        self._live = LiveEvents(
            self.bus,
            planner,
            lambda feed, limit: self.read_groups(feed, limit),
            self.canonical,
            hiders=self._event_hiders,
        )
        planner.changes = self._live.written
        # Big deliveries write the feeds someone has open here before the rest.
        self.deliverer.watched = self.bus.subscribed
        self._firehose = FirehoseMatcher(self.bus)

    def _assemble_writes(self) -> None:
        clock, notify = self._clock, self.runner.notify
        live = self._live
        self._activities = Activities(
            self.canonical,
            self.cache,
            self.deliverer,
            clock,
            notify=notify,
            published=live.published,
            updated=live.updated,
            deleted=live.deleted,
            sender=self.parts.sender,
        )
        self._follows = Follows(
            self.canonical,
            self.timeline,
            self.aggregates,
            self.deliverer,
            self.cursors,
            now_ms=clock.ms,
            notify=notify,
            taken_back=live.taken_back,
        )
        self._reactions = Reactions(
            self.canonical,
            self._activities,
            clock,
            unique=self.settings.unique_reactions,
            changed=live.reaction_changed,
        )
        settings = self.settings
        self._users = Users(
            self.canonical,
            clock,
            reserved=settings.reserved_handles,
            keep_seconds=settings.handle_keep_seconds,
            profile_group=settings.profile_group,
            home_group=settings.home_group,
        )
        self._rules = UserRules(
            self.canonical,
            clock,
            self.feed_groups,
            unfollow=lambda follower, source: self.unfollow(follower, source),
            cache_seconds=settings.rules_cache_seconds,
        )
        self._upkeep = Upkeep(
            self.settings,
            self.canonical,
            self.timeline,
            self.aggregates,
            self.deliverer.planner,
            flush_reads=self.flush_reads,
            states_changed=self._gate.unsettled.expire,  # readers here look states up again
            notify=notify,
        )

    def start(self) -> None:
        """Start the runner and the thread that records reads (once; later calls
        do nothing)."""
        if self._started:
            return
        self._started = True
        self.runner.start()
        self._gate.start()

    def __enter__(self) -> Tidings:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the threads (recording the last reads), then close the parts."""
        if self._closed:
            return
        self._closed = True
        self._gate.stop()
        self._activities.commits.close()
        self.parts.close()

    @property
    def clock(self) -> Callable[[], datetime]:
        """The current time, as every part reads it; assignable (tests move time)."""
        return self._clock.now

    @clock.setter
    def clock(self, now: Callable[[], datetime]) -> None:
        self._clock.now = now

    def now_ms(self) -> int:
        return self._clock.ms()

    def now_us(self) -> int:
        return self._clock.us()

    def _feed(self, feed: str) -> str:
        parse_feed_id(feed, self.feed_groups)
        return feed

    def grouped(self, feed: str) -> bool:
        """Whether ``feed`` holds groups (aggregated, notification) rather than activities."""
        return self.feed_groups[parse_feed_id(feed, self.feed_groups).group].grouped

    def check_feed(self, feed: str) -> None:
        """Raise InvalidFeedId / UnknownFeedGroup unless ``feed`` is a valid, configured feed id."""
        self._feed(feed)

    def health(self) -> int:
        """Touch both stores; returns the number of pending deliveries."""
        feed_group = next(iter(self.feed_groups))
        self.timeline.page(
            f"{feed_group}:healthz", limit=1, before=None, cap=self.deliverer.cap(feed_group)
        )
        return self.canonical.outbox.pending()

    # -- activities ---------------------------------------------------------

    def add_activity(self, feed: str, activity: NewActivity | Mapping[str, Any]) -> Activity:
        """Publish an activity to ``feed``; its followers and ``to`` feeds receive it.

        With a ``foreign_id`` already used in ``feed`` this returns the stored
        activity and changes nothing.
        """
        return self.publish(feed, activity)[0]

    def publish(
        self, feed: str, activity: NewActivity | Mapping[str, Any]
    ) -> tuple[Activity, bool]:
        """:meth:`add_activity`, also saying whether it was new (False: the
        ``foreign_id`` was already used in ``feed`` and nothing changed)."""
        return self._activities.publish(feed, activity)

    def add_activities(
        self, feed: str, activities: Sequence[NewActivity | Mapping[str, Any]]
    ) -> list[Activity]:
        """Publish several activities to ``feed`` in one transaction: all are
        validated first, and all are stored or none (a repeated ``foreign_id``
        returns the activity stored first)."""
        return [stored for stored, _ in self.publish_many(feed, activities)]

    def publish_many(
        self, feed: str, activities: Sequence[NewActivity | Mapping[str, Any]]
    ) -> list[tuple[Activity, bool]]:
        """:meth:`add_activities`, also saying which were new."""
        return self._activities.publish_many(feed, activities)

    def settle(self) -> None:
        """Wait until this process's publishes have made their writes after
        the commit (own feed, cache, counts). With write-behind (the thread
        and process runners on Redis) a publish returns before Redis has
        answered them: reads of this process wait for them anyway, another
        process sees them a round trip later. Call this before telling
        another process to read (the HTTP service does before answering)."""
        self.parts.sender.settle()

    async def publish_async(
        self, feed: str, activity: NewActivity | Mapping[str, Any]
    ) -> tuple[Activity, bool]:
        """:meth:`publish` awaited: the write runs in a thread, in a group with
        the publishes made meanwhile (the HTTP service's publish route)."""
        return await self._activities.publish_async(feed, activity)

    def get_activity(self, ref: ActivityRef) -> Activity:
        """An activity by id, or by ``(feed, foreign_id)``."""
        return self._activities.get(ref)

    def update_activity(
        self,
        ref: ActivityRef,
        *,
        set: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
    ) -> Activity:
        """Set and unset keys of ``extra``; every feed holding the activity shows the change."""
        return self._activities.update(ref, set, unset)

    def remove_activity(
        self, feed: str, activity_id: str | None = None, *, foreign_id: str | None = None
    ) -> Activity:
        """Remove an activity (by id or foreign_id) from ``feed``.

        One added to ``feed`` is deleted, and retracted from every feed it
        reached. One that only reached ``feed`` through its ``to`` (by id) is
        taken out of ``feed`` alone, for good (rebuilds leave it out); it stays
        everywhere else, and in ``feed`` too while ``feed`` follows the feed it
        was added to (unfollowing removes it then).
        """
        return self._activities.remove(feed, activity_id, foreign_id)

    # -- follows ------------------------------------------------------------

    def follow(self, follower: str, source: str, copy_limit: int = 100) -> bool:
        """``follower`` receives what is added to ``source`` from now on, and its newest
        ``copy_limit`` activities now. Returns False when it already followed."""
        return bool(self.follow_many([(follower, source)], copy_limit=copy_limit))

    def follow_many(
        self, pairs: Iterable[tuple[str, str]], copy_limit: int = 100
    ) -> list[tuple[str, str]]:
        """Several follows in one transaction; returns the pairs that were new.

        Their history copy is queued in the same transaction and carried out
        here; if this fails (or the process dies), a runner finishes it.
        """
        # Follows between users who block one another are refused (Blocked)
        # in the follow's own transaction.
        return self._follows.follow_many(pairs, copy_limit)

    def unfollow(self, follower: str, source: str, keep_history: bool = False) -> bool:
        """Stop following; unless ``keep_history``, remove what came through the follow."""
        return self._follows.unfollow(follower, source, keep_history)

    def followers(self, source: str, *, cursor: str | None = None, limit: int = 25) -> Page[Follow]:
        return self._follows.page("followers", source, cursor, limit)

    def following(self, feed: str, *, cursor: str | None = None, limit: int = 25) -> Page[Follow]:
        return self._follows.page("following", feed, cursor, limit)

    def counts(self, feed: str) -> tuple[int, int]:
        """``(followers, following)`` of a feed."""
        return self.canonical.follows.counts(self._feed(feed))

    # -- reading ------------------------------------------------------------

    def read(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        reactions: str | Sequence[str] | None = None,
        user: str | None = None,
        explain: bool = False,
        enrich: bool = False,
        fields: str | Sequence[str] | None = None,
    ) -> Page[Activity]:
        """A page of ``feed``; pass ``next`` back as ``cursor`` for the next.

        Flat feeds come newest first; ranked feeds in the order of their
        group's ``ranking``, each activity's ``score`` in ``extras`` (with
        ``explain``, the variables that made it too). ``reactions``
        (``"counts,latest,own"``, or a list of those words) adds what each
        activity carries about its reactions to ``extras``; ``own`` means
        ``user``'s (default: the feed's key). ``enrich`` puts the actor's user
        and the stored objects of ``object`` and ``target`` in ``extras``
        (``fields``: only those keys of profiles and objects' data).
        """
        page = self.read_json(feed, limit, cursor, reactions=reactions, user=user, explain=explain)
        activities = [Activity.from_json(doc) for doc in page.results]
        ranked = self.feed_groups[feed.partition(":")[0]].ranked
        extras = None
        if ranked or reactions or enrich:
            docs = page.results
            if enrich:
                docs = self._enricher.docs(docs, parse_fields(fields))
            extras = self._reaction_reads.extras(docs, enriched=enrich)
        return Page(activities, page.next, page.regenerating, page.renewed, extras)

    def read_json(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        reactions: str | Sequence[str] | None = None,
        user: str | None = None,
        explain: bool = False,
        enrich: bool = False,
        fields: str | Sequence[str] | None = None,
    ) -> Page[bytes]:
        """:meth:`read`, with each activity as its JSON (the API's shape): the
        stored JSON, with the fields a read adds (``score``, ``explain``,
        ``reaction_counts``…) spliced in.

        The HTTP service splices these bytes into its response instead of
        parsing and re-serialising every activity of every page.
        """
        include = parse_includes(reactions)
        config = self.feed_groups[parse_feed_id(feed, self.feed_groups).group]
        hide = self._hider(feed, Context.TIMELINE)
        if config.ranked:
            ranked = self._ranked.read(feed, limit, cursor, explain=explain, hide=hide)
            page = Page(ranked.results, ranked.next, ranked.regenerating, ranked.renewed)
        else:
            if explain:
                raise ValidationError(
                    f"{feed} is a {config.kind} feed: only ranked feeds have scores to explain",
                    field="explain",
                )
            page = self._flat.read_json(feed, limit, cursor, hide)
        page = self._with_reactions(feed, page, include, user)
        if enrich:
            docs = self._enricher.docs(page.results, parse_fields(fields))
            page = Page(docs, page.next, page.regenerating, page.renewed)
        return page

    def _with_reactions(
        self, feed: str, page: Page[bytes], include: frozenset[Include], user: str | None
    ) -> Page[bytes]:
        if not include:
            return page
        reader = user if user is not None else feed.partition(":")[2]
        results = self._reaction_reads.decorate(page.results, include, reader)
        return Page(results, page.next, page.regenerating, page.renewed)

    async def read_json_async(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        reactions: str | Sequence[str] | None = None,
        user: str | None = None,
        explain: bool = False,
        enrich: bool = False,
        fields: str | Sequence[str] | None = None,
    ) -> Page[bytes]:
        """:meth:`read_json` for an event loop: a flat page's store round trip is
        awaited, not blocking the loop, on stores that can (Redis); ranked pages
        and reaction lookups run in a thread."""
        config = self.feed_groups[parse_feed_id(feed, self.feed_groups).group]
        if self.parts.sender.pending():
            # Its own client does not wait for the writes sent behind (as the
            # pool of the engine's does): the read waits here, off the loop.
            await asyncio.to_thread(self.parts.sender.settle)
        if config.ranked or reactions or explain or enrich:
            return await asyncio.to_thread(
                functools.partial(
                    self.read_json,
                    reactions=reactions,
                    user=user,
                    explain=explain,
                    enrich=enrich,
                    fields=fields,
                ),
                feed,
                limit,
                cursor,
            )
        await self.load_rules(feed.partition(":")[2])
        return await self._flat.read_json_async(
            feed, limit, cursor, self._hider(feed, Context.TIMELINE)
        )

    def _hider(self, feed: str, context: Context) -> Callable[[bytes], bool] | None:
        """Whether the rules of ``feed``'s owner (its key) hide an activity, given
        its JSON; None when they have none (nearly every read)."""
        rules = self._rules.rules(feed.partition(":")[2])
        if rules.empty:
            return None
        now = self.now_ms()
        known = self._seen

        def hide(doc: bytes) -> bool:
            # What rules read of an activity, parsed once per version of its
            # JSON: pages show the same activities to many readers, again and again.
            found = known.get(doc)
            if found is None:
                found = seen(orjson.loads(doc))
                if len(known) >= SEEN_CACHED:
                    known.clear()
                known[doc] = found
            return rules.hides_seen(found, context, now)

        return hide

    def read_groups(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        mark_seen: bool = False,
        mark_read: bool = False,
    ) -> GroupPage:
        """A page of an aggregated or notification feed: groups, newest first.

        ``mark_seen`` / ``mark_read`` mark the returned groups after reading
        them (the groups show their state from before; the feed's counts,
        from after).
        """
        page = self._grouped.read_groups(
            feed, limit, cursor, mark_seen=mark_seen, mark_read=mark_read, keep=self._keeper(feed)
        )
        if page.unseen is not None:
            unseen, unread = self._visible_counts(feed, page.unseen, page.unread or 0)
            page = dataclasses.replace(page, unseen=unseen, unread=unread)
        if (mark_seen or mark_read) and page.unseen is not None:
            self._live.counts_changed(feed, page.unseen, page.unread or 0)
        return page

    def reaction_fields(
        self, activity_ids: Sequence[str], reactions: str | Sequence[str], user: str
    ) -> dict[str, dict[str, Any]]:
        """What each activity carries about its reactions (``reactions``:
        ``"counts,latest,own"`` or some of them; ``own`` is ``user``'s), by id:
        for pages of groups, whose activities a caller decorates itself."""
        return self._reaction_reads.fields(activity_ids, parse_includes(reactions), user)

    def _event_hiders(
        self, feeds: Sequence[str]
    ) -> Callable[[str, Mapping[str, Any], Context], bool]:
        """Whether the rules of each of ``feeds``' owners hide an activity there:
        their rules looked up in one batch (a delivery reaches many feeds)."""
        rules = self._rules.rules_many({f.partition(":")[2] for f in feeds})
        now = self.now_ms()

        def hidden(feed: str, item: Mapping[str, Any], context: Context) -> bool:
            found = rules.get(feed.partition(":")[2])
            return found is not None and not found.empty and found.hides(item, context, now)

        return hidden

    def hidden_from(
        self, user_id: str, item: Mapping[str, Any], context: Context | str = Context.TIMELINE
    ) -> bool:
        """Whether ``user_id``'s mutes, blocks and filters hide ``item`` (an
        activity in its JSON shape) in ``context``."""
        return self._rules.rules(user_id).hides(item, Context(context), self.now_ms())

    def _keeper(self, feed: str) -> Callable[[ActivityGroup], ActivityGroup | None] | None:
        """What the rules of ``feed``'s owner leave of a group: its activities they
        do not hide (None: none are left). None when they have no rules."""
        rules = self._rules.rules(feed.partition(":")[2])
        if rules.empty:
            return None
        kind = self.feed_groups[feed.partition(":")[0]].kind
        context = Context.NOTIFICATION if kind == FeedKind.NOTIFICATION else Context.TIMELINE
        now = self.now_ms()

        def keep(group: ActivityGroup) -> ActivityGroup | None:
            shown = [a for a in group.activities if not rules.hides(a.to_dict(), context, now)]
            if not shown:
                return None
            return (
                group
                if len(shown) == len(group.activities)
                else dataclasses.replace(group, activities=shown)
            )

        return keep

    def mark_seen(self, feed: str, groups: Sequence[str] | None = None) -> None:
        """Mark groups of a notification feed seen (``groups=None``: all of them)."""
        self._mark(feed, groups, read=False)

    def mark_read(self, feed: str, groups: Sequence[str] | None = None) -> None:
        """Mark groups of a notification feed read, and so seen (``None``: all)."""
        self._mark(feed, groups, read=True)

    def _mark(self, feed: str, groups: Sequence[str] | None, *, read: bool) -> None:
        self._grouped.mark(feed, groups, read=read)
        if feed in self.bus.watching():
            self._live.counts_changed(feed, *self.notification_counts(feed))

    def notification_counts(self, feed: str) -> tuple[int, int]:
        """``(unseen, unread)`` groups of a notification feed (those its owner's
        rules hide whole are not counted)."""
        return self._visible_counts(feed, *self._grouped.notification_counts(feed))

    def _visible_counts(self, feed: str, unseen: int, unread: int) -> tuple[int, int]:
        """``unseen`` and ``unread`` less the groups whose shown activities the
        owner's rules all hide: with rules, a walk of the feed's groups that
        stops once every unseen and unread group has been looked at."""
        rules = self._rules.rules(feed.partition(":")[2])
        if rules.empty or not (unseen or unread):
            return unseen, unread
        now = self.now_ms()
        cursor = None
        looked_unseen = looked_unread = hidden_unseen = hidden_unread = 0
        while looked_unseen < unseen or looked_unread < unread:
            page = self._grouped.read_groups(feed, 100, cursor, mark_seen=False, mark_read=False)
            for group in page.results:
                looked_unseen += not group.is_seen
                looked_unread += not group.is_read
                items = [a.to_dict() for a in group.activities]
                if all(rules.hides(a, Context.NOTIFICATION, now) for a in items):
                    hidden_unseen += not group.is_seen
                    hidden_unread += not group.is_read
            if page.next is None:
                break
            cursor = page.next
        return max(0, unseen - hidden_unseen), max(0, unread - hidden_unread)

    def flush_reads(self) -> None:
        """Write the reads noted in memory to the canonical store (the background
        thread does so every second); wakes idle feeds read meanwhile."""
        self._gate.flush()

    # -- reactions ----------------------------------------------------------------

    def react(
        self,
        activity_id: str,
        kind: str,
        user: str,
        data: Mapping[str, Any] | None = None,
        *,
        to: Sequence[str] = (),
        parent: str | None = None,
    ) -> Reaction:
        """``user`` reacts to the activity (or, with ``parent``, to that reaction,
        up to 3 levels deep) with ``kind``. For kinds in ``unique_reactions``
        (``like``) adding again returns the reaction held. With ``to``, a
        notification activity (actor ``user``, verb ``kind``) goes into those feeds."""
        return self.add_reaction(activity_id, kind, user, data, to=to, parent=parent)[0]

    def add_reaction(
        self,
        activity_id: str,
        kind: str,
        user: str,
        data: Mapping[str, Any] | None = None,
        *,
        to: Sequence[str] = (),
        parent: str | None = None,
    ) -> tuple[Reaction, bool]:
        """:meth:`react`, also saying whether the reaction is new (False: a
        unique kind this user had added already; nothing changed)."""
        return self._reactions.add(activity_id, kind, user, data, to, parent)

    def can_read_activity(self, activity: Activity, user_id: str) -> bool:
        """Whether ``user_id`` may see ``activity``: it is theirs, its feed is
        theirs or of a public group, it was addressed to one of their feeds, or
        one of their feeds follows its feed; and its actor does not block them."""
        if activity.actor == user_id:
            return True
        if self.blocks_reader(activity.actor, user_id):
            return False
        if any(parse_feed_id(t).key == user_id for t in activity.to):
            return True
        source = self.canonical.activities.feed_of(activity.id)
        if source is None:
            return False
        fid = parse_feed_id(source)
        config = self.feed_groups.get(fid.group)
        if fid.key == user_id:
            return True
        if config is not None and config.public:
            return not self.blocks_reader(fid.key, user_id)
        mine = [f"{group}:{user_id}" for group in self.feed_groups]
        return bool(self.canonical.follows.followers_among(source, mine))

    def get_reaction(self, reaction_id: str) -> Reaction:
        return self._reactions.get(reaction_id)

    def update_reaction(self, reaction_id: str, data: Mapping[str, Any]) -> Reaction:
        """Replace a reaction's ``data``."""
        return self._reactions.update(reaction_id, data)

    def remove_reaction(self, reaction_id: str) -> Reaction:
        """Remove a reaction, the reactions under it and the notifications they made."""
        return self._reactions.remove(reaction_id)

    def reactions(
        self,
        activity_id: str,
        kind: str | None = None,
        *,
        limit: int = 25,
        cursor: str | None = None,
    ) -> Page[Reaction]:
        """Reactions to an activity, newest first (``kind``: of that kind only)."""
        return self._reaction_reads.page(activity_id, kind=kind, limit=limit, cursor=cursor)

    def reaction_children(
        self,
        reaction_id: str,
        kind: str | None = None,
        *,
        limit: int = 25,
        cursor: str | None = None,
    ) -> Page[Reaction]:
        """Reactions to a reaction (replies to a comment), newest first."""
        parent = self._reactions.get(reaction_id)
        return self._reaction_reads.page(
            parent.activity_id, parent=parent.id, kind=kind, limit=limit, cursor=cursor
        )

    def reaction_counts(self, activity_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """Exact counts of the reactions to each activity, per kind."""
        return self.canonical.reaction_reads.counts(list(activity_ids))

    # -- users and objects ----------------------------------------------------------

    def create_user(
        self, user_id: str, handle: str, profile: Mapping[str, Any] | None = None
    ) -> User:
        """A new user. Handles are unique after NFKC, case folding and the
        folding of look-alikes, and their letters are of one script: a second
        claim raises :class:`HandleTaken` (so does a reserved handle, and the
        id of a user deleted within ``handle_keep_seconds``)."""
        return self._users.create(user_id, handle, profile)

    def get_user(self, user_id: str) -> User:
        return self._users.get(user_id)

    def user_by_handle(self, handle: str) -> User:
        """The user holding ``handle`` (in any case, width or look-alike), or
        who gave it up within ``handle_keep_seconds``."""
        return self._users.by_handle(handle)

    def update_user(
        self,
        user_id: str,
        *,
        handle: str | None = None,
        profile: Mapping[str, Any] | None = None,
    ) -> User:
        """Rename (the old handle keeps resolving for ``handle_keep_seconds``)
        and/or replace the profile."""
        return self._users.update(user_id, handle=handle, profile=profile)

    def delete_user(self, user_id: str) -> User:
        """Delete a user: reads enriching its activities show a tombstone, and
        its id is not created again within ``handle_keep_seconds``."""
        return self._users.delete(user_id)

    def user_counts(self, user_id: str) -> dict[str, int]:
        """``followers``, ``following`` and ``activities`` of a user, exact."""
        return self._users.counts(user_id)

    def feed_stats(self, feed: str) -> FeedStats:
        """Followers, following and activities published of a feed, exact."""
        return self._users.stats(self._feed(feed))

    def put_object(
        self,
        kind: str,
        object_id: str,
        data: Mapping[str, Any] | None,
        *,
        user: str | None = None,
    ) -> tuple[StoredObject, bool]:
        """Store what activities refer to as ``kind:object_id``; and whether it is new.
        ``user``: the user writing it, who owns it if new and may change only
        what it owns (NotObjectOwner); None: the application, which may change any."""
        return self._users.put_object(kind, object_id, data, user)

    def get_object(self, kind: str, object_id: str) -> StoredObject:
        return self._users.get_object(kind, object_id)

    def delete_object(self, kind: str, object_id: str, *, user: str | None = None) -> None:
        """Delete an object (``user`` as for :meth:`put_object`)."""
        self._users.delete_object(kind, object_id, user)

    def enrich(
        self, items: Sequence[dict[str, Any]], fields: str | Sequence[str] | None = None
    ) -> None:
        """Enrich activities in their JSON shape, in place (see :meth:`read`)."""
        self._enricher.items(items, parse_fields(fields))

    # -- mutes, blocks, filters -----------------------------------------------------

    def mute(
        self,
        user_id: str,
        target: str,
        *,
        duration_s: float | None = None,
        notifications: bool = True,
    ) -> Mute:
        """``user_id`` stops seeing ``target``'s activities (in notifications too,
        unless ``notifications`` is False), for ``duration_s`` (None: until
        unmuted). Nothing is deleted: unmuting shows them again."""
        return self._rules.mute(user_id, target, duration_s=duration_s, notifications=notifications)

    def unmute(self, user_id: str, target: str) -> bool:
        return self._rules.unmute(user_id, target)

    def mutes(self, user_id: str) -> list[Mute]:
        """The mutes of ``user_id`` in force now."""
        return self._rules.mutes(user_id)

    def block(self, user_id: str, target: str) -> None:
        """``user_id`` blocks ``target``: hidden everywhere, follows between their
        feeds end both ways (with what they delivered), and new ones are refused."""
        self._rules.block(user_id, target)

    def unblock(self, user_id: str, target: str) -> bool:
        return self._rules.unblock(user_id, target)

    def blocks(self, user_id: str) -> list[str]:
        return self._rules.blocks(user_id)

    async def load_rules(self, user_id: str) -> None:
        """Have ``user_id``'s rules in this process's cache, looked up off the
        event loop when they are not (so async routes may ask sync questions)."""
        if not self._rules.cached(user_id):
            await asyncio.to_thread(self._rules.rules, user_id)

    async def blocks_reader_async(self, owner: str, reader: str) -> bool:
        """:meth:`blocks_reader` for async callers: a lookup, off the loop."""
        await self.load_rules(owner)
        return self.blocks_reader(owner, reader)

    def blocks_reader(self, owner: str, reader: str) -> bool:
        """Whether ``owner`` blocks ``reader``: then ``reader`` may not read
        ``owner``'s feeds even where a public group would let anyone (from
        this process's rules cache; no query while nobody has any rules)."""
        return reader in self._rules.rules(owner).blocked

    def add_filter(
        self,
        user_id: str,
        keywords: Sequence[str],
        *,
        whole_word: bool = True,
        contexts: Iterable[str] | None = None,
        duration_s: float | None = None,
    ) -> KeywordFilter:
        """Hide activities holding any of ``keywords`` (case-insensitive; whole
        words unless ``whole_word`` is False) in verb, object, target or the
        strings of extra, in ``contexts`` (default: timeline, notification,
        firehose), for ``duration_s`` (None: until deleted)."""
        return self._rules.add_filter(
            user_id, keywords, whole_word=whole_word, contexts=contexts, duration_s=duration_s
        )

    def delete_filter(self, user_id: str, filter_id: str) -> bool:
        return self._rules.delete_filter(user_id, filter_id)

    def filters(self, user_id: str) -> list[KeywordFilter]:
        return self._rules.filters(user_id)

    # -- live events ------------------------------------------------------------

    def subscribe(self, feed: str, last_event_id: str | None = None) -> Subscription:
        """Live events of ``feed``: iterate it (or ``async for``), close it when done.

        With ``last_event_id``, the events after it are replayed first, in
        order, with no gap and no duplicate; if they are no longer kept, a
        ``resync`` event says to re-read the feed.
        """
        self._feed(feed)
        return self.bus.subscribe({feed: last_event_id}, buffer=self.settings.events_buffer)

    def stream(self) -> Subscription:
        """A subscription to no feed yet: ``add`` and ``remove`` feeds on it (one
        WebSocket's many feeds)."""
        return self.bus.subscribe({}, buffer=self.settings.events_buffer)

    def firehose(
        self,
        track: str | None = None,
        follow: str | None = None,
        locations: str | None = None,
        sample: str | float | None = None,
    ) -> Subscription:
        """Every activity published from now on that passes the filters (ORed;
        none: all), as ``activity.added`` events, and ``delete`` events for those
        removed. See :mod:`tidings.core.firehose` for the filters."""
        flt = Filter.parse(track, follow, locations, sample)
        return self._firehose.open(flt, buffer=self.settings.events_buffer)

    # -- fan-out strategy ---------------------------------------------------

    def fanout_strategy(self, source: str) -> Strategy:
        """How ``source`` reaches its flat followers: ``push``, ``pull`` or ``draining``."""
        return self.canonical.fanout.strategy(self._feed(source))

    # -- repair -------------------------------------------------------------

    def known_feeds(self) -> list[str]:
        """Every feed of a configured group that the canonical store knows of
        (published to, addressed, or following), sorted."""
        return [
            f for f in self.canonical.history.feeds() if f.partition(":")[0] in self.feed_groups
        ]

    def rebuild(self, feeds: Iterable[str] | None = None) -> Iterator[str]:
        """Rebuild feeds (None: every feed the canonical store knows) in the timeline
        and group stores from the canonical store; yields each feed when done.

        A flat feed gets the newest ``max_length`` entries of its history (what
        reading past the cap walks). A grouped feed gets its newest
        ``REBUILD_GROUPED_HISTORY`` activities, regrouped under the keys fixed
        at publish, with the seen/read state the recorded marks give them.
        """
        chosen = self.known_feeds() if feeds is None else [self._feed(f) for f in feeds]
        for feed in chosen:
            self.deliverer.rebuild(feed)
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

    # -- delivery -----------------------------------------------------------

    def drain(self) -> int:
        """Carry out every pending delivery (and regeneration) in this thread;
        returns outbox rows done."""
        return self.deliverer.run_pending()

    def pending_deliveries(self) -> int:
        return self.canonical.outbox.pending()

    def stats(self) -> Stats:
        """Delivery figures for monitoring: rows delivered by this process, rows
        pending, and the age of the oldest pending one (0 when none)."""
        pending, oldest = self.canonical.outbox.outbox_stats()
        lag = max(0.0, (self.now_ms() - oldest) / 1000) if oldest is not None else 0.0
        return Stats(delivered=self.deliverer.completed, pending=pending, lag_seconds=lag)
