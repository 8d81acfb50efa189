"""Follows over the Stream protocol: follow, unfollow, and the lists of
followers and followed feeds."""

from __future__ import annotations

from typing import Any

from tidings.core.limits import MAX_COPY_LIMIT, MAX_PAGE_SIZE
from tidings.core.results import Follow, FollowList
from tidings.http import auth
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.mapper import MappingError, flag, follow_out, integer

#: Stream's default for ``activity_copy_limit``.
DEFAULT_COPY_LIMIT = 100
#: Follows a list may skip with ``offset``: each one skipped is read.
MAX_OFFSET = 1000
#: Follows a list with ``filter`` looks through before it gives up (saying so):
#: the filter is applied to the list as it is read.
MAX_FILTER_SCAN = 10_000
#: Feeds one ``filter`` may name.
MAX_FILTER_FEEDS = 100


def follow(call: Call) -> tuple[int, dict[str, Any]]:
    """This feed follows ``target``, copying its newest ``activity_copy_limit`` activities."""
    body = call.body if isinstance(call.body, dict) else {}
    target = body.get("target")
    if not isinstance(target, str) or not target:
        raise MappingError("is required: the feed to follow, as slug:id", field="target")
    copy_limit = body.get("activity_copy_limit", DEFAULT_COPY_LIMIT)
    if (
        not isinstance(copy_limit, int)
        or isinstance(copy_limit, bool)
        or not 0 <= copy_limit <= MAX_COPY_LIMIT
    ):
        raise MappingError(
            f"must be an integer from 0 to {MAX_COPY_LIMIT:,}", field="activity_copy_limit"
        )
    call.check_groups([target])
    auth.check_follow(call.grant.principal(), call.feed, target, call.engine.access)
    call.engine.follow(call.feed, target, copy_limit=copy_limit)
    call.engine.settle()
    return 201, {}


def unfollow(call: Call) -> tuple[int, dict[str, Any]]:
    """Stop following ``target``; with ``keep_history``, keep what came through it."""
    target = call.path["target"]
    call.check_groups([target])
    auth.check_owner(call.grant.principal(), call.feed, "unfollow from")
    call.engine.unfollow(call.feed, target, keep_history=flag(call.query, "keep_history"))
    call.engine.settle()
    return 200, {}


def followers(call: Call) -> tuple[int, dict[str, Any]]:
    """The feeds following this one (``limit``, ``offset``, ``filter``)."""
    return 200, {"results": _listed(call, FollowList.FOLLOWERS)}


def following(call: Call) -> tuple[int, dict[str, Any]]:
    """The feeds this one follows (``limit``, ``offset``, ``filter``)."""
    return 200, {"results": _listed(call, FollowList.FOLLOWING)}


def _listed(call: Call, kind: FollowList) -> list[dict[str, Any]]:
    auth.check_read(call.grant.principal(), call.feed, call.engine.access)
    limit = integer(call.query, "limit", 25, 1, MAX_PAGE_SIZE)
    offset = integer(call.query, "offset", 0, 0, MAX_OFFSET)
    wanted = {f for f in call.query.get("filter", "").split(",") if f}
    if len(wanted) > MAX_FILTER_FEEDS:
        raise MappingError(
            f"names {len(wanted)} feeds; the limit is {MAX_FILTER_FEEDS}", field="filter"
        )
    lookup = call.engine.followers if kind == FollowList.FOLLOWERS else call.engine.following
    rows: list[Follow] = []
    cursor: str | None = None
    scanned = 0
    while len(rows) < offset + limit:
        page = lookup(call.feed, cursor=cursor, limit=MAX_PAGE_SIZE)
        scanned += len(page.results)
        for row in page.results:
            other = row.follower if kind == FollowList.FOLLOWERS else row.source
            if not wanted or other in wanted:
                rows.append(row)
        if page.next is None:
            break
        if wanted and scanned >= MAX_FILTER_SCAN:
            raise MappingError(
                f"{call.feed} has over {MAX_FILTER_SCAN:,} follows to look through; "
                "a filtered list looks through at most that many",
                field="filter",
            )
        cursor = page.next
    return [follow_out(row) for row in rows[offset : offset + limit]]
