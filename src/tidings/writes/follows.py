"""Follows: made with their history copied in, undone with it taken out.

A follow and the copy of its source's newest activities are queued in one
transaction; the copy is carried out at once, and left to a runner if that
fails. Unfollowing removes from the follower's store what came through the
follow (unless it was also addressed to the follower).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from tidings.canonical.store import CanonicalStore
from tidings.core.cursor import CursorCodec
from tidings.core.errors import ValidationError
from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.limits import LEASE_MS, MAX_COPY_LIMIT, MAX_FOLLOW_BATCH, check_page_limit
from tidings.core.results import Follow, FollowList, Page
from tidings.delivery.deliverer import Deliverer
from tidings.stores.base import AggregateStore, TimelineStore

log = logging.getLogger("tidings.writes.follows")


class FollowWrites:
    """``notify`` tells the runner there is work (a copy left to it)."""

    def __init__(
        self,
        canonical: CanonicalStore,
        timeline: TimelineStore,
        aggregates: AggregateStore,
        deliverer: Deliverer,
        cursors: CursorCodec,
        *,
        now_ms: Callable[[], int],
        notify: Callable[[], None],
        taken_back: Callable[[str, Sequence[str], Sequence[str]], None] | None = None,
    ) -> None:
        self.canonical = canonical
        #: Told what an unfollow took out of a feed (ids, and aggregate keys of
        #: an aggregated feed): live events.
        self.taken_back = taken_back
        self.deliverer = deliverer
        self.planner = deliverer.planner
        self.feed_groups: Mapping[str, FeedGroup] = deliverer.feed_groups
        self.timeline = timeline
        self.aggregates = aggregates
        self.cursors = cursors
        self.now_ms = now_ms
        self.notify = notify

    def follow_many(
        self, pairs: Iterable[tuple[str, str]], copy_limit: int
    ) -> list[tuple[str, str]]:
        valid: set[str] = set()  # (a follower of many sources is checked once)
        checked = [self.pair(p, valid) for p in pairs]
        if len(checked) > MAX_FOLLOW_BATCH:
            raise ValidationError(
                f"{len(checked)} follows in one batch; the limit is {MAX_FOLLOW_BATCH}"
            )
        if not isinstance(copy_limit, int) or not 0 <= copy_limit <= MAX_COPY_LIMIT:
            raise ValidationError(
                f"must be an integer from 0 to {MAX_COPY_LIMIT}", field="copy_limit"
            )
        now = self.now_ms()
        # Claimed by this call: no runner takes the copy unless this one fails.
        followed = self.canonical.follows.follow(
            checked, now, copy_limit=copy_limit, lease_until_ms=now + LEASE_MS
        )
        try:
            self.canonical.users.forget([f for pair in followed.created for f in pair])
        except Exception:
            # Committed all the same: a stale counts entry expires by itself,
            # and raising here would leave the copy below claimed by nobody
            # until its lease lapsed (a minute of a follower's feed empty).
            log.exception("forgetting the counts of %d new follows failed", len(followed.created))
        if followed.copy is not None:
            try:
                self.deliverer.copier.copy(followed.copy)
            except Exception:
                log.exception("copying history of new follows failed; left to the runner")
                self.canonical.outbox.release(followed.copy)
                self.notify()
        return followed.created

    def pair(self, pair: object, valid: set[str] | None = None) -> tuple[str, str]:
        """``pair`` checked: two valid feed ids, not the same; ``valid`` holds
        feed ids checked already, and gains these."""
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValidationError("each follow must be a (follower, source) pair")
        follower, source = pair
        for feed in (follower, source):
            if valid is None or not isinstance(feed, str) or feed not in valid:
                self._feed(feed)  # (raises for anything but a valid feed id)
                if valid is not None:
                    valid.add(feed)
        if follower == source:
            raise ValidationError(f"a feed cannot follow itself: {follower}")
        return follower, source

    def _feed(self, feed: str) -> str:
        parse_feed_id(feed, self.feed_groups)
        return feed

    def unfollow(self, follower: str, source: str, keep_history: bool) -> bool:
        self.pair((follower, source))
        if not self.canonical.follows.unfollow(follower, source, self.now_ms()):
            return False
        self.canonical.users.forget([follower, source])
        if keep_history:
            return True
        feed_group = follower.split(":")[0]
        if self.feed_groups[feed_group].aggregated:
            held = self.aggregates.member_ids(follower)
            came = self.canonical.activities.ids_from(source, held, unless_to=follower)
            members = self.deliverer.stored_members(feed_group, came)
            self.aggregates.remove([follower], members, self.planner.aggregate_cap(feed_group))
            removed = [m.id for m in members], [m.aggregate for m in members]
        else:
            cap = self.planner.cap(feed_group)
            held = self.timeline.page(follower, limit=cap.max_length, before=None, cap=cap)
            came = self.canonical.activities.ids_from(source, held, unless_to=follower)
            self.timeline.remove([follower], came, cap)
            removed = came, []
        if self.taken_back is not None and removed[0]:
            self.taken_back(follower, *removed)
        return True

    def page(self, kind: FollowList, feed: str, cursor: str | None, limit: int) -> Page[Follow]:
        """A page of ``feed``'s followers or followed sources."""
        self._feed(feed)
        check_page_limit(limit)
        context = f"{kind}:{feed}"
        after = None if cursor is None else self.cursors.decode(context, cursor)
        lookup = (
            self.canonical.follows.followers
            if kind == FollowList.FOLLOWERS
            else self.canonical.follows.following
        )
        rows = lookup(feed, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        followers = kind == FollowList.FOLLOWERS
        position = (rows[-1].follower if followers else rows[-1].source) if rows else ""
        return Page(rows, self.cursors.encode(context, position) if more else None)
