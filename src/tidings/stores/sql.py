"""Feeds as rows in the canonical store's database (the embedded default).

Sets of feeds and ids travel as one parameter each (a JSON array read with
``json_each`` on SQLite, an array read with ``unnest`` on PostgreSQL), so a
fan-out chunk is a handful of statements whatever its size. ``feed_sizes``
keeps each feed's entry count, so the cap only costs work for full feeds.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from sqlalchemy import Connection, text

from tidings.db import Database
from tidings.stores.base import Cap

_SQLITE = {
    "insert": (
        "INSERT INTO tidings_feed_entries (feed, activity_id) "
        "SELECT f.value, i.value FROM json_each(:feeds) f, json_each(:ids) i WHERE true "
        "ON CONFLICT DO NOTHING RETURNING feed"
    ),
    "grow": (
        "INSERT INTO tidings_feed_sizes (feed, n) "
        "SELECT key, value FROM json_each(:counts) WHERE true "
        "ON CONFLICT (feed) DO UPDATE SET n = tidings_feed_sizes.n + excluded.n "
        "RETURNING feed, n"
    ),
    "remove": (
        "DELETE FROM tidings_feed_entries WHERE feed IN (SELECT value FROM json_each(:feeds)) "
        "AND activity_id IN (SELECT value FROM json_each(:ids)) RETURNING feed"
    ),
    "shrink": (
        "UPDATE tidings_feed_sizes SET n = n - c.value FROM json_each(:counts) c "
        "WHERE tidings_feed_sizes.feed = c.key"
    ),
    "clear_entries": (
        "DELETE FROM tidings_feed_entries WHERE feed IN (SELECT value FROM json_each(:feeds))"
    ),
    "clear_sizes": (
        "DELETE FROM tidings_feed_sizes WHERE feed IN (SELECT value FROM json_each(:feeds))"
    ),
}

_POSTGRES = {
    "insert": (
        "INSERT INTO tidings_feed_entries (feed, activity_id) "
        "SELECT f, i FROM unnest(CAST(:feeds AS text[])) f, unnest(CAST(:ids AS text[])) i "
        "ON CONFLICT DO NOTHING RETURNING feed"
    ),
    "grow": (
        "INSERT INTO tidings_feed_sizes (feed, n) "
        "SELECT k, v FROM unnest(CAST(:keys AS text[]), CAST(:values AS int[])) AS c(k, v) "
        "ON CONFLICT (feed) DO UPDATE SET n = tidings_feed_sizes.n + excluded.n "
        "RETURNING feed, n"
    ),
    "remove": (
        "DELETE FROM tidings_feed_entries WHERE feed = ANY(CAST(:feeds AS text[])) "
        "AND activity_id = ANY(CAST(:ids AS text[])) RETURNING feed"
    ),
    "shrink": (
        "UPDATE tidings_feed_sizes SET n = n - c.v "
        "FROM unnest(CAST(:keys AS text[]), CAST(:values AS int[])) AS c(k, v) "
        "WHERE tidings_feed_sizes.feed = c.k"
    ),
    "clear_entries": "DELETE FROM tidings_feed_entries WHERE feed = ANY(CAST(:feeds AS text[]))",
    "clear_sizes": "DELETE FROM tidings_feed_sizes WHERE feed = ANY(CAST(:feeds AS text[]))",
}

_TRIM = (
    "DELETE FROM tidings_feed_entries WHERE feed = :feed AND activity_id IN "
    "(SELECT activity_id FROM tidings_feed_entries WHERE feed = :feed "
    "ORDER BY activity_id LIMIT :excess)"
)
_SET_SIZE = "UPDATE tidings_feed_sizes SET n = :n WHERE feed = :feed"
_PAGE = (
    "SELECT activity_id FROM tidings_feed_entries WHERE feed = {p} "
    "AND activity_id < {p} AND activity_id >= {p} "
    "ORDER BY activity_id DESC LIMIT {p}"
)
_PAGE_DOCS = (
    "SELECT e.activity_id, a.doc FROM tidings_feed_entries e "
    "LEFT JOIN tidings_activities a ON a.id = e.activity_id WHERE e.feed = {p} "
    "AND e.activity_id < {p} AND e.activity_id >= {p} "
    "ORDER BY e.activity_id DESC LIMIT {p}"
)
# Sorts above every id (ids are lowercase hex).
_TOP = "~"

_CHUNK = 5000


class SqlTimelineStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._sql = {
            k: text(v) for k, v in (_SQLITE if db.dialect == "sqlite" else _POSTGRES).items()
        }
        self._trim = text(_TRIM)
        self._set_size = text(_SET_SIZE)

    def _list(self, items: Sequence[str]) -> Any:
        return orjson.dumps(list(items)).decode() if self.db.dialect == "sqlite" else list(items)

    def _counts(self, counts: Counter[str]) -> dict[str, Any]:
        if self.db.dialect == "sqlite":
            return {"counts": orjson.dumps(dict(counts)).decode()}
        return {"keys": list(counts), "values": list(counts.values())}

    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        if not feeds or not activity_ids:
            return
        ids = self._list(sorted(set(activity_ids)))
        with self.db.write() as conn:
            for start in range(0, len(feeds), _CHUNK):
                part = self._list(feeds[start : start + _CHUNK])
                inserted = Counter(
                    conn.execute(self._sql["insert"], {"feeds": part, "ids": ids}).scalars()
                )
                if inserted:
                    self._apply_cap(conn, inserted, cap)

    def _apply_cap(self, conn: Connection, inserted: Counter[str], cap: Cap) -> None:
        sizes = conn.execute(self._sql["grow"], self._counts(inserted)).all()
        over = [(feed, n - cap.max_length) for feed, n in sizes if n > cap.max_length]
        if over:
            conn.execute(self._trim, [{"feed": f, "excess": x} for f, x in over])
            conn.execute(self._set_size, [{"feed": f, "n": cap.max_length} for f, _ in over])

    def prepare_add(
        self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap
    ) -> Callable[[], None]:
        return functools.partial(self.add, feeds, activity_ids, cap)

    def remove(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        if not feeds or not activity_ids:
            return
        ids = self._list(list(activity_ids))
        with self.db.write() as conn:
            for start in range(0, len(feeds), _CHUNK):
                part = self._list(feeds[start : start + _CHUNK])
                removed = Counter(
                    conn.execute(self._sql["remove"], {"feeds": part, "ids": ids}).scalars()
                )
                if removed:
                    conn.execute(self._sql["shrink"], self._counts(removed))

    def page(self, feed: str, *, limit: int, before: str | None, cap: Cap) -> list[str]:
        # The read hot path: the driver's cursor, not SQLAlchemy's result rows.
        params = (feed, before or _TOP, cap.floor or "", limit)
        with self.db.read() as conn:
            return [row[0] for row in self.db.fetch_raw(conn, _PAGE, params)]

    def page_docs(
        self, feed: str, *, limit: int, before: str | None, cap: Cap
    ) -> tuple[list[str], dict[str, bytes]]:
        # Activities share this database: one query reads the page and its
        # JSON (NULL for an id whose activity was removed).
        params = (feed, before or _TOP, cap.floor or "", limit)
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _PAGE_DOCS, params)
        return [r[0] for r in rows], {r[0]: bytes(r[1]) for r in rows if r[1] is not None}

    def clear(self, feeds: Sequence[str]) -> None:
        with self.db.write() as conn:
            for start in range(0, len(feeds), _CHUNK):
                part = self._list(feeds[start : start + _CHUNK])
                conn.execute(self._sql["clear_entries"], {"feeds": part})
                conn.execute(self._sql["clear_sizes"], {"feeds": part})

    def close(self) -> None:
        return None
