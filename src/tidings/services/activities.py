"""Publishing that says what was new: what the HTTP service answers 201 or
200 by, and what a batch reports per activity."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tidings.core.activity import Activity, NewActivity
from tidings.writes.activities import ActivityWrites

Incoming = NewActivity | Mapping[str, Any]


class ActivityService:
    """``feeds.activities``: publish one or many activities, and know which
    were new (a ``foreign_id`` already used in the feed publishes nothing)."""

    def __init__(self, activities: ActivityWrites) -> None:
        self._activities = activities

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

    def stored_foreign_ids(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of the ``(feed, foreign_id)`` pairs already published: one query
        per few thousand pairs (an importer skips them without building their
        activities)."""
        return self._activities.stored_foreign_ids(pairs)

    async def publish_async(self, feed: str, activity: Incoming) -> tuple[Activity, bool]:
        """:meth:`publish` awaited: the write runs in a thread, in a group with
        the publishes made meanwhile (the HTTP service's publish route)."""
        return await self._activities.publish_async(feed, activity)
