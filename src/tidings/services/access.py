"""Who may read what, and what a reader's rules hide: the one place that
decides it for the library, HTTP, live events, the web app and the Django app.

A feed is readable by its owner (its key), by anyone when its feed group is
``public`` unless the owner blocks them; an activity by its actor, by the
owners of the feeds it was addressed to, and by whoever may read the feed it
was published in or follows it. A user names in ``to`` only their own feeds
and those of ``addressable`` groups. On top of that, each reader's own mutes,
blocks and keyword filters (:mod:`tidings.core.rules`) hide activities from
their reads, their aggregates, their counts and their live events.

The refusals say why in words a person can act on; each entry point says
who was refused (a token's subject over HTTP, a signed-in user in Django).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from tidings.canonical.store import CanonicalStore
from tidings.core.activity import Activity
from tidings.core.aggregation import Aggregate, AggregatePage
from tidings.core.clock import Clock
from tidings.core.errors import ValidationError
from tidings.core.feeds import FeedGroup, FeedId, FeedKind, parse_feed_id
from tidings.core.rules import Context, Seen, seen
from tidings.reading.aggregated import AggregatedReads, Keep
from tidings.writes.rules import UserRules

#: Activities whose words the read side keeps (by their JSON) for rules.
SEEN_CACHED = 50_000

#: Whether a reader's rules hide an activity, given its JSON.
Hide = Callable[[bytes], bool]
#: Whether the rules of a feed's owner hide an activity there, in a context.
Hidden = Callable[[str, Mapping[str, Any], Context], bool]


class Access:
    """Reading decisions: feeds and activities a user may read, and what the
    rules of a feed's owner leave of what it holds."""

    def __init__(
        self,
        canonical: CanonicalStore,
        feed_groups: Mapping[str, FeedGroup],
        rules: UserRules,
        aggregated: AggregatedReads,
        clock: Clock,
    ) -> None:
        self.canonical = canonical
        self.feed_groups = feed_groups
        self.rules = rules
        self.aggregated = aggregated
        self.clock = clock
        #: What rules read of an activity, by its JSON (see :meth:`hider`).
        self._seen: dict[bytes, Seen] = {}

    # -- who may read ------------------------------------------------------------

    def blocks_reader(self, owner: str, reader: str) -> bool:
        """Whether ``owner`` blocks ``reader``: then ``reader`` may not read
        ``owner``'s feeds even where a public group would let anyone (from
        this process's rules cache; no query while nobody has any rules)."""
        return reader in self.rules.rules(owner).blocked

    async def blocks_reader_async(self, owner: str, reader: str) -> bool:
        """:meth:`blocks_reader` for async callers: a lookup, off the loop."""
        await self.load_rules(owner)
        return self.blocks_reader(owner, reader)

    async def load_rules(self, user_id: str) -> None:
        """Have ``user_id``'s rules in this process's cache, looked up off the
        event loop when they are not (so async routes may ask sync questions)."""
        if not self.rules.cached(user_id):
            await asyncio.to_thread(self.rules.rules, user_id)

    def can_read_feed(self, user_id: str, feed: str) -> bool:
        """Whether ``user_id`` may read ``feed``: theirs, or of a public group
        whose owner does not block them."""
        return self.refusal(user_id, feed) is None

    def refusal(
        self, user_id: str, feed: str, parsed: FeedId | None = None, *, blocks: bool = True
    ) -> str | None:
        """Why ``user_id`` may not read ``feed``, or None when they may.

        ``parsed``: ``feed`` already parsed by the caller (the hot read route).
        ``blocks``: whether the owner's blocks close a public feed (a follow
        leaves them to its own transaction, which refuses blocked pairs).
        """
        fid = parse_feed_id(feed, self.feed_groups) if parsed is None else parsed
        if fid.key == user_id:
            return None
        if not self.feed_groups[fid.group].public:
            return (
                f"{user_id!r} may not read {feed}: feeds of group {fid.group!r} "
                f"are read by their owner ({fid.key!r}) only"
            )
        if blocks and self.blocks_reader(fid.key, user_id):
            return f"{fid.key!r} blocks {user_id!r}: {feed} is closed to it"
        return None

    def activity_refusal(self, activity: Activity, user_id: str) -> str | None:
        """Why ``user_id`` may not see ``activity`` (nor its reactions, nor react
        to it), or None when they may (:meth:`can_read_activity`)."""
        if self.can_read_activity(activity, user_id):
            return None
        return f"{user_id!r} may not see activity {activity.id} or its reactions"

    def address_refusal(self, user_id: str, to: Iterable[str]) -> str | None:
        """Why ``user_id`` may not name ``to`` in an activity's or a reaction's
        ``to`` (writing into those feeds), or None: their own feeds, and those of
        groups configured ``addressable`` (notification groups by default)."""
        for target in to:
            try:
                fid = parse_feed_id(target, self.feed_groups)
            except ValidationError:
                continue  # not a feed: the activity's own validation says so
            if fid.key != user_id and not self.feed_groups[fid.group].addressable_by_users:
                return (
                    f"{user_id!r} may not address {target} in to: "
                    f"group {fid.group!r} is not addressable by users"
                )
        return None

    def can_read_activity(self, activity: Activity, user_id: str) -> bool:
        """Whether ``user_id`` may see ``activity``: it is theirs, it was
        addressed to one of their feeds, they may read the feed it was
        published in, or one of their feeds follows that feed; and its actor
        does not block them."""
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
        if fid.key == user_id:
            return True
        # The feed routes' rule, then its followers (a block ends follows both
        # ways, so one who is blocked follows nothing of the owner's).
        if fid.group in self.feed_groups and self.refusal(user_id, source, fid) is None:
            return True
        if self.canonical.placements.is_placed(activity.id):
            return False  # (placed in feeds: none of its feed's followers has it)
        mine = [f"{group}:{user_id}" for group in self.feed_groups]
        return bool(self.canonical.follows.followers_among(source, mine))

    # -- what rules hide -----------------------------------------------------------

    def hides(
        self, user_id: str, item: Mapping[str, Any], context: Context | str = Context.TIMELINE
    ) -> bool:
        """Whether ``user_id``'s mutes, blocks and filters hide ``item`` (an
        activity in its JSON shape) in ``context``."""
        return self.rules.rules(user_id).hides(item, Context(context), self.clock.ms())

    def hider(self, feed: str, context: Context) -> Hide | None:
        """Whether the rules of ``feed``'s owner (its key) hide an activity, given
        its JSON; None when they have none (nearly every read)."""
        rules = self.rules.rules(feed.partition(":")[2])
        if rules.empty:
            return None
        now = self.clock.ms()
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

    def event_hiders(self, feeds: Sequence[str]) -> Hidden:
        """Whether the rules of each of ``feeds``' owners hide an activity there:
        their rules looked up in one batch (a delivery reaches many feeds)."""
        rules = self.rules.rules_many({f.partition(":")[2] for f in feeds})
        now = self.clock.ms()

        def hidden(feed: str, item: Mapping[str, Any], context: Context) -> bool:
            found = rules.get(feed.partition(":")[2])
            return found is not None and not found.empty and found.hides(item, context, now)

        return hidden

    def keeper(self, feed: str) -> Keep | None:
        """What the rules of ``feed``'s owner leave of an aggregate: its activities they
        do not hide (None: none are left). None when they have no rules."""
        rules = self.rules.rules(feed.partition(":")[2])
        if rules.empty:
            return None
        kind = self.feed_groups[feed.partition(":")[0]].kind
        context = Context.NOTIFICATION if kind == FeedKind.NOTIFICATION else Context.TIMELINE
        now = self.clock.ms()

        def keep(aggregate: Aggregate) -> Aggregate | None:
            shown = [a for a in aggregate.activities if not rules.hides(a.to_dict(), context, now)]
            if not shown:
                return None
            if len(shown) == len(aggregate.activities):
                return aggregate
            return dataclasses.replace(aggregate, activities=shown)

        return keep

    def aggregates_as_read(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        mark_seen: bool = False,
        mark_read: bool = False,
    ) -> AggregatePage:
        """A page of an aggregated feed as its owner reads it: aggregates their rules
        leave, and unseen/unread counts without the aggregates they hide whole."""
        page = self.aggregated.read_aggregates(
            feed, limit, cursor, mark_seen=mark_seen, mark_read=mark_read, keep=self.keeper(feed)
        )
        if page.unseen is not None:
            unseen, unread = self.visible_counts(feed, page.unseen, page.unread or 0)
            page = dataclasses.replace(page, unseen=unseen, unread=unread)
        return page

    def visible_counts(self, feed: str, unseen: int, unread: int) -> tuple[int, int]:
        """``unseen`` and ``unread`` less the aggregates whose shown activities the
        owner's rules all hide: with rules, a walk of the feed's aggregates that
        stops once every unseen and unread aggregate has been looked at."""
        rules = self.rules.rules(feed.partition(":")[2])
        if rules.empty or not (unseen or unread):
            return unseen, unread
        now = self.clock.ms()
        cursor = None
        looked_unseen = looked_unread = hidden_unseen = hidden_unread = 0
        while looked_unseen < unseen or looked_unread < unread:
            page = self.aggregated.read_aggregates(
                feed, 100, cursor, mark_seen=False, mark_read=False
            )
            for aggregate in page.results:
                looked_unseen += not aggregate.is_seen
                looked_unread += not aggregate.is_read
                items = [a.to_dict() for a in aggregate.activities]
                if all(rules.hides(a, Context.NOTIFICATION, now) for a in items):
                    hidden_unseen += not aggregate.is_seen
                    hidden_unread += not aggregate.is_read
            if page.next is None:
                break
            cursor = page.next
        return max(0, unseen - hidden_unseen), max(0, unread - hidden_unread)
