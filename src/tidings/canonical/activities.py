"""Activities: stored once, in the feed they were published to, with the feeds
they are addressed to; publishing, updating and removing one also queues its
delivery or retraction in the same transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import orjson
from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from tidings.canonical.db import Database
from tidings.canonical.outbox import enqueue
from tidings.canonical.rows import chunks, stored_keys
from tidings.canonical.schema import activities, addressed, follows, hidden, outbox, outbox_parts
from tidings.core.activity import Activity
from tidings.core.fanout import OutboxKind

#: An activity's version when published; each update adds one.
FIRST_VERSION = 1


class Activities:
    """Activities by id, by foreign id and by feed; publish, update, removal."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add_activity(
        self,
        feed: str,
        activity: Activity,
        now_ms: int,
        group_keys: Mapping[str, str],
        *,
        now_us: int | None = None,
    ) -> tuple[Activity, bool]:
        """Store ``activity`` and its delivery; returns ``(stored, created)``.

        ``group_keys`` are the groups it joins in grouped feed groups;
        ``now_us`` is when it is accepted (default: ``now_ms``).

        With a ``foreign_id`` already present in ``feed`` nothing is written
        and the existing activity comes back with ``created=False``.
        """
        if activity.foreign_id is not None:
            existing = self.get_by_foreign_id(feed, activity.foreign_id)
            if existing is not None:
                return existing, False
        try:
            with self.db.write() as conn:
                conn.execute(
                    activities.insert().values(
                        id=activity.id,
                        feed=feed,
                        foreign_id=activity.foreign_id,
                        doc=activity.to_json(),
                        group_keys=orjson.dumps(group_keys),
                        accepted_us=now_ms * 1000 if now_us is None else now_us,
                        version=FIRST_VERSION,
                    )
                )
                if activity.to:
                    conn.execute(
                        addressed.insert(),
                        [{"feed": t, "activity_id": activity.id} for t in activity.to],
                    )
                enqueue(conn, OutboxKind.DELIVER, activity, feed, now_ms, group_keys)
        except IntegrityError:
            # A concurrent publish of the same (feed, foreign_id) won the race.
            if activity.foreign_id is None:
                raise
            existing = self.get_by_foreign_id(feed, activity.foreign_id)
            if existing is None:
                raise
            return existing, False
        return activity, True

    def get_activity(self, activity_id: str) -> Activity | None:
        with self.db.read() as conn:
            doc = conn.execute(
                select(activities.c.doc).where(activities.c.id == activity_id)
            ).scalar_one_or_none()
        return None if doc is None else Activity.from_json(doc)

    def get_by_foreign_id(self, feed: str, foreign_id: str) -> Activity | None:
        with self.db.read() as conn:
            doc = conn.execute(
                select(activities.c.doc).where(
                    activities.c.feed == feed, activities.c.foreign_id == foreign_id
                )
            ).scalar_one_or_none()
        return None if doc is None else Activity.from_json(doc)

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
        self, activity_id: str, change: Callable[[Activity], Activity]
    ) -> tuple[Activity, int] | None:
        """Store ``change`` of the activity as it is now; returns the stored result
        and its version (None: no such activity).

        The read is part of the write and holds the row (FOR UPDATE on
        PostgreSQL; on SQLite every write transaction begins IMMEDIATE, under
        the database's write lock), so concurrent changes apply one after the
        other on the state the last one stored, and none is lost.
        """
        where = activities.c.id == activity_id
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

    def remove_activity(self, feed: str, activity: Activity, now_ms: int) -> dict[str, str] | None:
        """Delete the activity and enqueue its retraction from every feed it reached;
        returns its group keys (None when ``feed`` holds no such activity).

        A delivery of it that has not started is cancelled in the same
        transaction; one already running finishes its chunk, and readers drop
        the id because its activity is gone.
        """
        where = (activities.c.id == activity.id, activities.c.feed == feed)
        with self.db.write() as conn:
            found = conn.execute(select(activities.c.group_keys).where(*where)).one_or_none()
            if found is None:
                return None
            group_keys = stored_keys(found.group_keys)
            conn.execute(delete(activities).where(*where))
            conn.execute(delete(addressed).where(addressed.c.activity_id == activity.id))
            conn.execute(delete(hidden).where(hidden.c.activity_id == activity.id))
            cancelled = select(outbox.c.id).where(
                outbox.c.activity_id == activity.id, outbox.c.kind == OutboxKind.DELIVER
            )
            conn.execute(delete(outbox_parts).where(outbox_parts.c.row_id.in_(cancelled)))
            conn.execute(delete(outbox).where(outbox.c.id.in_(cancelled)))
            enqueue(conn, OutboxKind.RETRACT, activity, feed, now_ms, group_keys)
        return group_keys

    def hide(self, feed: str, activity_id: str) -> dict[str, str] | None:
        """Take the activity out of ``feed`` alone, for good: it reached ``feed``
        by ``to`` or through a follow, and stays in its own feed and every other.
        Its ``to`` record for ``feed`` goes, a hidden entry is recorded (history,
        pulled-source, copy and backfill reads leave it out, so no rebuild brings
        it back), and ``feed`` leaves its pending deliveries. Returns the
        activity's group keys; None when it never reached ``feed``.

        A runner already carrying out the delivery may still write ``feed`` with
        the targets it read before this; as with removal, that is the one race.
        """
        a = activities.c
        with self.db.write() as conn:
            row = conn.execute(
                select(a.feed, a.group_keys).where(a.id == activity_id)
            ).one_or_none()
            if row is None:
                return None
            was_addressed = conn.execute(
                delete(addressed).where(
                    addressed.c.feed == feed, addressed.c.activity_id == activity_id
                )
            ).rowcount
            start = conn.execute(
                select(follows.c.history_from).where(
                    follows.c.follower == feed, follows.c.source == row.feed
                )
            ).one_or_none()
            followed = start is not None and activity_id >= (start.history_from or "")
            if not (was_addressed or followed):
                return None
            conn.execute(
                self.db.insert_ignore(hidden), [{"feed": feed, "activity_id": activity_id}]
            )
            pending = conn.execute(
                select(outbox.c.id, outbox.c.targets).where(
                    outbox.c.activity_id == activity_id, outbox.c.kind == OutboxKind.DELIVER
                )
            ).all()
            for r in pending:
                targets = [t for t in orjson.loads(r.targets) if t != feed]
                conn.execute(
                    update(outbox).where(outbox.c.id == r.id).values(targets=orjson.dumps(targets))
                )
        return stored_keys(row.group_keys)

    def without_hidden(
        self, feeds: Sequence[str], activity_ids: Sequence[str]
    ) -> list[tuple[list[str], list[str]]]:
        """Writes of ``activity_ids`` into ``feeds`` as ``(ids, feeds)`` pairs, less
        the entries their owners removed: the common case, nothing hidden, is
        the one write it was."""
        hidden = self.hidden_in(feeds, activity_ids)
        if not hidden:
            return [(list(activity_ids), list(feeds))]
        touched = {feed for feed, _ in hidden}
        writes = [(list(activity_ids), [f for f in feeds if f not in touched])]
        writes += [
            ([i for i in activity_ids if (f, i) not in hidden], [f]) for f in feeds if f in touched
        ]
        return [(ids, targets) for ids, targets in writes if ids and targets]

    def hidden_in(self, feeds: Sequence[str], activity_ids: Sequence[str]) -> set[tuple[str, str]]:
        """The ``(feed, activity id)`` entries of these that their feed's owner removed."""
        if not feeds or not activity_ids:
            return set()
        wanted = set(feeds)
        out: set[tuple[str, str]] = set()
        with self.db.read() as conn:
            for part in chunks(activity_ids):
                rows = conn.execute(
                    select(hidden.c.feed, hidden.c.activity_id).where(
                        hidden.c.activity_id.in_(part)
                    )
                )
                out.update((f, i) for f, i in rows if f in wanted)
        return out

    def group_keys(self, activity_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The group keys fixed at publish, by activity id (ids that exist)."""
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
        """Ids of the newest ``limit`` activities added to ``feed`` itself."""
        with self.db.read() as conn:
            return list(
                conn.execute(
                    select(activities.c.id)
                    .where(activities.c.feed == feed)
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
