"""Feeds over the Stream protocol: add one or many activities, read a page,
remove by id or by foreign id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool

from tidings.core.activity import validate
from tidings.core.errors import ValidationError
from tidings.core.limits import MAX_BATCH, MAX_BATCH_TO, MAX_PAGE_SIZE
from tidings.http import auth
from tidings.http.access import check_readable
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
    limit, offset, before, after = _page_query(call)
    cursor = None if before is None else engine.reads.cursor_before(feed, before)
    walk = _Walk(offset, limit + 1, after)
    while True:
        page = engine.reads.json(feed, limit=walk.size(), cursor=cursor)
        if walk.done(page.results) or page.next is None:
            break
        cursor = page.next
    docs = [orjson.loads(doc) for doc in walk.found[:limit]]
    results = _shown(docs, engine.activities.sources([doc["id"] for doc in docs]), feed)
    reaction_flags.add_fields(call, results)
    return 200, _page(call, limit, results, len(walk.found) > limit)


async def read_on_loop(call: Call) -> tuple[int, dict[str, Any]]:
    """:func:`read`, with the first page of a flat feed (nearly every read)
    read on the event loop, as tidings' own ``/v1`` route reads it: no hop to
    a thread, and on Redis the store's round trip awaited. Any other read
    (aggregated or ranked groups, ``offset``, id bounds, reaction flags) is
    :func:`read`, in a thread."""
    engine, feed = call.engine, call.feed
    group = engine.feed_groups[call.slug]
    query = call.query
    if group.aggregated or group.ranked or any(name in query for name in _OFF_THE_LOOP):
        return await run_in_threadpool(read, call)
    await check_readable(engine, call.grant.principal(), feed)
    limit = _page_query(call)[0]
    walk = _Walk(0, limit + 1, None)
    cursor = None
    while True:
        page = await engine.reads.json_async(feed, limit=walk.size(), cursor=cursor)
        if walk.done(page.results) or page.next is None:
            break
        cursor = page.next
    docs = [orjson.loads(doc) for doc in walk.found[:limit]]
    ids = [doc["id"] for doc in docs]
    sources = engine.activities.sources_kept(ids)
    if sources is None:  # some not looked up before: a query, off the loop
        sources = await run_in_threadpool(engine.activities.sources, ids)
    return 200, _page(call, limit, _shown(docs, sources, feed), len(walk.found) > limit)


def _shown(
    docs: list[dict[str, Any]], sources: Mapping[str, str], feed: str
) -> list[dict[str, Any]]:
    """Stored activities of ``feed`` as Stream shows them, each with its origin."""
    return [activity_out(doc, origin(sources, doc["id"], feed)) for doc in docs]


#: Query values that take a read off the event loop (see :func:`read_on_loop`).
_OFF_THE_LOOP = (
    "offset",
    "id_lt",
    "id_lte",
    "id_gt",
    "id_gte",
    "ranking",
    *reaction_flags.FLAGS,
)


def _page_query(call: Call) -> tuple[int, int, str | None, str | None]:
    """``limit``, ``offset`` and the id bounds of a flat or ranked feed's read."""
    feed, group = call.feed, call.engine.feed_groups[call.slug]
    limit = integer(call.query, "limit", 25, 1, MAX_PAGE_SIZE)
    offset = integer(call.query, "offset", 0, 0, MAX_OFFSET)
    before, after = id_bounds(call.query)
    if after is not None and group.ranked:
        raise MappingError(f"{feed} is ranked, ordered by score: not paged by id", field="id_gt")
    return limit, offset, before, after


def _page(call: Call, limit: int, results: list[dict[str, Any]], more: bool) -> dict[str, Any]:
    """The body of a page: its activities and the link to the next."""
    following = ""
    if more:
        # Nothing to quote: a key is [A-Za-z0-9_-] (settings check it), an id a UUID.
        query = f"api_key={call.grant.key.key}&limit={limit}&id_lt={results[-1]['id']}"
        following = f"{PREFIX}/feed/{call.slug}/{call.user_id}/?{query}"
    return {"results": results, "next": following}


class _Walk:
    """Up to ``want`` activities (stored JSON), read a store page at a time,
    past the first ``skip``, all with ids above ``after``."""

    def __init__(self, skip: int, want: int, after: str | None) -> None:
        self.skip, self.want, self.after = skip, want, after
        self.found: list[bytes] = []

    def size(self) -> int:
        """How many to ask the store for next."""
        return min(MAX_PAGE_SIZE, self.skip + self.want - len(self.found))

    def done(self, docs: list[bytes]) -> bool:
        """Take a store page; True when nothing more is wanted."""
        for doc in docs:
            if self.after is not None and _doc_id(doc) <= self.after:
                return True  # newest first: the rest are older still
            if self.skip:
                self.skip -= 1
            else:
                self.found.append(doc)
                if len(self.found) == self.want:
                    return True
        return False


def _doc_id(doc: bytes) -> str:
    found: str = orjson.loads(doc)["id"]
    return found


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
