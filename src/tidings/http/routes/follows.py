"""Follows: follow (one or a batch), unfollow, and pages of followers and following."""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from tidings.core.results import Follow, FollowList
from tidings.engine import Tidings
from tidings.http import auth, models
from tidings.http.deps import Cursor, Engine, Flag, Limit, Who, feed_id
from tidings.http.responses import json_response

router = APIRouter(tags=["follows"])


@router.post(
    "/v1/feeds/{group}/{key}/follows",
    status_code=201,
    response_model=models.FollowOut,
    responses={200: {"model": models.FollowOut, "description": "already following"}},
)
def follow(group: str, key: str, body: models.FollowIn, who: Who, engine: Engine) -> Response:
    """This feed follows `source`, copying its newest `copy_limit` activities."""
    follower = feed_id(engine, group, key)
    auth.check_follow(who, follower, body.source, engine.access)
    created = engine.follow(follower, body.source, copy_limit=body.copy_limit)
    body_out = {"follower": follower, "source": body.source, "created": created}
    return json_response(body_out, 201 if created else 200)


@router.delete("/v1/feeds/{group}/{key}/follows/{source}", status_code=204)
def unfollow(
    group: str, key: str, source: str, who: Who, engine: Engine, keep_history: Flag = False
) -> Response:
    """Stop following `source`; unless `keep_history`, drop what came through it."""
    follower = feed_id(engine, group, key)
    auth.check_owner(who, follower, "unfollow from")
    engine.unfollow(follower, source, keep_history=keep_history)
    return Response(status_code=204)


@router.post("/v1/follows:batch", response_model=models.FollowBatchOut)
def follow_batch(body: models.FollowBatchIn, who: Who, engine: Engine) -> Response:
    """Up to 1,000 follows in one transaction."""
    for pair in body.follows:
        auth.check_follow(who, pair.follower, pair.source, engine.access)
    pairs = [(p.follower, p.source) for p in body.follows]
    created = engine.follow_many(pairs, copy_limit=body.copy_limit)
    return json_response({"created": [{"follower": f, "source": s} for f, s in created]})


@router.get("/v1/feeds/{group}/{key}/followers", response_model=models.FollowPage)
def followers(
    group: str, key: str, who: Who, engine: Engine, limit: Limit = 25, cursor: Cursor = None
) -> Response:
    """Feeds following this one, in follower order."""
    return _follow_page(engine, FollowList.FOLLOWERS, group, key, who, limit, cursor)


@router.get("/v1/feeds/{group}/{key}/following", response_model=models.FollowPage)
def following(
    group: str, key: str, who: Who, engine: Engine, limit: Limit = 25, cursor: Cursor = None
) -> Response:
    """Feeds this one follows, in source order."""
    return _follow_page(engine, FollowList.FOLLOWING, group, key, who, limit, cursor)


def _follow_page(
    engine: Tidings,
    kind: FollowList,
    group: str,
    key: str,
    who: auth.Principal,
    limit: int,
    cursor: str | None,
) -> Response:
    feed = feed_id(engine, group, key)
    auth.check_read(who, feed, engine.access)
    lookup = engine.followers if kind == FollowList.FOLLOWERS else engine.following
    page = lookup(feed, cursor=cursor, limit=limit)
    return json_response({"results": [_follow(r) for r in page.results], "next": page.next})


def _follow(row: Follow) -> dict[str, Any]:
    created = datetime.fromtimestamp(row.created_ms / 1000, UTC)
    return {"follower": row.follower, "source": row.source, "created_at": created}
