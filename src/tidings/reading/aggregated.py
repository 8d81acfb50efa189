"""Pages of aggregated and notification feeds, and seen/read marks.

The aggregate store builds aggregates at write time and pages them over a snapshot
(see :mod:`tidings.core.aggregation`); a page here is that, its activities
filled in. Marks are recorded in the canonical store before the aggregate store
shows them: rebuilds restore a notification feed's state from the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tidings.canonical.store import CanonicalStore
from tidings.core.activity import Activity
from tidings.core.aggregation import (
    Aggregate,
    AggregatePage,
    Position,
    StoredAggregate,
    StoredAggregatePage,
    check_aggregate_keys,
    decode_position,
    encode_position,
    ms_time,
)
from tidings.core.cursor import CursorCodec
from tidings.core.errors import ValidationError
from tidings.core.feeds import FeedGroup, FeedKind, parse_feed_id
from tidings.core.limits import MAX_MARK_AGGREGATES, check_page_limit
from tidings.reading.docs import ActivityDocs
from tidings.reading.gate import ReaderGate
from tidings.stores.base import AggregateStore
from tidings.stores.caps import Caps

#: What a reader's rules leave of an aggregate (None: nothing, the aggregate is hidden).
Keep = Callable[[Aggregate], Aggregate | None]
#: The most aggregates one store page reads while replacing hidden ones.
MAX_AGGREGATE_BATCH = 200


class AggregatedReads:
    def __init__(
        self,
        canonical: CanonicalStore,
        aggregates: AggregateStore,
        caps: Caps,
        docs: ActivityDocs,
        gate: ReaderGate,
        cursors: CursorCodec,
        *,
        now_us: Callable[[], int],
    ) -> None:
        self.canonical = canonical
        self.aggregates = aggregates
        self.feed_groups: Mapping[str, FeedGroup] = caps.feed_groups
        self.caps = caps
        self.docs = docs
        self.gate = gate
        self.cursors = cursors
        self.now_us = now_us

    def read_aggregates(
        self,
        feed: str,
        limit: int,
        cursor: str | None,
        *,
        mark_seen: bool,
        mark_read: bool,
        keep: Keep | None = None,
    ) -> AggregatePage:
        """A page of aggregates. With ``keep`` (the reader's rules), aggregates it leaves
        empty are replaced by the ones after, read in growing batches, and the
        cursor follows the last aggregate looked at: pages stay full and exact."""
        feed_group = parse_feed_id(feed, self.feed_groups).group
        config = self.feed_groups[feed_group]
        if not config.aggregated:
            raise ValidationError(f"{feed} is a flat feed: read it with read")
        check_page_limit(limit)
        context = f"groups:{feed}"  # signs cursors: kept as it was
        regenerating = not self.gate.reading(feed)
        snapshot: str | None = None
        after: Position | None = None
        if cursor is not None:
            snapshot, after = decode_position(self.cursors.decode(context, cursor))
        cap = self.caps.aggregate_cap(feed_group)
        notification = config.kind == FeedKind.NOTIFICATION
        ask = limit + 1
        results: list[Aggregate] = []
        shown: list[StoredAggregate] = []
        last: StoredAggregate | None = None
        more = False
        while True:
            page = self.aggregates.page(
                feed, limit=ask, snapshot=snapshot, after=after, cap=cap, docs=True
            )
            snapshot = page.snapshot
            docs = self.docs.complete(
                [i for g in page.aggregates for i in g.activity_ids], dict(page.docs)
            )
            for stored in page.aggregates:
                if len(results) == limit:
                    more = True
                    break
                last = stored
                aggregate = self._aggregate(stored, docs, notification)
                if aggregate is not None and keep is not None:
                    aggregate = keep(aggregate)
                if aggregate is not None:
                    results.append(aggregate)
                    shown.append(stored)
            if more or len(page.aggregates) < ask or last is None or snapshot is None:
                break
            # The whole batch looked at, the page still short: read on after it.
            after = Position(last.position, last.key)
            ask = min(MAX_AGGREGATE_BATCH, ask * 2)
        next_cursor = self._next(context, snapshot, last) if more else None
        if not notification:
            return AggregatePage(results, next_cursor, regenerating=regenerating)
        unseen, unread = self._marked(feed, page, shown, mark_seen=mark_seen, mark_read=mark_read)
        return AggregatePage(results, next_cursor, unseen, unread, regenerating)

    def _next(self, context: str, snapshot: str | None, last: StoredAggregate | None) -> str | None:
        """The cursor of the page after ``last`` (None: there is none)."""
        if last is None or snapshot is None:
            return None
        position = Position(last.position, last.key)  # ms, key
        return self.cursors.encode(context, encode_position(snapshot, position))

    @staticmethod
    def _aggregate(
        g: StoredAggregate, docs: Mapping[str, bytes], notification: bool
    ) -> Aggregate | None:
        """An aggregate as readers see it, its activities filled in (None: all of
        them are gone, awaiting their retraction)."""
        activities = [Activity.from_json(docs[i]) for i in g.activity_ids if i in docs]
        if not activities:
            return None
        return Aggregate(
            key=g.key,
            verb=activities[0].verb,
            activity_count=g.activity_count,
            actor_count=g.actor_count,
            activities=activities,
            created_at=ms_time(g.oldest),
            updated_at=ms_time(g.newest),
            is_seen=g.is_seen if notification else None,
            is_read=g.is_read if notification else None,
        )

    def _marked(
        self,
        feed: str,
        page: StoredAggregatePage,
        shown: Sequence[StoredAggregate],
        *,
        mark_seen: bool,
        mark_read: bool,
    ) -> tuple[int, int]:
        """Mark the ``shown`` aggregates as asked; the feed's ``(unseen, unread)`` after."""
        unseen, unread = page.unseen, page.unread
        if mark_seen or mark_read:
            marked = [g.key for g in shown]
            self.canonical.marks.record_marks(feed, marked, read=mark_read, now_us=self.now_us())
            self.aggregates.mark(feed, marked, read=mark_read)
            unseen -= sum(not g.is_seen for g in shown)
            if mark_read:
                unread -= sum(not g.is_read for g in shown)
        return unseen, unread

    def notification_counts(self, feed: str) -> tuple[int, int]:
        feed_group = self._notification_group(feed)
        page = self.aggregates.page(
            feed, limit=1, snapshot=None, after=None, cap=self.caps.aggregate_cap(feed_group)
        )
        return page.unseen, page.unread

    def mark(self, feed: str, aggregates: Sequence[str] | None, *, read: bool) -> None:
        self._notification_group(feed)
        if aggregates is not None:
            aggregates = check_aggregate_keys(aggregates)
            if len(aggregates) > MAX_MARK_AGGREGATES:
                raise ValidationError(
                    f"has {len(aggregates)} aggregates; the limit is {MAX_MARK_AGGREGATES}",
                    field="groups",
                )
        # Recorded first: the store's state is rebuilt from the record.
        self.canonical.marks.record_marks(feed, aggregates, read=read, now_us=self.now_us())
        self.aggregates.mark(feed, aggregates, read=read)

    def _notification_group(self, feed: str) -> str:
        feed_group = parse_feed_id(feed, self.feed_groups).group
        kind = self.feed_groups[feed_group].kind
        if kind != FeedKind.NOTIFICATION:
            raise ValidationError(
                f"{feed} is a {kind} feed; only notification feeds track seen and read"
            )
        return feed_group
