"""A feed's notification state: mark its aggregates seen or read.

Reading a feed is the fast path (:mod:`tidings.http.fastpath`).
"""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
from fastapi import APIRouter
from starlette.responses import Response

from tidings.engine import Tidings
from tidings.http import auth, models
from tidings.http.deps import Engine, Who, feed_id
from tidings.http.responses import json_response

router = APIRouter(tags=["feeds"])


@router.post("/v1/feeds/{group}/{key}/seen", response_model=models.CountsOut)
def mark_seen(group: str, key: str, body: models.MarkIn, who: Who, engine: Engine) -> Response:
    """Mark aggregates of a notification feed seen; returns the feed's counts after."""
    return _mark(engine, group, key, body, who, read=False)


@router.post("/v1/feeds/{group}/{key}/read", response_model=models.CountsOut)
def mark_read(group: str, key: str, body: models.MarkIn, who: Who, engine: Engine) -> Response:
    """Mark aggregates of a notification feed read (and so seen); returns the counts after."""
    return _mark(engine, group, key, body, who, read=True)


def _mark(
    engine: Tidings, group: str, key: str, body: models.MarkIn, who: auth.Principal, *, read: bool
) -> Response:
    feed = feed_id(engine, group, key)
    auth.check_owner(who, feed, f"mark aggregates {'read' if read else 'seen'} in")
    marker = engine.mark_read if read else engine.mark_seen
    marker(feed, None if body.all else body.groups)
    unseen, unread = engine.notification_counts(feed)
    return json_response({"unseen": unseen, "unread": unread})
