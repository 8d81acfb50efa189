"""Activities placed in feeds: stored once, in each feed of their ``to``, and
reaching no follower of any (getstream's ``add_to_many``).

A placed activity's own feed is the first of its feeds (its ``foreign_id`` is
unique there, as any activity's); every one of its feeds, that one included,
is an addressed row, and a ``tidings_placed`` row marks it, so that the reads
that bring a source's activities to its followers (delivery has no outbox row
to carry out; follow copies, backfills, pulled sources and rebuilt followers
filter on the mark) leave it out. Taking it out of one of its feeds hides it
there alone (:meth:`tidings.canonical.hidden.Hidden.hide`).
"""

from __future__ import annotations

import orjson
from sqlalchemy import exists, insert, select
from sqlalchemy.exc import IntegrityError

from tidings.canonical.activities import FIRST_VERSION, Accepted
from tidings.canonical.db import Database
from tidings.canonical.schema import activities, addressed, placed
from tidings.core.activity import Activity


class Placements:
    """Placing activities, and finding them by the feeds they are in."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def place(self, item: Accepted) -> tuple[Activity, bool]:
        """Store ``item`` placed in its feed and those of its ``to``, in one
        transaction; returns ``(stored, created)``: with a ``foreign_id``
        already used in the item's feed, the activity stored with it, and
        nothing written. It is not counted among the activities published in
        its feed (it was published in none)."""
        try:
            return self._place(item)
        except IntegrityError:
            # A concurrent add of its foreign_id won the race: found stored now.
            if item.activity.foreign_id is None:
                raise
            return self._place(item)

    def _place(self, item: Accepted) -> tuple[Activity, bool]:
        activity = item.activity
        with self.db.write() as conn:
            if activity.foreign_id is not None:
                doc = conn.execute(
                    select(activities.c.doc).where(
                        activities.c.feed == item.feed,
                        activities.c.foreign_id == activity.foreign_id,
                    )
                ).scalar_one_or_none()
                if doc is not None:
                    return Activity.from_json(doc), False
            conn.execute(
                insert(activities).values(
                    id=activity.id,
                    feed=item.feed,
                    foreign_id=activity.foreign_id,
                    doc=activity.to_json(),
                    group_keys=orjson.dumps(item.keys),
                    accepted_us=item.accepted_us,
                    version=FIRST_VERSION,
                )
            )
            feeds = dict.fromkeys([item.feed, *activity.to])
            conn.execute(
                insert(addressed), [{"feed": f, "activity_id": activity.id} for f in feeds]
            )
            conn.execute(insert(placed).values(activity_id=activity.id))
        return activity, True

    def by_foreign_id(self, feed: str, foreign_id: str) -> Activity | None:
        """The activity placed in ``feed`` (still there) with ``foreign_id``."""
        a = activities.c
        with self.db.read() as conn:
            doc = conn.execute(
                select(a.doc)
                .join(addressed, addressed.c.activity_id == a.id)
                .join(placed, placed.c.activity_id == a.id)
                .where(addressed.c.feed == feed, a.foreign_id == foreign_id)
                .limit(1)
            ).scalar_one_or_none()
        return None if doc is None else Activity.from_json(doc)

    def placed_in_any(self, activity_id: str) -> bool:
        """Whether the placed activity is still in one of its feeds (each feed
        it is taken out of loses its addressed row)."""
        with self.db.read() as conn:
            return bool(
                conn.execute(
                    select(exists().where(addressed.c.activity_id == activity_id))
                ).scalar()
            )

    def is_placed(self, activity_id: str) -> bool:
        with self.db.read() as conn:
            return bool(
                conn.execute(select(exists().where(placed.c.activity_id == activity_id))).scalar()
            )
