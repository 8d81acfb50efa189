"""Calls over many feeds at once: ``follow_many``, ``unfollow_many``,
``feed/add_to_many`` and the follow counts of ``stats/follow``. Each takes a
server token for every feed (``feed_id`` ``*``), as the clients make it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.core.limits import MAX_COPY_LIMIT, MAX_FOLLOW_BATCH, MAX_PAGE_SIZE, MAX_TO
from tidings.core.results import Follow, FollowList
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.follows import DEFAULT_COPY_LIMIT
from tidings.http.getstream.mapper import MappingError, activity_in, integer

#: Follows ``stats/follow`` counts one by one when it is asked for some feed
#: groups only (``followers_slugs``): beyond, it says so rather than guess.
MAX_SLUG_COUNT = 10_000


def follow_many(call: Call) -> tuple[int, dict[str, Any]]:
    """Every ``{"source", "target"}`` follow, in one transaction; each copies the
    target's newest ``activity_copy_limit`` activities (query)."""
    copy_limit = integer(call.query, "activity_copy_limit", DEFAULT_COPY_LIMIT, 0, MAX_COPY_LIMIT)
    pairs = [(source, target) for source, target, _ in _relations(call)]
    call.engine.follow_many(pairs, copy_limit=copy_limit)
    call.engine.settle()
    return 201, {}


def unfollow_many(call: Call) -> tuple[int, dict[str, Any]]:
    """Every ``{"source", "target", "keep_history"}`` unfollow (one at a time: a
    failure leaves those before it done)."""
    for source, target, keep in _relations(call):
        call.engine.unfollow(source, target, keep_history=keep)
    call.engine.settle()
    return 201, {}


def _relations(call: Call) -> list[tuple[str, str, bool]]:
    items = call.body
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_FOLLOW_BATCH:
        raise MappingError(f"must be a list of 1 to {MAX_FOLLOW_BATCH:,} follows", field="body")
    out: list[tuple[str, str, bool]] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise MappingError("must be a JSON object: source and target", field=f"{i}")
        source, target, keep = item.get("source"), item.get("target"), item.get("keep_history")
        if not isinstance(source, str) or not isinstance(target, str):
            raise MappingError("source and target must be feed ids (slug:id)", field=f"{i}")
        if keep is not None and not isinstance(keep, bool):
            raise MappingError("must be true or false", field=f"{i}.keep_history")
        call.check_groups([source, target])
        out.append((source, target, bool(keep)))
    return out


def add_to_many(call: Call) -> tuple[int, dict[str, Any]]:
    """The activity placed in each feed of ``feeds`` and not sent to their
    followers, as Stream does: one activity (one id) in all, one transaction.
    A ``to`` is refused, as Stream refuses it here."""
    body = call.body if isinstance(call.body, Mapping) else {}
    feeds = body.get("feeds")
    if not isinstance(feeds, list) or not 1 <= len(feeds) <= MAX_TO:
        raise MappingError(f"must be a list of 1 to {MAX_TO} feed ids", field="feeds")
    if not all(isinstance(feed, str) for feed in feeds):
        raise MappingError("must be a list of feed ids (slug:id)", field="feeds")
    data = activity_in(body.get("activity"))
    if data.get("to"):
        raise MappingError("to is not allowed: the activity goes to the feeds named", field="to")
    call.check_groups(feeds)
    call.engine.activities.place(feeds, data)
    call.engine.settle()
    return 201, {}


def follow_stats(call: Call) -> tuple[int, dict[str, Any]]:
    """How many feeds follow ``followers`` and how many ``following`` follows,
    counting only the groups of ``followers_slugs`` / ``following_slugs`` if given."""
    results: dict[str, Any] = {}
    for kind, name in ((FollowList.FOLLOWERS, "followers"), (FollowList.FOLLOWING, "following")):
        feed = call.query.get(name)
        if not feed:
            continue
        call.check_groups([feed])
        slugs = {s for s in call.query.get(f"{name}_slugs", "").split(",") if s}
        count = _count(call, kind, feed, slugs) if slugs else _total(call, kind, feed)
        results[name] = {"feed": feed, "count": count}
    if not results:
        raise MappingError("name a feed: followers, following or both", field="followers")
    return 200, {"results": results}


def _total(call: Call, kind: FollowList, feed: str) -> int:
    followers, following = call.engine.counts(feed)
    return followers if kind == FollowList.FOLLOWERS else following


def _count(call: Call, kind: FollowList, feed: str, slugs: set[str]) -> int:
    lookup = call.engine.followers if kind == FollowList.FOLLOWERS else call.engine.following
    count = scanned = 0
    cursor: str | None = None
    while True:
        page = lookup(feed, cursor=cursor, limit=MAX_PAGE_SIZE)
        scanned += len(page.results)
        count += sum(_other(row, kind).partition(":")[0] in slugs for row in page.results)
        if page.next is None:
            return count
        if scanned >= MAX_SLUG_COUNT:
            raise MappingError(
                f"{feed} has over {MAX_SLUG_COUNT:,} follows; counts by group look "
                "through at most that many (without slugs: any number)",
                field=f"{kind.value}_slugs",
            )
        cursor = page.next


def _other(row: Follow, kind: FollowList) -> str:
    return row.follower if kind == FollowList.FOLLOWERS else row.source
