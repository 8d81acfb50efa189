"""Aggregated and notification feeds over the Stream protocol: a page of
groups (``limit``, ``offset``, ``id_lt``), and ``mark_seen`` / ``mark_read``
(``true`` for every group of the feed, or a list of group ids)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from tidings.core.aggregation import Aggregate
from tidings.core.feeds import FeedKind
from tidings.core.limits import MAX_PAGE_SIZE
from tidings.http import auth
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import MappingError, integer
from tidings.http.getstream.shapes import group_key, group_keys, group_out

#: Groups a read may skip with ``offset``: each one skipped is read.
MAX_OFFSET = 1000
#: Groups a read looks through for the group ``id_lt`` names before it gives up
#: (saying so): tidings pages aggregates by cursor, not by a group's id.
MAX_SCAN = 5000
#: Where the service answers Stream's clients (the ``next`` link of a page;
#: the same prefix as the flat feeds' ``next``).
PREFIX = "/api/v1.0"


def read(call: Call) -> tuple[int, dict[str, Any]]:
    """A page of groups, newest first, as Stream returns them."""
    engine, feed = call.engine, call.feed
    group = engine.feed_groups[call.slug]
    notification = group.kind == FeedKind.NOTIFICATION
    for name in ("id_lte", "id_gt", "id_gte"):
        if name in call.query:
            raise MappingError("groups are paged by id_lt (and offset) only", field=name)
    if "ranking" in call.query:
        raise StreamError(Code.FEED_CONFIG, f"{feed} is a {group.kind} feed: it is not ranked")
    marks = {name: _marks(call, name) for name in ("mark_seen", "mark_read")}
    if not notification and any(m is not None for m in marks.values()):
        raise MappingError(
            f"{feed} is aggregated: only notification feeds are marked", field="mark_seen"
        )
    auth.check_read(call.grant.principal(), feed, engine.access)
    # limit=0 reads the counts alone (the React kit's refreshUnreadUnseen).
    limit = integer(call.query, "limit", 25, 0, MAX_PAGE_SIZE)
    offset = integer(call.query, "offset", 0, 0, MAX_OFFSET)
    before = call.query.get("id_lt")
    found = _walk(call, None if before is None else group_key(before), offset, limit + 1)
    shown = found[:limit]
    sources = engine.activities.sources([a.id for g in shown for a in g.activities])
    results = [group_out(g, notification, feed, sources) for g in shown]
    following = ""
    if len(found) > limit and results:
        query = {"api_key": call.query["api_key"], "limit": limit, "id_lt": results[-1]["id"]}
        following = f"{PREFIX}/feed/{call.slug}/{call.user_id}/?{urlencode(query)}"
    body: dict[str, Any] = {"results": results, "next": following}
    if notification:
        # The groups show their state from before the marks, the counts from after.
        if marks["mark_seen"] is not None:
            engine.mark_seen(feed, marks["mark_seen"] or None)
        if marks["mark_read"] is not None:
            engine.mark_read(feed, marks["mark_read"] or None)
        body["unseen"], body["unread"] = engine.notification_counts(feed)
    return 200, body


def _marks(call: Call, name: str) -> list[str] | None:
    """``mark_seen``/``mark_read``: None (absent or false), [] (true: every
    group), or the keys of the group ids listed."""
    text = call.query.get(name, "")
    if text.lower() in ("", "0", "false"):
        return None
    if text.lower() in ("1", "true"):
        return []
    keys = group_keys(text)
    if not keys:
        raise MappingError("is true, false or a list of group ids", field=name)
    if len(keys) > MAX_PAGE_SIZE:
        raise MappingError(f"names {len(keys)} groups; the limit is {MAX_PAGE_SIZE}", field=name)
    return keys


def _walk(call: Call, before: str | None, skip: int, want: int) -> list[Aggregate]:
    """Up to ``want`` aggregates after the one keyed ``before`` (None: from the
    newest), past the first ``skip``: as many pages as it takes."""
    found: list[Aggregate] = []
    passed, scanned, cursor = before is None, 0, None
    while True:
        size = MAX_PAGE_SIZE if not passed else min(MAX_PAGE_SIZE, skip + want - len(found))
        page = call.engine.read_aggregates(call.feed, limit=size, cursor=cursor)
        for aggregate in page.results:
            scanned += 1
            if not passed:
                passed = aggregate.key == before
            elif skip:
                skip -= 1
            else:
                found.append(aggregate)
                if len(found) == want:
                    return found
        if page.next is None:
            break
        if not passed and scanned >= MAX_SCAN:
            raise MappingError(
                f"no group with this id among the feed's newest {MAX_SCAN:,}", field="id_lt"
            )
        cursor = page.next
    if not passed:
        raise MappingError("no group with this id in the feed", field="id_lt")
    return found
