"""Feeds as rows in the canonical store's database (the embedded default).

Sets of feeds and ids travel as one parameter each (a JSON array read with
``json_each`` on SQLite, an array read with ``unnest`` on PostgreSQL), so a
fan-out chunk is a handful of statements whatever its size. ``feed_sizes``
keeps each feed's entry count, so the cap only costs work for full feeds.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, case, delete, func, select, text, tuple_, update

from tidings.canonical.db import Database
from tidings.canonical.schema import activities, aggregate_members, rank_snapshots
from tidings.canonical.schema import aggregates as aggregate_rows
from tidings.core import ids
from tidings.core.aggregation import (
    AggregateCap,
    Member,
    Position,
    StoredAggregate,
    StoredAggregatePage,
)
from tidings.stores.base import Cap, no_call
from tidings.stores.sql_dialects import POSTGRES, RAW_POSTGRES, RAW_SQLITE, SQLITE

# SQLite inserts entries as lists of VALUES (Database.run_values): ~0.45 µs
# an entry, where one statement run per pair cost ~1, reading the pairs out
# of one JSON array (json_each + json_extract) ~5 and a join of two arrays ~10.
# Where feeds take many entries each (a follow's copied history), one JSON
# object of each feed's ids read by two json_each is cheaper still: 25% under
# VALUES lists at 200 entries a feed, 10% over at one or two.
_INSERT_ENTRIES = "INSERT INTO tidings_feed_entries (feed, activity_id)"
_IGNORE = "ON CONFLICT DO NOTHING"
_INSERT_EACH = (
    f"{_INSERT_ENTRIES} SELECT f.key, i.value FROM json_each({{p}}) AS f, json_each(f.value) AS i "
    f"WHERE true {_IGNORE}"  # (WHERE: else SQLite reads ON CONFLICT as a join's)
)
#: Entries a feed at least, on average, for :data:`_INSERT_EACH`.
_EACH_AT_LEAST = 8

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


def _ms(column: Any) -> Any:
    """The millisecond part of an id column, as sortable hex (aggregates are ordered by it)."""
    return func.substr(column, 1, 12)


def in_database(db: Database, *stores: object) -> bool:
    """Whether every one of ``stores`` keeps its feeds as rows of ``db``: their
    writes can then join a transaction of ``db`` (see ``Database.joining``)."""
    return all(isinstance(s, SqlTimelineStore | SqlAggregateStore) and s.db is db for s in stores)


class _Statements:
    """The dialect's statements, and its way of passing a set as one parameter:
    a JSON text on SQLite (read with ``json_each``), an array on PostgreSQL."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.sqlite = db.dialect == "sqlite"
        self.sql = {k: text(v) for k, v in (SQLITE if self.sqlite else POSTGRES).items()}
        self.raw = RAW_SQLITE if self.sqlite else RAW_POSTGRES

    def list(self, items: Sequence[str]) -> Any:
        return self.db.set_param(items) if self.sqlite else list(items)

    @staticmethod
    def pairs(pairs: Sequence[tuple[str, str]]) -> tuple[Any, ...]:
        """``(feed, id)`` pairs as two parallel arrays unnested together
        (PostgreSQL; SQLite inserts them as VALUES lists)."""
        return ([f for f, _ in pairs], [i for _, i in pairs])

    def raw_counts(self, counts: Mapping[str, int]) -> tuple[Any, ...]:
        if self.sqlite:
            return (orjson.dumps(counts).decode(),)
        return (list(counts), list(counts.values()))

    def counts(self, counts: Counter[str]) -> dict[str, Any]:
        if self.sqlite:
            return {"counts": orjson.dumps(dict(counts)).decode()}
        return {"keys": list(counts), "values": list(counts.values())}


class SqlTimelineStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        statements = _Statements(db)
        self._sql, self._list, self._counts = statements.sql, statements.list, statements.counts
        self._raw, self._pairs, self._raw_counts = (
            statements.raw,
            statements.pairs,
            statements.raw_counts,
        )
        self._sqlite = statements.sqlite
        self._trim = text(_TRIM)
        self._set_size = text(_SET_SIZE)

    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        self.prepare_add(feeds, activity_ids, cap)()

    def prepare_add(
        self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap
    ) -> Callable[[], None]:
        if not feeds or not activity_ids:
            return no_call
        if self._sqlite:
            return self._sqlite_write(
                dict.fromkeys(sorted(set(feeds)), sorted(set(activity_ids))), cap
            )
        return functools.partial(self._add_postgres, feeds, activity_ids, cap)

    def _add_postgres(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        ids_param = self._list(sorted(set(activity_ids)))
        with self.db.write() as conn:
            inserted: Counter[str] = Counter()
            for start in range(0, len(feeds), _CHUNK):
                part = self._list(feeds[start : start + _CHUNK])
                inserted.update(
                    conn.execute(self._sql["insert"], {"feeds": part, "ids": ids_param}).scalars()
                )
            self._apply_cap(conn, self._grow(conn, inserted), cap)

    def _sqlite_write(self, each: Mapping[str, Sequence[str]], cap: Cap) -> Callable[[], None]:
        """The write of ``each`` feed's distinct ids, prepared: the transaction
        (the write lock) holds no more than the statements."""

        def write() -> None:
            with self.db.write() as conn:
                self._apply_cap(conn, self._insert_sqlite(conn, each), cap)

        return write

    def _insert_sqlite(self, conn: Connection, each: Mapping[str, Sequence[str]]) -> list[Any]:
        """Insert ``each`` feed's distinct ids (feeds in order: consecutive
        inserts land in the same or the next page); the new size of each feed
        written."""
        counts: Mapping[str, int] = {feed: len(got) for feed, got in each.items()}
        total = sum(counts.values())
        by_feed = total >= _EACH_AT_LEAST * len(counts)
        pairs = [] if by_feed else [(feed, i) for feed, got in each.items() for i in got]
        # Nearly always every pair is new and the counts are known; when some
        # were there already (a delivery or its direct writes carried out
        # again), the insert is taken back and made again naming its rows.
        with self.db.savepoint(conn, "tidings_entries"):
            if by_feed:
                added = self.db.run_raw(conn, _INSERT_EACH, (orjson.dumps(each).decode(),))
            else:
                added = self.db.run_values(conn, _INSERT_ENTRIES, pairs, _IGNORE)
            if added != total:
                self.db.undo_to(conn, "tidings_entries")
                rows = (
                    self.db.fetch_raw(
                        conn, f"{_INSERT_EACH} RETURNING feed", (orjson.dumps(each).decode(),)
                    )
                    if by_feed
                    else self.db.fetch_values(
                        conn, _INSERT_ENTRIES, pairs, f"{_IGNORE} RETURNING feed"
                    )
                )
                counts = Counter(feed for (feed,) in rows)
        return self._grow(conn, counts)

    def _grow(self, conn: Connection, inserted: Mapping[str, int]) -> list[Any]:
        """Add ``inserted`` to the feeds' sizes; each feed's new size."""
        if not inserted:
            return []
        return self.db.fetch_raw(conn, self._raw["grow"], self._raw_counts(inserted))

    def _apply_cap(self, conn: Connection, sizes: Sequence[tuple[str, int]], cap: Cap) -> None:
        """Trim the feeds whose new size (``sizes``) passes the cap."""
        over = [(feed, n - cap.max_length) for feed, n in sizes if n > cap.max_length]
        if over:
            conn.execute(self._trim, [{"feed": f, "excess": x} for f, x in over])
            conn.execute(self._set_size, [{"feed": f, "n": cap.max_length} for f, _ in over])

    def add_each(self, entries: Mapping[str, Sequence[str]], cap: Cap) -> None:
        self.prepare_add_each(entries, cap)()

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[str]], cap: Cap
    ) -> Callable[[], None]:
        if not any(entries.values()):
            return no_call
        if self._sqlite:
            # Feeds in order (consecutive inserts land in the same or the next
            # page), each one's ids once.
            each = {
                feed: got if len(got) < 2 else sorted(set(got))
                for feed in sorted(entries)
                if (got := entries[feed])
            }
            return self._sqlite_write(each, cap)
        return functools.partial(self._add_each_postgres, entries, cap)

    def _add_each_postgres(self, entries: Mapping[str, Sequence[str]], cap: Cap) -> None:
        pairs = [(feed, i) for feed in sorted(entries) for i in sorted(set(entries[feed]))]
        with self.db.write() as conn:
            # (feed, id) pairs in chunks of one statement each, and one cap
            # update for all: the cost follows the pairs, not the activities.
            inserted: Counter[str] = Counter()
            for start in range(0, len(pairs), _CHUNK):
                part = pairs[start : start + _CHUNK]
                rows = self.db.fetch_raw(conn, self._raw["insert_pairs"], self._pairs(part))
                inserted.update(r[0] for r in rows)
            self._apply_cap(conn, self._grow(conn, inserted), cap)

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


class SqlAggregateStore:
    """Aggregated and notification feeds as rows: one an aggregate, one a member.

    ``tidings_feed_sizes`` counts an aggregated feed's aggregates, so only a write
    that makes a feed outgrow ``max_length`` pays for trimming.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        statements = _Statements(db)
        self._sql, self._list, self._counts = statements.sql, statements.list, statements.counts
        m, g = aggregate_members.c, aggregate_rows.c
        self._insert_members = db.insert_ignore(aggregate_members).returning(
            m.feed, m.gkey, m.activity_id
        )
        self._insert_aggregates = db.insert_ignore(aggregate_rows).returning(g.feed, g.gkey)
        newest: Any = bindparam("n")
        self._touch_aggregate = (
            update(aggregate_rows)
            .where(g.feed == bindparam("f"), g.gkey == bindparam("g"))
            .values(newest=case((g.newest < newest, newest), else_=g.newest), seen=0, read=0)
        )

    def add(self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap) -> None:
        self.add_each(dict.fromkeys(feeds, members), cap)

    def add_each(self, entries: Mapping[str, Sequence[Member]], cap: AggregateCap) -> None:
        pairs = [(f, m) for f, members in entries.items() for m in dict.fromkeys(members)]
        if not pairs:
            return
        with self.db.write() as conn:
            for start in range(0, len(pairs), _CHUNK):
                rows = [
                    {"feed": f, "activity_id": m.id, "gkey": m.aggregate, "actor": m.actor}
                    for f, m in pairs[start : start + _CHUNK]
                ]
                touched: dict[tuple[str, str], str] = {}
                for feed, gkey, aid in conn.execute(self._insert_members, rows).all():
                    if aid > touched.get((feed, gkey), ""):
                        touched[(feed, gkey)] = aid
                if touched:
                    self._touch(conn, touched, cap)

    def _touch(
        self, conn: Connection, touched: dict[tuple[str, str], str], cap: AggregateCap
    ) -> None:
        """Move aggregates that gained members (creating new ones), then apply the cap."""
        params = [{"feed": f, "gkey": g, "newest": n} for (f, g), n in touched.items()]
        created = {(f, g) for f, g in conn.execute(self._insert_aggregates, params).all()}
        moved = [{"f": f, "g": g, "n": n} for (f, g), n in touched.items() if (f, g) not in created]
        if moved:
            conn.execute(self._touch_aggregate, moved)
        if created:
            grown = conn.execute(self._sql["grow"], self._counts(Counter(f for f, _ in created)))
            for feed, n in grown.all():
                if n > cap.max_length:
                    self._trim(conn, feed, n - cap.max_length, cap.max_length)

    def _trim(self, conn: Connection, feed: str, excess: int, size: int) -> None:
        g = aggregate_rows.c
        oldest = conn.execute(
            select(g.gkey).where(g.feed == feed).order_by(_ms(g.newest), g.gkey).limit(excess)
        ).scalars()
        keys = list(oldest)
        conn.execute(
            delete(aggregate_members).where(
                aggregate_members.c.feed == feed, aggregate_members.c.gkey.in_(keys)
            )
        )
        conn.execute(delete(aggregate_rows).where(g.feed == feed, g.gkey.in_(keys)))
        conn.execute(text(_SET_SIZE), {"feed": feed, "n": size})

    def prepare_add(
        self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap
    ) -> Callable[[], None]:
        return functools.partial(self.add, feeds, members, cap)

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[Member]], cap: AggregateCap
    ) -> Callable[[], None]:
        return functools.partial(self.add_each, entries, cap)

    def remove(self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap) -> None:
        if not feeds or not members:
            return
        m, g = aggregate_members.c, aggregate_rows.c
        wanted = list({x.id for x in members})
        with self.db.write() as conn:
            for start in range(0, len(feeds), _CHUNK):
                part = list(feeds[start : start + _CHUNK])
                held = conn.execute(
                    select(m.feed, m.gkey, m.activity_id).where(
                        m.feed.in_(part), m.activity_id.in_(wanted)
                    )
                ).all()
                if not held:
                    continue
                conn.execute(
                    delete(aggregate_members).where(
                        m.feed == bindparam("f"), m.activity_id == bindparam("a")
                    ),
                    [{"f": f, "a": a} for f, _, a in held],
                )
                emptied: Counter[str] = Counter()
                for feed, gkey in dict.fromkeys((f, k) for f, k, _ in held):
                    newest = conn.execute(
                        select(func.max(m.activity_id)).where(m.feed == feed, m.gkey == gkey)
                    ).scalar()
                    where = (g.feed == feed, g.gkey == gkey)
                    if newest is None:
                        conn.execute(delete(aggregate_rows).where(*where))
                        emptied[feed] += 1
                    else:
                        conn.execute(update(aggregate_rows).where(*where).values(newest=newest))
                if emptied:
                    conn.execute(self._sql["shrink"], self._counts(emptied))

    def page(
        self,
        feed: str,
        *,
        limit: int,
        snapshot: str | None,
        after: Position | None,
        cap: AggregateCap,
        docs: bool = False,
    ) -> StoredAggregatePage:
        m, g = aggregate_members.c, aggregate_rows.c
        with self.db.read() as conn:
            unseen, unread, top = conn.execute(
                select(
                    func.coalesce(func.sum(1 - g.seen), 0),
                    func.coalesce(func.sum(1 - g.read), 0),
                    func.max(g.newest),
                ).where(g.feed == feed)
            ).one()
            if top is None:
                return StoredAggregatePage([], snapshot, 0, 0, {})
            if snapshot is None:
                snapshot = top
            # Aggregates whose newest member is not after the snapshot stand where
            # their row says; the others (moved since) where they stood then.
            ms = _ms(g.newest)
            query = select(ms, g.gkey).where(g.feed == feed, g.newest <= snapshot)
            if after is not None:
                query = query.where(tuple_(ms, g.gkey) < tuple_(f"{after.ms:012x}", after.key))
            placed = [
                Position(int(n, 16), k)
                for n, k in conn.execute(query.order_by(ms.desc(), g.gkey.desc()).limit(limit))
            ]
            then = (
                select(func.max(m.activity_id), m.gkey)
                .join(aggregate_rows, (g.feed == m.feed) & (g.gkey == m.gkey))
                .where(g.feed == feed, g.newest > snapshot, m.activity_id <= snapshot)
                .group_by(m.gkey)
            )
            for n, k in conn.execute(then):
                position = Position(ids.id_ms(n), k)
                if after is None or position < after:
                    placed.append(position)
            placed = sorted(placed, reverse=True)[:limit]
            aggregates = self._aggregates(conn, feed, placed, cap)
            shown = [i for aggregate in aggregates for i in aggregate.activity_ids]
            found = self._docs(conn, shown) if docs and shown else {}
        return StoredAggregatePage(aggregates, snapshot, int(unseen), int(unread), found)

    def _aggregates(
        self, conn: Connection, feed: str, placed: list[Position], cap: AggregateCap
    ) -> list[StoredAggregate]:
        if not placed:
            return []
        m, g = aggregate_members.c, aggregate_rows.c
        keys = [p.key for p in placed]
        stats = {
            row.gkey: row
            for row in conn.execute(
                select(
                    m.gkey,
                    func.count().label("n"),
                    func.count(m.actor.distinct()).label("actors"),
                    func.min(m.activity_id).label("oldest"),
                    func.max(m.activity_id).label("newest"),
                )
                .where(m.feed == feed, m.gkey.in_(keys))
                .group_by(m.gkey)
            )
        }
        state = {
            k: (bool(s), bool(r))
            for k, s, r in conn.execute(
                select(g.gkey, g.seen, g.read).where(g.feed == feed, g.gkey.in_(keys))
            )
        }
        newest = self._newest(conn, feed, keys, cap.max_aggregate_size)
        out = []
        for p in placed:
            row = stats.get(p.key)
            if row is None:  # removed between the queries of this read
                continue
            seen, read = state.get(p.key, (False, False))
            out.append(
                StoredAggregate(
                    key=p.key,
                    activity_ids=newest.get(p.key, []),
                    activity_count=int(row.n),
                    actor_count=int(row.actors),
                    oldest=row.oldest,
                    newest=row.newest,
                    position=p.ms,
                    is_seen=seen,
                    is_read=read,
                )
            )
        return out

    @staticmethod
    def _newest(conn: Connection, feed: str, keys: list[str], size: int) -> dict[str, list[str]]:
        """The newest ``size`` member ids of each aggregate, newest first."""
        m = aggregate_members.c
        ranked = (
            select(
                m.gkey,
                m.activity_id,
                func.row_number()
                .over(partition_by=m.gkey, order_by=m.activity_id.desc())
                .label("rn"),
            )
            .where(m.feed == feed, m.gkey.in_(keys))
            .subquery()
        )
        newest: dict[str, list[str]] = {}
        for k, aid in conn.execute(
            select(ranked.c.gkey, ranked.c.activity_id)
            .where(ranked.c.rn <= size)
            .order_by(ranked.c.gkey, ranked.c.activity_id.desc())
        ):
            newest.setdefault(k, []).append(aid)
        return newest

    def _docs(self, conn: Connection, activity_ids: list[str]) -> dict[str, bytes]:
        a = activities.c
        rows = conn.execute(select(a.id, a.doc).where(a.id.in_(activity_ids)))
        return {aid: bytes(doc) for aid, doc in rows}

    def member_ids(self, feed: str) -> list[str]:
        m = aggregate_members.c
        with self.db.read() as conn:
            return list(conn.execute(select(m.activity_id).where(m.feed == feed)).scalars())

    def mark(self, feed: str, aggregates: Sequence[str] | None, *, read: bool) -> None:
        g = aggregate_rows.c
        values = {"seen": 1, "read": 1} if read else {"seen": 1}
        with self.db.write() as conn:
            if aggregates is None:
                conn.execute(update(aggregate_rows).where(g.feed == feed).values(values))
                return
            for start in range(0, len(aggregates), _CHUNK):
                part = list(aggregates[start : start + _CHUNK])
                conn.execute(
                    update(aggregate_rows).where(g.feed == feed, g.gkey.in_(part)).values(values)
                )

    def clear(self, feeds: Sequence[str]) -> None:
        with self.db.write() as conn:
            for start in range(0, len(feeds), _CHUNK):
                part = list(feeds[start : start + _CHUNK])
                conn.execute(delete(aggregate_members).where(aggregate_members.c.feed.in_(part)))
                conn.execute(delete(aggregate_rows).where(aggregate_rows.c.feed.in_(part)))
                conn.execute(self._sql["clear_sizes"], {"feeds": self._list(part)})

    def close(self) -> None:
        return None


class SqlSnapshotStore:
    """Snapshots as rows of the canonical database, each with its expiry.

    Each put also deletes a few expired rows, so the table holds about one
    TTL's worth of snapshots without a sweeper.
    """

    #: Expired rows deleted per put: more than the puts that expire per put.
    SWEEP = 16

    def __init__(self, db: Database, now_ms: Callable[[], int]) -> None:
        self.db = db
        self._now_ms = now_ms

    def put(self, key: str, body: bytes, ttl_ms: int) -> None:
        now = self._now_ms()
        t = rank_snapshots.c
        with self.db.write() as conn:
            expired = select(t.id).where(t.expires_ms <= now).limit(self.SWEEP)
            conn.execute(delete(rank_snapshots).where(t.id.in_(expired)))
            conn.execute(rank_snapshots.insert().values(id=key, expires_ms=now + ttl_ms, body=body))

    def get(self, key: str) -> bytes | None:
        t = rank_snapshots.c
        with self.db.read() as conn:
            body = conn.execute(
                select(t.body).where(t.id == key, t.expires_ms > self._now_ms())
            ).scalar_one_or_none()
        return None if body is None else bytes(body)
