"""Feeds over the Stream protocol: add one or many activities, read a page,
remove by id or by foreign id."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from tidings.core.activity import Activity, validate
from tidings.core.errors import ValidationError
from tidings.core.limits import MAX_BATCH, MAX_BATCH_TO, MAX_PAGE_SIZE
from tidings.http import auth
from tidings.http.getstream import groups, reaction_flags
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import (
    MappingError,
    activity_in,
    activity_out,
    flag,
    from_uuid,
    id_bounds,
    integer,
    origin,
)

#: Activities a read may skip with ``offset``: each one skipped is read.
MAX_OFFSET = 1000
#: Where the service answers Stream's clients (the ``next`` link of a page).
PREFIX = "/api/v1.0"


def add(call: Call) -> tuple[int, dict[str, Any]]:
    """One activity (the body), or many (``{"activities": [...]}``, all or none)."""
    body = call.body
    if isinstance(body, dict) and "activities" in body:
        return 201, {"activities": _add_many(call, body["activities"])}
    data = activity_in(body)
    _check_publish(call, data)
    stored, _ = call.engine.activities.publish(call.feed, data)
    call.engine.settle()
    return 201, activity_out(stored.to_dict())


def _add_many(call: Call, items: object) -> list[dict[str, Any]]:
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
        raise MappingError(f"must be a list of 1 to {MAX_BATCH} activities", field="activities")
    data = [activity_in(item, f"activities.{i}") for i, item in enumerate(items)]
    addressed = sum(len(d.get("to") or ()) for d in data)
    if addressed > MAX_BATCH_TO:
        raise MappingError(
            f"{addressed:,} feeds named in to in all; the limit is {MAX_BATCH_TO:,} per batch",
            field="activities",
        )
    engine = call.engine
    for i, item in enumerate(data):
        _check_publish(call, item)
        try:  # (publish_many checks them too; here each error names its activity)
            validate(item, now=engine.clock.now(), check_feed=engine.check_feed)
        except ValidationError as exc:
            raise ValidationError(exc.detail, field=f"activities.{i}.{exc.field}") from None
    published = engine.activities.publish_many(call.feed, data)
    engine.settle()
    return [activity_out(stored.to_dict()) for stored, _ in published]


def _check_publish(call: Call, data: dict[str, Any]) -> None:
    who = call.grant.principal()
    actor = data.get("actor")
    if isinstance(actor, str) and actor.startswith("SU:"):
        # A reference to a user (Stream's JS client makes its user's the actor by
        # default) acts as that user.
        actor = actor[3:]
    auth.check_publish(who, call.feed, actor)
    to = data.get("to") or []
    if all(isinstance(feed, str) for feed in to):
        call.check_groups(to)
        auth.check_to(who, to, call.engine.access)


def read(call: Call) -> tuple[int, dict[str, Any]]:
    """A page, newest first: ``limit``, ``offset``, ``id_lt``/``id_lte``/``id_gt``/``id_gte``."""
    engine, feed = call.engine, call.feed
    group = engine.feed_groups[call.slug]
    if group.aggregated:
        return groups.read(call)
    if call.query.get("ranking") and not group.ranked:
        # A ranked group has one formula, whatever name the client asks for.
        raise StreamError(Code.FEED_CONFIG, f"{feed} is a {group.kind} feed: it is not ranked")
    auth.check_read(call.grant.principal(), feed, engine.access)
    limit = integer(call.query, "limit", 25, 1, MAX_PAGE_SIZE)
    offset = integer(call.query, "offset", 0, 0, MAX_OFFSET)
    before, after = id_bounds(call.query)
    if after is not None and group.ranked:
        raise MappingError(f"{feed} is ranked, ordered by score: not paged by id", field="id_gt")
    cursor = None if before is None else engine.reads.cursor_before(feed, before)
    found = _walk(call, cursor, offset, limit + 1, after)
    shown = found[:limit]
    sources = engine.activities.sources([a.id for a in shown])
    results = [activity_out(a.to_dict(), origin(sources, a.id, feed)) for a in shown]
    reaction_flags.add_fields(call, results)
    following = ""
    if len(found) > limit:
        query = {"api_key": call.query["api_key"], "limit": limit, "id_lt": results[-1]["id"]}
        following = f"{PREFIX}/feed/{call.slug}/{call.user_id}/?{urlencode(query)}"
    return 200, {"results": results, "next": following}


def _walk(
    call: Call, cursor: str | None, skip: int, want: int, after: str | None
) -> list[Activity]:
    """Up to ``want`` activities from ``cursor`` on, past the first ``skip``, all
    with ids above ``after``: as many pages as it takes."""
    found: list[Activity] = []
    while True:
        size = min(MAX_PAGE_SIZE, skip + want - len(found))
        page = call.engine.read(call.feed, limit=size, cursor=cursor)
        for activity in page.results:
            if after is not None and activity.id <= after:
                return found  # newest first: the rest are older still
            if skip:
                skip -= 1
            else:
                found.append(activity)
                if len(found) == want:
                    return found
        if page.next is None:
            return found
        cursor = page.next


def remove(call: Call) -> tuple[int, dict[str, Any]]:
    """Remove an activity by id, or with ``foreign_id=1`` by foreign id."""
    identifier = call.path["activity_id"]
    auth.check_owner(call.grant.principal(), call.feed, "remove from")
    if flag(call.query, "foreign_id"):
        call.engine.remove_activity(call.feed, foreign_id=identifier)
    else:
        call.engine.remove_activity(call.feed, from_uuid(identifier, "activity_id"))
    call.engine.settle()
    return 200, {"removed": identifier}
