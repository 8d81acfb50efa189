"""Activities: stored once, in the feed they were published to, with the feeds
they are addressed to; publishing, updating and removing one also queues its
delivery or retraction in the same transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson
from sqlalchemy import Connection, delete, select, update
from sqlalchemy.exc import IntegrityError

from tidings.canonical.db import Database
from tidings.canonical.outbox import enqueue
from tidings.canonical.rows import chunks, stored_keys
from tidings.canonical.schema import activities, addressed, hidden, outbox, outbox_parts, placed
from tidings.core import ids
from tidings.core.activity import Activity
from tidings.core.fanout import OutboxKind

#: An activity retracted with another: ``(feed, activity, aggregate keys)``.
Retracted = tuple[str, Activity, dict[str, str]]

#: Run inside a publish's transaction with the connection and, per item,
#: ``(stored activity, created)``.
Then = Callable[[Connection, Sequence[tuple[Activity, bool]]], None]

#: An activity's version when published; each update adds one.
FIRST_VERSION = 1

# The publish path, on the driver's cursor ("{p}": its placeholder). The
# outbox row is what :func:`tidings.canonical.outbox.enqueue` writes.
_INSERT_ACTIVITY = (
    "INSERT INTO tidings_activities (id, feed, foreign_id, doc, group_keys, accepted_us, "
    f"version) VALUES ({{p}}, {{p}}, {{p}}, {{p}}, {{p}}, {{p}}, {FIRST_VERSION})"
)
_INSERT_ADDRESSED = "INSERT INTO tidings_addressed (feed, activity_id) VALUES ({p}, {p})"
# A feed's count of the activities published into it, moved with them.
_COUNT_PUBLISHED = (
    "INSERT INTO tidings_feed_stats (feed, activities) VALUES ({p}, {p}) "
    "ON CONFLICT (feed) DO UPDATE SET activities = tidings_feed_stats.activities + "
    "excluded.activities"
)
_QUEUE_DELIVERY = (
    "INSERT INTO tidings_outbox (kind, activity_id, source, targets, doc, group_keys, "
    f"created_ms) VALUES ('{OutboxKind.DELIVER.value}', {{p}}, {{p}}, {{p}}, {{p}}, {{p}}, {{p}})"
)
# The same writes on PostgreSQL as one statement, whatever the number of
# activities: one round trip, prepared by the driver after a few runs, and
# atomic without a transaction of its own. The activities travel as one JSON
# parameter, a row each (psycopg adapted a column per array parameter at
# twice the publisher's CPU), their stored bytes (document, aggregate keys,
# `to`) as hex whatever the database's encoding, and `to` as a list too, for
# its rows. The main query reads ``locked`` first; the data-modifying CTEs
# that nothing reads run after it, so the sources' locks are held before any
# outbox id is handed out (see Database.lock_sources). Sources are locked,
# and their stats rows written, in feed order, as every other writer does.
_PUBLISH_POSTGRES = (
    "WITH new AS (SELECT r->>0 AS id, r->>1 AS feed, r->>2 AS foreign_id, "
    "decode(r->>3, 'hex') AS doc, decode(r->>4, 'hex') AS group_keys, "
    "CAST(r->>5 AS bigint) AS accepted_us, decode(r->>6, 'hex') AS targets, r->7 AS tos, "
    "n AS ord FROM jsonb_array_elements(CAST(%(rows)s AS jsonb)) WITH ORDINALITY AS a(r, n)), "
    "locked AS (SELECT count(pg_advisory_xact_lock_shared(hashtext(feed))) AS n "
    "FROM (SELECT DISTINCT feed FROM new ORDER BY feed) AS s), "
    "stored AS (INSERT INTO tidings_activities (id, feed, foreign_id, doc, group_keys, "
    "accepted_us, version) SELECT id, feed, foreign_id, doc, group_keys, accepted_us, "
    f"{FIRST_VERSION} FROM new), "
    "queued AS (INSERT INTO tidings_outbox (kind, activity_id, source, targets, doc, "
    f"group_keys, created_ms) SELECT '{OutboxKind.DELIVER.value}', id, feed, "
    "targets, doc, group_keys, %(now_ms)s "
    "FROM locked, new ORDER BY ord), "
    "addressed AS (INSERT INTO tidings_addressed (feed, activity_id) "
    "SELECT t, id FROM new, jsonb_array_elements_text(new.tos) AS t), "
    "counted AS (INSERT INTO tidings_feed_stats (feed, activities) "
    "SELECT feed, count(*) FROM new GROUP BY feed ORDER BY feed "
    "ON CONFLICT (feed) DO UPDATE SET activities = tidings_feed_stats.activities + "
    "excluded.activities) "
    "SELECT 1 FROM locked"
)

# One activity (a publisher alone, the common case) the same way with a
# parameter per value: half the server's time of the statement above, which
# it spent reading JSON and planning its sorts and groups.
_PUBLISH_ONE_POSTGRES = (
    "WITH locked AS (SELECT pg_advisory_xact_lock_shared(hashtext(%(feed)s)) AS n), "
    "stored AS (INSERT INTO tidings_activities (id, feed, foreign_id, doc, group_keys, "
    "accepted_us, version) VALUES (%(id)s, %(feed)s, %(fid)s, %(doc)s, %(keys)s, "
    f"%(accepted)s, {FIRST_VERSION})), "
    "queued AS (INSERT INTO tidings_outbox (kind, activity_id, source, targets, doc, "
    f"group_keys, created_ms) SELECT '{OutboxKind.DELIVER.value}', %(id)s, %(feed)s, "
    "%(targets)s, %(doc)s, %(keys)s, %(now_ms)s FROM locked), "
    "addressed AS (INSERT INTO tidings_addressed (feed, activity_id) SELECT t, %(id)s "
    "FROM json_array_elements_text(CAST(convert_from(%(targets)s, 'UTF8') AS json)) AS t), "
    "counted AS (INSERT INTO tidings_feed_stats (feed, activities) VALUES (%(feed)s, 1) "
    "ON CONFLICT (feed) DO UPDATE SET activities = tidings_feed_stats.activities + 1) "
    "SELECT 1 FROM locked"
)


@dataclass(frozen=True, slots=True)
class Accepted:
    """An activity to store: the feed it is published to, the aggregate keys it
    joins in aggregated feed groups, and when it was accepted (µs)."""

    feed: str
    activity: Activity
    keys: Mapping[str, str]
    accepted_us: int


# Stored activities by (feed, foreign_id) pairs: an index lookup per pair. (A
# row-value IN list would be one statement too, but SQLite scans the table for it.)
_BY_FOREIGN_IDS_SQLITE = (
    "SELECT a.feed, a.foreign_id{more} FROM json_each({p}) w "
    "JOIN tidings_activities a ON a.feed = json_extract(w.value, '$[0]') "
    "AND a.foreign_id = json_extract(w.value, '$[1]')"
)
_BY_FOREIGN_IDS_POSTGRES = (
    "SELECT a.feed, a.foreign_id{more} "
    "FROM unnest(CAST({p} AS text[]), CAST({p} AS text[])) AS w(feed, fid) "
    "JOIN tidings_activities a ON a.feed = w.feed AND a.foreign_id = w.fid"
)
_WITH_DOC = ", a.doc"

#: Called in the transaction that removes an activity, with the connection,
#: the activity and the time: the reactions section removes the activity's
#: reactions there (the store connects the two sections).
OnRemoved = Callable[[Connection, Activity, int], list[Retracted]]


class Activities:
    """Activities by id, by foreign id and by feed; publish, update, removal."""

    def __init__(self, db: Database, on_removed: OnRemoved | None = None) -> None:
        self.db = db
        self.on_removed = on_removed

    def add_activity(
        self,
        feed: str,
        activity: Activity,
        now_ms: int,
        aggregate_keys: Mapping[str, str],
        *,
        now_us: int | None = None,
    ) -> tuple[Activity, bool]:
        """Store ``activity`` and its delivery; returns ``(stored, created)``.

        ``aggregate_keys`` are the aggregates it joins in aggregated feed groups;
        ``now_us`` is when it is accepted (default: ``now_ms``).

        With a ``foreign_id`` already present in ``feed`` nothing is written
        and the existing activity comes back with ``created=False``.
        """
        if activity.foreign_id is not None:
            existing = self.get_by_foreign_id(feed, activity.foreign_id)
            if existing is not None:
                return existing, False
        accepted = now_ms * 1000 if now_us is None else now_us
        return self.add_activities([Accepted(feed, activity, aggregate_keys, accepted)], now_ms)[0]

    def add_activities(
        self, items: Sequence[Accepted], now_ms: int, *, then: Then | None = None
    ) -> list[tuple[Activity, bool]]:
        """:meth:`add_activity` for several activities, of one feed or many, in
        one transaction: all are stored, or none. A ``foreign_id`` already in
        its feed, or repeated within ``items``, returns the activity stored
        first. ``then`` runs in the transaction, after the inserts, with what
        they stored."""
        for attempt in range(2):
            try:
                return self._insert(items, now_ms, then)
            except IntegrityError:
                # A concurrent publish of one of the foreign ids won the race:
                # the second attempt finds it stored.
                if attempt or all(i.activity.foreign_id is None for i in items):
                    raise
        raise AssertionError("unreachable")

    def _insert(
        self, items: Sequence[Accepted], now_ms: int, then: Then | None
    ) -> list[tuple[Activity, bool]]:
        if then is None:
            # Nothing else in the transaction: on PostgreSQL the inserts are
            # one statement, committed by itself (no BEGIN, no COMMIT).
            with self.db.single() as conn:
                return self.insert_in(conn, items, now_ms)
        with self.db.write() as conn:
            results = self.insert_in(conn, items, now_ms)
            then(conn, results)
            return results

    def insert_in(
        self, conn: Connection, items: Sequence[Accepted], now_ms: int
    ) -> list[tuple[Activity, bool]]:
        """:meth:`add_activities` inside the caller's write transaction ``conn``
        (a reaction publishes its notification in its own)."""
        out: list[tuple[Activity, bool]] = []
        known = self._by_foreign_ids(conn, items)
        rows: list[tuple[Any, ...]] = []
        to_rows: list[tuple[str, str]] = []
        deliveries: list[tuple[Any, ...]] = []
        for item in items:
            activity = item.activity
            fid = activity.foreign_id
            if fid is not None and (item.feed, fid) in known:
                out.append((known[item.feed, fid], False))
                continue
            if fid is not None:
                known[item.feed, fid] = activity
            out.append((activity, True))
            doc, keys = activity.to_json(), orjson.dumps(item.keys)
            rows.append((activity.id, item.feed, fid, doc, keys, item.accepted_us))
            to_rows += [(t, activity.id) for t in activity.to]
            targets = orjson.dumps(list(activity.to))
            deliveries.append((activity.id, item.feed, targets, doc, keys, now_ms))
        if not rows:
            return out
        if self.db.dialect == "postgresql":
            self._write_postgres(conn, rows, [d[2] for d in deliveries], now_ms)
            return out
        published: dict[str, int] = {}
        for row in rows:
            published[row[1]] = published.get(row[1], 0) + 1
        # (SQLite writes one transaction at a time: no source locks to take.)
        self.db.run_many(conn, _INSERT_ACTIVITY, rows)
        self.db.run_many(conn, _INSERT_ADDRESSED, to_rows)
        self.db.run_many(conn, _QUEUE_DELIVERY, deliveries)
        self.db.run_many(conn, _COUNT_PUBLISHED, sorted(published.items()))
        return out

    def _write_postgres(
        self,
        conn: Connection,
        rows: Sequence[tuple[Any, ...]],
        targets: Sequence[bytes],
        now_ms: int,
    ) -> None:
        """``rows`` (as :data:`_INSERT_ACTIVITY` takes them) with their outbox
        rows' ``targets``, in one statement."""
        if len(rows) > 1:
            params = {"rows": _publish_rows(rows, targets), "now_ms": now_ms}
            self.db.run_raw(conn, _PUBLISH_POSTGRES, params)
            return
        (aid, feed, fid, doc, keys, accepted), to = rows[0], targets[0]
        one = {"id": aid, "feed": feed, "fid": fid, "doc": doc, "keys": keys}
        one |= {"accepted": accepted, "targets": to, "now_ms": now_ms}
        self.db.run_raw(conn, _PUBLISH_ONE_POSTGRES, one)

    def _by_foreign_ids(
        self, conn: Connection, items: Sequence[Accepted]
    ) -> dict[tuple[str, str], Activity]:
        """The stored activities of the items' ``(feed, foreign_id)`` pairs."""
        wanted = {(i.feed, i.activity.foreign_id) for i in items if i.activity.foreign_id}
        return {
            (feed, fid): Activity.from_json(doc)
            for feed, fid, doc in self._lookup(conn, wanted, _WITH_DOC)
        }

    def stored_foreign_ids(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of the ``(feed, foreign_id)`` pairs that name a stored activity."""
        with self.db.read() as conn:
            return {(feed, fid) for feed, fid in self._lookup(conn, set(pairs), "")}

    def _lookup(self, conn: Connection, pairs: set[tuple[str, str]], columns: str) -> list[Any]:
        """Rows ``feed, foreign_id[, more columns]`` of the stored pairs: one
        statement per chunk of pairs, however many feeds they name (an
        importer's batch names many), on the driver's own cursor."""
        rows: list[Any] = []
        for part in chunks(sorted(pairs)):
            params: tuple[Any, ...]
            if self.db.dialect == "sqlite":
                sql, params = _BY_FOREIGN_IDS_SQLITE, (orjson.dumps(part).decode(),)
            else:
                feeds, fids = zip(*part, strict=True)
                sql, params = _BY_FOREIGN_IDS_POSTGRES, (list(feeds), list(fids))
            rows += self.db.fetch_raw(conn, sql.replace("{more}", columns), params)
        return rows

    def get_activity(self, activity_id: str) -> Activity | None:
        with self.db.read() as conn:
            doc = conn.execute(
                select(activities.c.doc).where(activities.c.id == activity_id)
            ).scalar_one_or_none()
        return None if doc is None else Activity.from_json(doc)

    def feed_of(self, activity_id: str) -> str | None:
        """The feed an activity was added to."""
        with self.db.read() as conn:
            feed: str | None = conn.execute(
                select(activities.c.feed).where(activities.c.id == activity_id)
            ).scalar_one_or_none()
        return feed

    def feeds_of(self, activity_ids: Sequence[str]) -> dict[str, str]:
        """The feed each of ``activity_ids`` was published in (those stored; one
        placed in feeds was published in none)."""
        out: dict[str, str] = {}
        if not activity_ids:
            return out
        unplaced = (
            ~select(placed.c.activity_id).where(placed.c.activity_id == activities.c.id).exists()
        )
        with self.db.read() as conn:
            for part in chunks(list(dict.fromkeys(activity_ids))):
                rows = conn.execute(
                    select(activities.c.id, activities.c.feed).where(
                        activities.c.id.in_(part), unplaced
                    )
                )
                out.update((row.id, row.feed) for row in rows)
        return out

    def get_by_foreign_id(self, feed: str, foreign_id: str) -> Activity | None:
        with self.db.read() as conn:
            doc = conn.execute(
                select(activities.c.doc).where(
                    activities.c.feed == feed, activities.c.foreign_id == foreign_id
                )
            ).scalar_one_or_none()
        return None if doc is None else Activity.from_json(doc)

    def by_foreign_id_at(self, foreign_id: str, when_ms: int) -> list[Activity]:
        """The activities (of any feed) with ``foreign_id`` whose time falls in
        millisecond ``when_ms``: an id begins with its activity's time, so this
        reads one millisecond's range of the primary key, not the table."""
        low, high = ids.floor_id(when_ms), ids.floor_id(when_ms + 1)
        with self.db.read() as conn:
            docs = conn.execute(
                select(activities.c.doc)
                .where(activities.c.id >= low, activities.c.id < high)
                .where(activities.c.foreign_id == foreign_id)
                .order_by(activities.c.id)
            ).scalars()
            return [Activity.from_json(doc) for doc in docs]

    def get_docs(self, activity_ids: Sequence[str]) -> dict[str, bytes]:
        """The stored JSON of each id that exists."""
        return {aid: doc for aid, (_, doc) in self.get_versioned_docs(activity_ids).items()}

    def get_versioned_docs(self, activity_ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """The version and stored JSON of each id that exists (hydration, on every
        page read that misses the cache)."""
        out: dict[str, tuple[int, bytes]] = {}
        with self.db.read() as conn:
            for part in chunks(activity_ids):
                marks = ", ".join(["{p}"] * len(part))
                sql = f"SELECT id, version, doc FROM tidings_activities WHERE id IN ({marks})"
                out.update(
                    (aid, (version, bytes(doc)))
                    for aid, version, doc in self.db.fetch_raw(conn, sql, tuple(part))
                )
        return out

    def update_activity(
        self, activity_id: str, change: Callable[[Activity], Activity], *, feed: str | None = None
    ) -> tuple[Activity, int] | None:
        """Store ``change`` of the activity as it is now; returns the stored result
        and its version (None: no such activity, or not in ``feed`` when given:
        on a partitioned table, the feed names the one partition to read).

        The read is part of the write and holds the row (FOR UPDATE on
        PostgreSQL; on SQLite every write transaction begins IMMEDIATE, under
        the database's write lock), so concurrent changes apply one after the
        other on the state the last one stored, and none is lost.
        """
        where = activities.c.id == activity_id
        if feed is not None:
            where &= activities.c.feed == feed
        with self.db.write() as conn:
            row = conn.execute(
                select(activities.c.doc, activities.c.version).where(where).with_for_update()
            ).one_or_none()
            if row is None:
                return None
            updated = change(Activity.from_json(row.doc))
            version: int = row.version + 1
            conn.execute(
                update(activities).where(where).values(doc=updated.to_json(), version=version)
            )
        return updated, version

    def retarget(
        self, activity_id: str, change: Callable[[Activity], tuple[str, ...]]
    ) -> tuple[Activity, Activity, int, str, dict[str, str]] | None:
        """Store the ``to`` that ``change`` makes of the activity as it is now,
        with its addressed rows (what rebuilds and access read); returns the
        activity as it was and as stored, its version, its feed and its
        aggregate keys (None: no such activity). The row is held as
        :meth:`update_activity` holds it, so concurrent changes apply one after
        the other and each is told what it changed."""
        where = activities.c.id == activity_id
        with self.db.write() as conn:
            row = conn.execute(
                select(
                    activities.c.doc,
                    activities.c.version,
                    activities.c.feed,
                    activities.c.group_keys,
                )
                .where(where)
                .with_for_update()
            ).one_or_none()
            if row is None:
                return None
            stored = Activity.from_json(row.doc)
            updated = replace(stored, to=change(stored))
            version: int = row.version + 1
            conn.execute(
                update(activities).where(where).values(doc=updated.to_json(), version=version)
            )
            gone = set(stored.to) - set(updated.to)
            if gone:
                conn.execute(
                    delete(addressed).where(
                        addressed.c.activity_id == activity_id, addressed.c.feed.in_(sorted(gone))
                    )
                )
            for feed in sorted(set(updated.to) - set(stored.to)):
                self.db.run_raw(conn, _INSERT_ADDRESSED, (feed, activity_id))
        return stored, updated, version, row.feed, stored_keys(row.group_keys)

    def remove_activity(
        self, feed: str, activity: Activity, now_ms: int
    ) -> tuple[dict[str, str] | None, list[Retracted]]:
        """Delete the activity and enqueue its retraction from every feed it reached;
        returns its aggregate keys (None when ``feed`` holds no such activity), and
        the notifications of its reactions retracted with it.

        A delivery of it that has not started is cancelled in the same
        transaction; one already running finishes its chunk, and readers drop
        the id because its activity is gone.
        """
        notices: list[Retracted] = []
        with self.db.write() as conn:
            found = self.remove_in(conn, feed, activity, now_ms)
            if found is not None and self.on_removed is not None:
                # Its reactions go in the same transaction (and, with them, the
                # notifications they published).
                notices = self.on_removed(conn, activity, now_ms)
        return found, notices

    def remove_in(
        self, conn: Connection, feed: str, activity: Activity, now_ms: int
    ) -> dict[str, str] | None:
        """:meth:`remove_activity` inside the caller's write transaction ``conn``,
        its reactions left alone."""
        where = (activities.c.id == activity.id, activities.c.feed == feed)
        found = conn.execute(select(activities.c.group_keys).where(*where)).one_or_none()
        if found is None:
            return None
        aggregate_keys = stored_keys(found.group_keys)
        if not conn.execute(delete(activities).where(*where)).rowcount:
            # PostgreSQL: a concurrent removal deleted it after our look; it
            # counted, cancelled and retracted it, so nothing is left to do.
            return None
        # One placed in feeds was not counted among its feed's published ones.
        if not conn.execute(delete(placed).where(placed.c.activity_id == activity.id)).rowcount:
            self.db.run_raw(conn, _COUNT_PUBLISHED, (feed, -1))
        conn.execute(delete(addressed).where(addressed.c.activity_id == activity.id))
        conn.execute(delete(hidden).where(hidden.c.activity_id == activity.id))
        cancelled = select(outbox.c.id).where(
            outbox.c.activity_id == activity.id, outbox.c.kind == OutboxKind.DELIVER
        )
        conn.execute(delete(outbox_parts).where(outbox_parts.c.row_id.in_(cancelled)))
        conn.execute(delete(outbox).where(outbox.c.id.in_(cancelled)))
        enqueue(conn, OutboxKind.RETRACT, activity, feed, now_ms, aggregate_keys)
        return aggregate_keys

    def aggregate_keys(self, activity_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The aggregate keys fixed at publish, by activity id (ids that exist)."""
        out: dict[str, dict[str, str]] = {}
        with self.db.read() as conn:
            for part in chunks(activity_ids):
                rows = conn.execute(
                    select(activities.c.id, activities.c.group_keys).where(
                        activities.c.id.in_(part)
                    )
                )
                out.update((aid, stored_keys(raw)) for aid, raw in rows)
        return out

    def newest_ids(self, feed: str, limit: int) -> list[str]:
        """Ids of the newest ``limit`` activities added to ``feed`` itself, for
        its followers (those placed there reach none)."""
        unplaced = (
            ~select(placed.c.activity_id).where(placed.c.activity_id == activities.c.id).exists()
        )
        with self.db.read() as conn:
            return list(
                conn.execute(
                    select(activities.c.id)
                    .where(activities.c.feed == feed, unplaced)
                    .order_by(activities.c.id.desc())
                    .limit(limit)
                ).scalars()
            )

    def ids_from(self, source: str, activity_ids: Sequence[str], *, unless_to: str) -> list[str]:
        """Those of ``activity_ids`` added to ``source``, less any addressed to ``unless_to``."""
        out: list[str] = []
        with self.db.read() as conn:
            for part in chunks(activity_ids):
                rows = conn.execute(
                    select(activities.c.id)
                    .where(activities.c.feed == source, activities.c.id.in_(part))
                    .where(
                        ~select(addressed.c.activity_id)
                        .where(
                            addressed.c.feed == unless_to,
                            addressed.c.activity_id == activities.c.id,
                        )
                        .exists()
                    )
                )
                out.extend(rows.scalars())
        return out


def _publish_rows(rows: Sequence[tuple[Any, ...]], targets: Sequence[bytes]) -> str:
    """:data:`_PUBLISH_POSTGRES`'s JSON parameter: ``rows`` (as
    :data:`_INSERT_ACTIVITY` takes them) with their outbox rows' ``targets``
    (the JSON list of their `to`)."""
    return orjson.dumps(
        [
            [aid, feed, fid, doc.hex(), keys.hex(), accepted, to.hex(), orjson.Fragment(to)]
            for (aid, feed, fid, doc, keys, accepted), to in zip(rows, targets, strict=True)
        ]
    ).decode()
