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
from tidings.canonical.schema import activities, addressed, follows, outbox, outbox_parts
from tidings.core.activity import Activity

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
                enqueue(conn, "deliver", activity, feed, now_ms, group_keys)
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
            cancelled = select(outbox.c.id).where(
                outbox.c.activity_id == activity.id, outbox.c.kind == "deliver"
            )
            conn.execute(delete(outbox_parts).where(outbox_parts.c.row_id.in_(cancelled)))
            conn.execute(delete(outbox).where(outbox.c.id.in_(cancelled)))
            enqueue(conn, "retract", activity, feed, now_ms, group_keys)
        return group_keys

    def unaddress(self, feed: str, activity_id: str) -> tuple[dict[str, str], bool] | None:
        """Take ``feed`` out of where the activity was addressed (its ``to``): its
        record goes, so rebuilds and deep reads leave it out, and so does ``feed``
        from the activity's pending deliveries. Returns the activity's group keys
        and whether it reaches ``feed`` through a follow as well (None when it was
        not addressed to ``feed``).

        A runner already carrying out the delivery may still write ``feed`` with
        the targets it read before this; as with removal, that is the one race.
        """
        a = activities.c
        with self.db.write() as conn:
            gone = delete(addressed).where(
                addressed.c.feed == feed, addressed.c.activity_id == activity_id
            )
            if not conn.execute(gone).rowcount:
                return None
            row = conn.execute(
                select(a.feed, a.group_keys).where(a.id == activity_id)
            ).one_or_none()
            if row is None:  # (removed in the meantime: its addressed rows went too)
                return None
            start = conn.execute(
                select(follows.c.history_from).where(
                    follows.c.follower == feed, follows.c.source == row.feed
                )
            ).one_or_none()
            pending = conn.execute(
                select(outbox.c.id, outbox.c.targets).where(
                    outbox.c.activity_id == activity_id, outbox.c.kind == "deliver"
                )
            ).all()
            for r in pending:
                targets = [t for t in orjson.loads(r.targets) if t != feed]
                conn.execute(
                    update(outbox).where(outbox.c.id == r.id).values(targets=orjson.dumps(targets))
                )
        followed = start is not None and activity_id >= (start.history_from or "")
        return stored_keys(row.group_keys), followed

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
