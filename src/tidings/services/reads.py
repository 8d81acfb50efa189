"""Reading feeds: pages of activities (flat and ranked), pages of aggregates
(aggregated and notification) with their seen/read marks, as objects or as
the JSON the HTTP service sends.

The options a read takes are declared once, :class:`ReadOptions`; every read
method takes them as keyword arguments.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol, TypedDict, Unpack

from tidings.core.activity import Activity
from tidings.core.aggregation import AggregatePage
from tidings.core.errors import ValidationError
from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.reactions import Include, parse_includes
from tidings.core.results import Page
from tidings.core.rules import Context
from tidings.reading.aggregated import AggregatedReads
from tidings.reading.enrich import Enricher, parse_fields
from tidings.reading.flat import FlatReads
from tidings.reading.ranked import RankedReads
from tidings.reading.reactions import ReactionReads
from tidings.services.access import Access
from tidings.stores.base import Sender

#: What a mark changed: ``{"seen": …}``, and ``"read"`` for a mark read (which
#: marks seen too); each ``True`` (every aggregate of the feed) or the keys of
#: the aggregates marked.
Marked = Mapping[str, bool | list[str]]


class CountsChanged(Protocol):
    """Tells live readers a notification feed's counts changed, and what a mark
    changed when one did (a declared hook:
    :meth:`tidings.bus.emitter.LiveEvents.counts_changed`)."""

    def __call__(
        self, feed: str, unseen: int, unread: int, marked: Marked | None = None
    ) -> None: ...


#: The feeds someone has open for live events in any process.
Watching = Callable[[], AbstractSet[str]]


class ReadOptions(TypedDict, total=False):
    """What a page of activities may carry beyond the activities.

    ``reactions``: ``"counts,latest,own"`` (or a list of those words) adds
    what each activity carries about its reactions; ``own`` means ``user``'s
    (default: the feed's key). ``explain``: on ranked feeds, the variables
    each score was computed from. ``enrich``: the actor's user and the stored
    objects of ``object`` and ``target`` (``fields``: only those keys of
    profiles and objects' data).
    """

    reactions: str | Sequence[str] | None
    user: str | None
    explain: bool
    enrich: bool
    fields: str | Sequence[str] | None


class Reads:
    """Pages of feeds, and the marks of notification feeds."""

    def __init__(
        self,
        feed_groups: Mapping[str, FeedGroup],
        access: Access,
        flat: FlatReads,
        aggregated: AggregatedReads,
        ranked: RankedReads,
        reactions: ReactionReads,
        enricher: Enricher,
        sender: Sender,
        counts_changed: CountsChanged,
        watching: Watching,
    ) -> None:
        self.feed_groups = feed_groups
        self.access = access
        self.flat = flat
        self.aggregated = aggregated
        self.ranked = ranked
        self.reactions = reactions
        self.enricher = enricher
        self.sender = sender
        self.counts_changed = counts_changed
        self.watching = watching

    def is_aggregated(self, feed: str) -> bool:
        """Whether ``feed`` holds aggregates (aggregated, notification) rather than activities."""
        return self.feed_groups[parse_feed_id(feed, self.feed_groups).group].aggregated

    def read(
        self, feed: str, limit: int = 25, cursor: str | None = None, **options: Unpack[ReadOptions]
    ) -> Page[Activity]:
        """A page of ``feed``; pass ``next`` back as ``cursor`` for the next.

        Flat feeds come newest first; ranked feeds in the order of their
        group's ``ranking``, each activity's ``score`` in ``extras``. What
        ``options`` add (:class:`ReadOptions`) goes in ``extras`` too.
        """
        # The activities as stored; what enrichment adds goes in ``extras``.
        plain = ReadOptions(
            reactions=options.get("reactions"),
            user=options.get("user"),
            explain=options.get("explain", False),
        )
        page = self.json(feed, limit, cursor, **plain)
        activities = [Activity.from_json(doc) for doc in page.results]
        ranked = self.feed_groups[feed.partition(":")[0]].ranked
        enrich = options.get("enrich", False)
        extras = None
        if ranked or options.get("reactions") or enrich:
            docs = page.results
            if enrich:
                docs = self.enricher.docs(docs, parse_fields(options.get("fields")))
            extras = self.reactions.extras(docs, enriched=enrich)
        return Page(activities, page.next, page.regenerating, page.renewed, extras)

    def cursor_before(self, feed: str, activity_id: str) -> str:
        """A cursor for :meth:`read`: the page of flat ``feed`` older than
        ``activity_id`` (ranked feeds are ordered by score: no id is a place in them)."""
        config = self.feed_groups[parse_feed_id(feed, self.feed_groups).group]
        if config.ranked:
            raise ValidationError(
                f"{feed} is a ranked feed, ordered by score: it is not paged by id",
                field="cursor",
            )
        return self.flat.cursor_before(feed, activity_id)

    def json(
        self, feed: str, limit: int = 25, cursor: str | None = None, **options: Unpack[ReadOptions]
    ) -> Page[bytes]:
        """:meth:`read`, with each activity as its JSON (the API's shape): the
        stored JSON, with the fields a read adds (``score``, ``explain``,
        ``reaction_counts``…) spliced in.

        The HTTP service splices these bytes into its response instead of
        parsing and re-serialising every activity of every page.
        """
        include = parse_includes(options.get("reactions"))
        config = self.feed_groups[parse_feed_id(feed, self.feed_groups).group]
        hide = self.access.hider(feed, Context.TIMELINE)
        explain = options.get("explain", False)
        if config.ranked:
            ranked = self.ranked.read(feed, limit, cursor, explain=explain, hide=hide)
            page = Page(ranked.results, ranked.next, ranked.regenerating, ranked.renewed)
        else:
            if explain:
                raise ValidationError(
                    f"{feed} is a {config.kind} feed: only ranked feeds have scores to explain",
                    field="explain",
                )
            page = self.flat.read_json(feed, limit, cursor, hide)
        page = self._with_reactions(feed, page, include, options.get("user"))
        if options.get("enrich", False):
            docs = self.enricher.docs(page.results, parse_fields(options.get("fields")))
            page = Page(docs, page.next, page.regenerating, page.renewed)
        return page

    async def json_async(
        self, feed: str, limit: int = 25, cursor: str | None = None, **options: Unpack[ReadOptions]
    ) -> Page[bytes]:
        """:meth:`json` for an event loop: a flat page's store round trip is
        awaited, not blocking the loop, on stores that can (Redis); ranked pages
        and reaction lookups run in a thread."""
        config = self.feed_groups[parse_feed_id(feed, self.feed_groups).group]
        if self.sender.pending():
            # Its own client does not wait for the writes sent behind (as the
            # pool of the engine's does): the read waits here, off the loop.
            await asyncio.to_thread(self.sender.settle)
        if config.ranked or any(options.get(name) for name in ("reactions", "explain", "enrich")):
            call = functools.partial(self.json, feed, limit, cursor, **options)
            return await asyncio.to_thread(call)
        await self.access.load_rules(feed.partition(":")[2])
        hide = self.access.hider(feed, Context.TIMELINE)
        return await self.flat.read_json_async(feed, limit, cursor, hide)

    def _with_reactions(
        self, feed: str, page: Page[bytes], include: frozenset[Include], user: str | None
    ) -> Page[bytes]:
        if not include:
            return page
        reader = user if user is not None else feed.partition(":")[2]
        results = self.reactions.decorate(page.results, include, reader)
        return Page(results, page.next, page.regenerating, page.renewed)

    def enrich(
        self, items: Sequence[dict[str, Any]], fields: str | Sequence[str] | None = None
    ) -> None:
        """Enrich activities in their JSON shape, in place (see :class:`ReadOptions`)."""
        self.enricher.items(items, parse_fields(fields))

    # -- aggregated feeds ------------------------------------------------------------

    def read_aggregates(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        mark_seen: bool = False,
        mark_read: bool = False,
    ) -> AggregatePage:
        """A page of an aggregated or notification feed: aggregates, newest first.

        ``mark_seen`` / ``mark_read`` mark the returned aggregates after reading
        them (the aggregates show their state from before; the feed's counts,
        from after).
        """
        page = self.access.aggregates_as_read(
            feed, limit, cursor, mark_seen=mark_seen, mark_read=mark_read
        )
        if (mark_seen or mark_read) and page.unseen is not None:
            keys = [g.key for g in page.results]
            marked = _marked(keys, read=mark_read) if keys else None
            self.counts_changed(feed, page.unseen, page.unread or 0, marked)
        return page

    def aggregates_json(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        reactions: str | Sequence[str] | None = None,
        user: str | None = None,
        mark_seen: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """:meth:`read_aggregates` in the API's shape (``results``, ``next``, and
        ``unseen`` / ``unread`` on notification feeds), each aggregate's activities
        with the reaction fields ``reactions`` asks for (``own``: ``user``'s,
        default the feed's key), one batch for the page; and whether the feed is
        being rebuilt (HTTP: 206). The HTTP service and the Django app send it."""
        include = parse_includes(reactions)  # refused before a mark writes anything
        page = self.read_aggregates(feed, limit, cursor, mark_seen=mark_seen)
        body: dict[str, Any] = {"results": [g.to_dict() for g in page.results], "next": page.next}
        if include:
            shown = [a for g in body["results"] for a in g["activities"]]
            reader = user if user is not None else feed.partition(":")[2]
            found = self.reactions.fields([a["id"] for a in shown], include, reader)
            for activity in shown:
                activity.update(found[activity["id"]])
        if page.unseen is not None:
            body["unseen"], body["unread"] = page.unseen, page.unread
        return body, page.regenerating

    def mark_seen(self, feed: str, aggregates: Sequence[str] | None = None) -> None:
        """Mark aggregates of a notification feed seen (``aggregates=None``: all of them)."""
        self._mark(feed, aggregates, read=False)

    def mark_read(self, feed: str, aggregates: Sequence[str] | None = None) -> None:
        """Mark aggregates of a notification feed read, and so seen (``None``: all)."""
        self._mark(feed, aggregates, read=True)

    def _mark(self, feed: str, aggregates: Sequence[str] | None, *, read: bool) -> None:
        self.aggregated.mark(feed, aggregates, read=read)
        if feed in self.watching():
            marked = _marked(True if aggregates is None else list(aggregates), read=read)
            self.counts_changed(feed, *self.notification_counts(feed), marked)

    def notification_counts(self, feed: str) -> tuple[int, int]:
        """``(unseen, unread)`` aggregates of a notification feed (those its owner's
        rules hide whole are not counted)."""
        return self.access.visible_counts(feed, *self.aggregated.notification_counts(feed))


def _marked(aggregates: bool | list[str], *, read: bool) -> Marked:
    """:data:`Marked` of a mark of ``aggregates`` (``True``: all of them)."""
    return {"seen": aggregates, "read": aggregates} if read else {"seen": aggregates}
