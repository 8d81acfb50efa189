"""Publishing that says what was new: what the HTTP service answers 201 or
200 by, and what a batch reports per activity."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from tidings.core import ids
from tidings.core.activity import Activity, NewActivity
from tidings.core.errors import ValidationError
from tidings.writes.activities import ActivityWrites
from tidings.writes.placement import place
from tidings.writes.targets import retarget

Incoming = NewActivity | Mapping[str, Any]

#: Activities whose feed :meth:`ActivityService.sources` keeps in memory.
SOURCES_KEPT = 50_000


class ActivityService:
    """``feeds.activities``: publish one or many activities, and know which
    were new (a ``foreign_id`` already used in the feed publishes nothing)."""

    def __init__(self, activities: ActivityWrites) -> None:
        self._activities = activities
        # The feed an activity was published in never changes: kept once read
        # (a Stream page read asks for it on every activity it shows). Single
        # dict operations, which need no lock (and so none a fork could copy held).
        self._sources: dict[str, str] = {}

    def publish(self, feed: str, activity: Incoming) -> tuple[Activity, bool]:
        """:meth:`tidings.Tidings.add_activity`, also saying whether it was new
        (False: the ``foreign_id`` was already used in ``feed``; nothing changed)."""
        return self._activities.publish(feed, activity)

    def publish_many(
        self, feed: str, activities: Sequence[Incoming]
    ) -> list[tuple[Activity, bool]]:
        """:meth:`tidings.Tidings.add_activities`, also saying which were new."""
        return self._activities.publish_many(feed, activities)

    def publish_each(self, items: Sequence[tuple[str, Incoming]]) -> list[tuple[Activity, bool]]:
        """Publish ``(feed, activity)`` pairs of several feeds in one transaction
        (at most 100, as a batch), saying which were new."""
        return self._activities.publish_each(items)

    def place(self, feeds: Sequence[str], activity: Incoming) -> tuple[Activity, bool]:
        """Place ``activity`` in ``feeds`` (1 to 100) and in no feed that follows
        any of them: one activity, one id, in each. Its own feed is the first
        named, where a ``foreign_id`` already used publishes nothing (False);
        removing it from one feed leaves it in the others. One transaction;
        a ``to`` is refused (the feeds named are its only ones)."""
        return place(self._activities, feeds, activity)

    def stored_foreign_ids(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of the ``(feed, foreign_id)`` pairs already published: one query
        per few thousand pairs (an importer skips them without building their
        activities)."""
        return self._activities.stored_foreign_ids(pairs)

    def sources_kept(self, activity_ids: Sequence[str]) -> dict[str, str] | None:
        """:meth:`sources` without a query, when every activity was looked up
        before; None when one was not (so an async read can tell whether it
        needs a query)."""
        kept = self._sources
        found = [kept.get(i) for i in activity_ids]
        if None in found:
            return None
        return {i: f for i, f in zip(activity_ids, found, strict=True) if f}

    def sources(self, activity_ids: Sequence[str]) -> dict[str, str]:
        """The feed each activity was published in, by id (those that exist):
        where a read elsewhere says it came from (getstream's ``origin``). One
        query per few thousand ids, for those not read before. One placed in
        feeds (:meth:`place`) was published in none: it has no entry."""
        kept = self._sources
        missing = [i for i in activity_ids if i not in kept]
        if missing:
            found = self._activities.feeds_of(missing)
            if len(kept) + len(missing) > SOURCES_KEPT:
                kept = self._sources = {}  # (the simplest bound: start again)
            # "" for one published in no feed (placed) or not stored: an id is
            # never reused, so that answer stays true, and is not asked again.
            kept.update({i: found.get(i, "") for i in missing})
        return {i: f for i in activity_ids if (f := kept.get(i))}

    def find(self, foreign_id: str, when: datetime) -> list[Activity]:
        """The activities with ``foreign_id`` and the time ``when`` (to the
        microsecond), whatever feed they were added to: getstream's identity
        of an activity. Oldest id first; none when there is no such activity."""
        if when.tzinfo is None:
            raise ValidationError("must carry a UTC offset", field="time")
        ms = int(when.timestamp() * 1000)
        if not 0 <= ms <= ids.MAX_MS or "\x00" in foreign_id:
            return []  # (no stored activity has such a time or foreign_id)
        found = self._activities.by_foreign_id_at(foreign_id, ms)
        return [a for a in found if a.time == when]

    def retarget(
        self,
        activity_id: str,
        *,
        to: Sequence[str] | None = None,
        add: Sequence[str] = (),
        remove: Sequence[str] = (),
    ) -> tuple[Activity, list[str], list[str]]:
        """Change the ``to`` of a published activity: replace it with ``to``, or
        add the feeds ``add`` and take out ``remove``. The feeds added receive
        the activity and those removed lose it (unless they follow its feed);
        its feed and its followers are left as they are. Returns the activity as
        stored, the feeds it was delivered to and those it was retracted from."""
        return retarget(self._activities, activity_id, to=to, add=add, remove=remove)

    async def publish_async(self, feed: str, activity: Incoming) -> tuple[Activity, bool]:
        """:meth:`publish` awaited: the write runs in a thread, in a group with
        the publishes made meanwhile (the HTTP service's publish route)."""
        return await self._activities.publish_async(feed, activity)
