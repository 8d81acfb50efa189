"""Seen and read marks of notification feeds, and when each activity was accepted
(what a mark is compared with)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import case, delete, select

from tidings.canonical.db import Database
from tidings.canonical.rows import chunks
from tidings.canonical.schema import activities, aggregate_marks
from tidings.core import ids


class Marks:
    """Seen/read marks by feed, for every aggregate at once and by aggregate key."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record_marks(
        self, feed: str, aggregates: Sequence[str] | None, *, read: bool, now_us: int
    ) -> None:
        """Record that ``aggregates`` of ``feed`` (None: every aggregate) were marked seen
        (and read) at ``now_us``. A mark of every aggregate as read supersedes the
        per-aggregate marks before it, which are dropped."""
        every = aggregates is None
        keys = [""] if aggregates is None else sorted(set(aggregates))
        gm = aggregate_marks.c
        with self.db.write() as conn:
            if every and read:
                conn.execute(delete(aggregate_marks).where(gm.feed == feed, gm.every == 0))
            for part in chunks(keys):
                insert = self.db.dialect_insert(aggregate_marks)
                later = insert.excluded
                rows = [
                    {
                        "feed": feed,
                        "every": int(every),
                        "gkey": k,
                        "seen_us": now_us,
                        "read_us": now_us if read else 0,
                    }
                    for k in part
                ]
                conn.execute(
                    insert.values(rows).on_conflict_do_update(
                        index_elements=[gm.feed, gm.every, gm.gkey],
                        # A mark never moves back (two marks may commit out of order).
                        set_={
                            column: case(
                                (later[column] > gm[column], later[column]), else_=gm[column]
                            )
                            for column in ("seen_us", "read_us")
                        },
                    )
                )

    def marks(self, feed: str) -> tuple[tuple[int, int], dict[str, tuple[int, int]]]:
        """The marks recorded for ``feed``: ``(seen_us, read_us)`` of every aggregate
        at once, and by aggregate key."""
        gm = aggregate_marks.c
        every = (0, 0)
        by_key: dict[str, tuple[int, int]] = {}
        with self.db.read() as conn:
            rows = conn.execute(
                select(gm.every, gm.gkey, gm.seen_us, gm.read_us).where(gm.feed == feed)
            )
            for r in rows:
                if r.every:
                    every = (int(r.seen_us), int(r.read_us))
                else:
                    by_key[r.gkey] = (int(r.seen_us), int(r.read_us))
        return every, by_key

    def accepted_us(self, activity_ids: Sequence[str]) -> dict[str, int]:
        """When each activity was accepted (µs; those accepted before schema v5:
        their own time)."""
        out: dict[str, int] = {}
        with self.db.read() as conn:
            for part in chunks(list(activity_ids)):
                rows = conn.execute(
                    select(activities.c.id, activities.c.accepted_us).where(
                        activities.c.id.in_(part)
                    )
                )
                out.update(
                    (r.id, ids.id_ms(r.id) * 1000 if r.accepted_us is None else int(r.accepted_us))
                    for r in rows
                )
        return out
