"""Activities: publish a batch, look up, update and remove (a single publish:
:mod:`tidings.http.publishing`)."""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from tidings.core.activity import validate
from tidings.core.errors import ValidationError
from tidings.core.limits import MAX_BATCH_TO
from tidings.http import auth, models
from tidings.http.deps import Engine, Flag, Who, feed_id
from tidings.http.responses import json_response

router = APIRouter(tags=["activities"])


@router.post("/v1/feeds/{group}/{key}/activities:batch", response_model=models.BatchOut)
def add_batch(
    request: Request, group: str, key: str, body: models.BatchIn, who: Who, engine: Engine
) -> Response:
    """Publish up to 100 activities, with up to 1,000 `to` feeds in all; all are
    validated before any is written."""
    feed = feed_id(engine, group, key)
    addressed = sum(len(item.to) for item in body.activities)
    if addressed > MAX_BATCH_TO:
        raise ValidationError(
            f"{addressed:,} feeds named in to in all; the limit is {MAX_BATCH_TO:,} per batch",
            field="activities",
        )
    for item in body.activities:
        auth.check_publish(who, feed, item.actor)
        auth.check_to(who, item.to, engine.access)
    data = [a.model_dump() for a in body.activities]
    for i, raw in enumerate(data):
        try:
            validate(raw, now=engine.clock.now(), check_feed=engine.check_feed)
        except ValidationError as exc:
            raise ValidationError(exc.detail, field=f"activities.{i}.{exc.field}") from None
    # One transaction for the batch: all stored, or none.
    published = engine.activities.publish_many(feed, data)
    engine.settle()  # (answered once its writes are made: any process reads them)
    request.app.state.metrics.published.inc(sum(created for _, created in published))
    results = [{"created": created, "activity": a.to_dict()} for a, created in published]
    return json_response({"results": results})


@router.get("/v1/feeds/{group}/{key}/activities", response_model=models.ActivityOut)
def get_by_foreign_id(
    group: str,
    key: str,
    who: Who,
    foreign_id: Annotated[str, Query(max_length=255)],
    engine: Engine,
) -> Response:
    """The activity with `foreign_id` in this feed."""
    feed = feed_id(engine, group, key)
    auth.check_read(who, feed, engine.access)
    return json_response(engine.get_activity((feed, foreign_id)).to_dict())


@router.get("/v1/activities/{activity_id}", response_model=models.ActivityOut)
def get_activity(
    activity_id: str,
    who: Who,
    engine: Engine,
    enrich: Flag = False,
    fields: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response:
    """One activity by id (user tokens: their own activities); `enrich` as for feeds."""
    activity = engine.get_activity(activity_id)
    if not who.server and activity.actor != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may not read this activity")
    body = activity.to_dict()
    if enrich:
        engine.reads.enrich([body], fields)
    return json_response(body)


@router.patch("/v1/activities/{activity_id}", response_model=models.ActivityOut)
def update_activity(activity_id: str, body: models.UpdateIn, who: Who, engine: Engine) -> Response:
    """Set and unset keys of `extra`; visible at once in every feed holding it."""
    current = engine.get_activity(activity_id)
    if not who.server and current.actor != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may not change this activity")
    updated = engine.update_activity(activity_id, set=body.set, unset=body.unset)
    return json_response(updated.to_dict())


@router.delete("/v1/feeds/{group}/{key}/activities/{activity_id}", status_code=204)
def remove_activity(group: str, key: str, activity_id: str, who: Who, engine: Engine) -> Response:
    """Remove an activity added to this feed from every feed it reached; one that
    only reached this feed through `to`, from this feed alone."""
    feed = feed_id(engine, group, key)
    auth.check_owner(who, feed, "remove from")
    engine.remove_activity(feed, activity_id)
    return Response(status_code=204)


@router.delete("/v1/feeds/{group}/{key}/activities", status_code=204)
def remove_by_foreign_id(
    group: str,
    key: str,
    who: Who,
    foreign_id: Annotated[str, Query(min_length=1, max_length=255)],
    engine: Engine,
) -> Response:
    """Remove the activity with `foreign_id` from this feed and every feed it reached."""
    feed = feed_id(engine, group, key)
    auth.check_owner(who, feed, "remove from")
    engine.remove_activity(feed, foreign_id=foreign_id)
    return Response(status_code=204)
