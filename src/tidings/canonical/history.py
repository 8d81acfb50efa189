"""Reading a feed's history from the canonical store: past a capped feed's end,
the pulled sources readers merge, and every feed there is to rebuild."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from tidings.canonical.db import Database

# "{p}" is the driver's placeholder.
# Per-source newest ids in [lower, upper): one index range scan of (feed, id)
# each, limited, so a read costs one probe per source however long its
# history is. The union (distinct where an activity addressed to a feed may
# also come from a source it follows) is cut to the newest ``limit`` and
# joined to the activities for their JSON, all in one statement.
# Entries the reading feed's owner removed from it (tidings_hidden) are left
# out inside each span, before its LIMIT, so a page is never cut short by them.
_SPAN = (
    "SELECT id FROM (SELECT id FROM tidings_activities t "
    "WHERE feed = {p} AND id >= {p} AND id < {p} AND NOT EXISTS (SELECT 1 FROM tidings_hidden h "
    "WHERE h.feed = {p} AND h.activity_id = t.id) ORDER BY id DESC LIMIT {p}) AS s{n}"
)
# A followed source's span: its activities less those placed there (which
# reach no follower).
_SOURCE_SPAN = _SPAN.replace(
    "AND NOT EXISTS",
    "AND NOT EXISTS (SELECT 1 FROM tidings_placed p WHERE p.activity_id = t.id) AND NOT EXISTS",
    1,
)
_ADDRESSED_SPAN = (
    "SELECT activity_id FROM (SELECT activity_id FROM tidings_addressed t "
    "WHERE feed = {p} AND activity_id >= {p} AND activity_id < {p} AND NOT EXISTS "
    "(SELECT 1 FROM tidings_hidden h WHERE h.feed = {p} AND h.activity_id = t.activity_id) "
    "ORDER BY activity_id DESC LIMIT {p}) AS s{n}"
)
_NEWEST_OF_SPANS = (
    "SELECT u.id, a.doc FROM ({spans}) AS u JOIN tidings_activities a ON a.id = u.id "
    "ORDER BY u.id DESC LIMIT {p}"
)
_PULLED = (
    "SELECT f.source, f.history_from FROM tidings_follows f "
    "JOIN tidings_fanout s ON s.feed = f.source WHERE f.follower = {p}"
)
_FOLLOWING = "SELECT source, history_from FROM tidings_follows WHERE follower = {p}"
_EVERY_FEED = (
    "SELECT feed FROM tidings_activities UNION SELECT feed FROM tidings_addressed "
    "UNION SELECT follower FROM tidings_follows ORDER BY 1"
)
# The feeds a write to the timeline and aggregate stores since a time may
# have reached: the feeds of activities accepted since (their own, those
# addressed, their sources' followers), and the followers of follows made or
# ended since (history copied in, or taken out), and the feeds whose groups
# were marked seen or read since (the marks the aggregate store holds).
_FEEDS_SINCE = (
    "SELECT feed FROM tidings_activities WHERE accepted_us >= {p} "
    "UNION SELECT d.feed FROM tidings_addressed d JOIN tidings_activities a "
    "ON a.id = d.activity_id WHERE a.accepted_us >= {p} "
    "UNION SELECT f.follower FROM tidings_follows f JOIN tidings_activities a "
    "ON a.feed = f.source WHERE a.accepted_us >= {p} "
    "UNION SELECT follower FROM tidings_follows WHERE created_ms >= {p} "
    "UNION SELECT follower FROM tidings_unfollows WHERE ms >= {p} "
    "UNION SELECT feed FROM tidings_group_marks WHERE seen_us >= {p} OR read_us >= {p} "
    "ORDER BY 1"
)
# SQLite caps a compound SELECT at 500 terms.
_SPAN_CHUNK = 200
#: Above every id (ids are lowercase hex).
_TOP = "~"


@dataclass(frozen=True, slots=True)
class Entries:
    """Newest-first id lists (one per chunk of sources) and the JSON of those ids."""

    lists: list[list[str]]
    docs: dict[str, bytes]


class History:
    """Newest-first reads of a feed's history and of the pulled sources it follows."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def pulled(
        self, follower: str, *, before: str | None, floor: str | None, limit: int
    ) -> Entries:
        """The newest ``limit`` activities before ``before`` of the sources
        ``follower`` follows that readers merge, from where each follow starts.

        On every flat read: one statement when nothing is pulled, two when
        something is, on the driver's own cursor (SQLAlchemy's statement and
        row processing would cost more than the queries).
        """
        with self.db.read() as conn:
            sources = self.db.fetch_raw(conn, _PULLED, (follower,))
            spans = [(_SOURCE_SPAN, source, start or "") for source, start in sources]
            # Each activity has one feed: the sources' spans are disjoint.
            return self._newest(conn, follower, spans, before, floor, limit, distinct=False)

    def history(self, feed: str, *, before: str | None, floor: str | None, limit: int) -> Entries:
        """The newest ``limit`` activities before ``before`` of the history of ``feed``:
        its own, those addressed to it, and those of every source it follows
        from where that follow starts."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _FOLLOWING, (feed,))
            spans = [(_SPAN, feed, ""), (_ADDRESSED_SPAN, feed, "")]
            spans += [(_SOURCE_SPAN, source, start or "") for source, start in rows]
            return self._newest(conn, feed, spans, before, floor, limit, distinct=True)

    def _newest(
        self,
        conn: Connection,
        reader: str,
        spans: Sequence[tuple[str, str, str]],
        before: str | None,
        floor: str | None,
        limit: int,
        *,
        distinct: bool,
    ) -> Entries:
        lists: list[list[str]] = []
        glue = " UNION " if distinct else " UNION ALL "
        docs: dict[str, bytes] = {}
        for start in range(0, len(spans), _SPAN_CHUNK):
            part = spans[start : start + _SPAN_CHUNK]
            union = glue.join(t.replace("{n}", str(n)) for n, (t, _, _) in enumerate(part))
            params: list[Any] = []
            for _, feed, lower in part:
                params += [feed, max(lower, floor or ""), before or _TOP, reader, limit]
            sql = _NEWEST_OF_SPANS.replace("{spans}", union)
            rows = self.db.fetch_raw(conn, sql, (*params, limit))
            lists.append([aid for aid, _ in rows])
            docs.update((aid, bytes(doc)) for aid, doc in rows)
        return Entries(lists, docs)

    def feeds(self) -> list[str]:
        """Every feed the canonical store knows of: published to, addressed, or following."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _EVERY_FEED, ())
        return [row[0] for row in rows]

    def feeds_since(self, ms: int) -> list[str]:
        """The feeds a delivery, a copy or a removal since ``ms`` (milliseconds
        since the epoch, by when the canonical store accepted the write) may
        have written to, sorted: what a timeline store that lost its newest
        writes must rebuild."""
        params = (ms * 1000, ms * 1000, ms * 1000, ms, ms, ms * 1000, ms * 1000)
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _FEEDS_SINCE, params)
        return [row[0] for row in rows]
