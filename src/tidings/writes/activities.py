"""An activity's life: published, looked up, updated, removed.

Publishing writes the activity and its outbox row in one transaction, then
writes the direct targets (the source feed and ``to``) at once so the
publisher reads its own write; deliveries to followers go through the task
runner. Removal is the same, retracting.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from tidings.canonical.activities import FIRST_VERSION, Accepted
from tidings.canonical.store import CanonicalStore
from tidings.core import dotted, ids
from tidings.core.activity import Activity, NewActivity, check_json, validate
from tidings.core.clock import Clock
from tidings.core.errors import ActivityNotFound, ValidationError
from tidings.core.fanout import OutboxKind, direct_targets
from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.limits import MAX_BATCH, MAX_BATCH_TO
from tidings.delivery.commit import GroupCommit
from tidings.delivery.deliverer import Deliverer
from tidings.delivery.planner import Delivery
from tidings.stores.base import ActivityCache, Sender, SendNow

log = logging.getLogger("tidings.writes.activities")

#: An activity by id, or by ``(feed, foreign_id)``.
ActivityRef = str | tuple[str, str]


class ActivityWrites:
    """``notify`` tells the runner there is work (outbox rows committed)."""

    def __init__(
        self,
        canonical: CanonicalStore,
        cache: ActivityCache,
        deliverer: Deliverer,
        clock: Clock,
        *,
        notify: Callable[[], None],
        published: Callable[[Sequence[tuple[str, Activity]]], None] | None = None,
        updated: Callable[[Activity], None] | None = None,
        deleted: Callable[[str, Activity], None] | None = None,
        sender: Sender | None = None,
    ) -> None:
        self.canonical = canonical
        #: Makes a publish's writes after its commit (see stores.redis.behind).
        self.sender: Sender = sender or SendNow()
        # Live events (the firehose, activity.updated): tidings.bus.emitter.
        # The firehose is told the feed each activity went to: a user token's
        # firehose shows only what that token may read there.
        self._published, self._updated, self._deleted = published, updated, deleted
        self.cache = cache
        self.deliverer = deliverer
        self.feed_groups: Mapping[str, FeedGroup] = deliverer.feed_groups
        self.clock = clock
        self.notify = notify
        # An HTTP publish answers once its writes are made (settle).
        self.commits: GroupCommit[Accepted, tuple[Activity, bool]] = GroupCommit(
            self._store, settle=self.sender.settle
        )

    def _feed(self, feed: str) -> str:
        parse_feed_id(feed, self.feed_groups)
        return feed

    #: Raises unless ``feed`` is a configured feed id (validation's ``check_feed``).
    check_feed = _feed

    def publish(
        self, feed: str, activity: NewActivity | Mapping[str, Any]
    ) -> tuple[Activity, bool]:
        self._feed(feed)
        new = validate(activity, now=self.clock.now(), check_feed=self._feed)
        keys = self.deliverer.aggregate_keys(new)
        # Shares its transaction with the publishes of other threads.
        return self.commits.submit(Accepted(feed, new, keys, self.clock.us()))

    async def publish_async(
        self, feed: str, activity: NewActivity | Mapping[str, Any]
    ) -> tuple[Activity, bool]:
        """:meth:`publish` for a coroutine: checked here, written by the group
        commit's thread; the event loop is never blocked."""
        self._feed(feed)
        new = validate(activity, now=self.clock.now(), check_feed=self._feed)
        keys = self.deliverer.aggregate_keys(new)
        return await self.commits.submit_async(Accepted(feed, new, keys, self.clock.us()))

    def publish_many(
        self, feed: str, items: Sequence[NewActivity | Mapping[str, Any]]
    ) -> list[tuple[Activity, bool]]:
        """:meth:`publish` for several activities of ``feed``: all validated
        before any is written, then written in one transaction."""
        self._feed(feed)
        checked = self._checked_batch(items)
        now_us = self.clock.us()
        return self._store([Accepted(feed, a, keys, now_us) for a, keys in checked])

    def publish_each(
        self, items: Sequence[tuple[str, NewActivity | Mapping[str, Any]]]
    ) -> list[tuple[Activity, bool]]:
        """:meth:`publish_many` for activities of several feeds, ``(feed,
        activity)`` pairs: all checked before any is written, then written in
        one transaction (an importer's batch, whose rows go to many feeds)."""
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
            raise ValidationError("must be a list of (feed, activity) pairs", field="activities")
        for i, pair in enumerate(items):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValidationError("must be a (feed, activity) pair", field=f"activities.{i}")
            self._feed(pair[0])
        checked = self._checked_batch([activity for _, activity in items])
        now_us = self.clock.us()
        accepted = [
            Accepted(feed, a, keys, now_us)
            for (feed, _), (a, keys) in zip(items, checked, strict=True)
        ]
        return self._store(accepted)

    def stored_foreign_ids(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of the ``(feed, foreign_id)`` pairs that name a stored activity."""
        return self.canonical.activities.stored_foreign_ids(pairs)

    def by_foreign_id_at(self, foreign_id: str, when_ms: int) -> list[Activity]:
        """The activities of any feed with ``foreign_id`` and a time in ``when_ms``."""
        return self.canonical.activities.by_foreign_id_at(foreign_id, when_ms)

    def feeds_of(self, activity_ids: Sequence[str]) -> dict[str, str]:
        """The feed each of ``activity_ids`` was added to (those stored)."""
        return self.canonical.activities.feeds_of(activity_ids)

    def _checked_batch(
        self, items: Sequence[NewActivity | Mapping[str, Any]]
    ) -> list[tuple[Activity, Mapping[str, str]]]:
        """The activities of a batch validated, with their aggregate keys; any error
        names the activity (``activities.<i>``) and the limit broken."""
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
            raise ValidationError("must be a list of activities", field="activities")
        if len(items) > MAX_BATCH:
            raise ValidationError(
                f"{len(items):,} activities; the limit is {MAX_BATCH} per batch",
                field="activities",
            )
        now = self.clock.now()
        checked: list[tuple[Activity, Mapping[str, str]]] = []
        for i, item in enumerate(items):
            try:
                new = validate(item, now=now, check_feed=self._feed)
            except ValidationError as exc:
                field = f"activities.{i}" if exc.field is None else f"activities.{i}.{exc.field}"
                raise ValidationError(exc.detail, field=field) from None
            checked.append((new, self.deliverer.aggregate_keys(new)))
        addressed = sum(len(a.to) for a, _ in checked)
        if addressed > MAX_BATCH_TO:
            raise ValidationError(
                f"{addressed:,} feeds named in to in all; the limit is {MAX_BATCH_TO:,} per batch",
                field="activities",
            )
        return checked

    def _store(self, items: Sequence[Accepted]) -> list[tuple[Activity, bool]]:
        """Write ``items`` in one transaction, then cache them and write their
        direct targets (own feed, ``to``) at once, so each publisher reads its
        own write: in that transaction when the feeds are rows of the same
        SQLite database (``Deliverer.joins_writes``), else right after it. Deliveries to followers are left to the
        runner."""
        if not items:
            return []
        now_ms = min(i.accepted_us for i in items) // 1000

        planner = self.deliverer.planner
        # Rows of this SQLite database: the direct targets join the transaction (one
        # commit, not two), their writes prepared before it takes the lock.
        joined = self.deliverer.joins_writes
        every = [(item, item.activity) for item in items]
        planned = (
            planner.plan_many(self._direct_deliveries(every), announce=False) if joined else []
        )

        def write_direct(conn: Connection, results: Sequence[tuple[Activity, bool]]) -> None:
            created = _created(items, results)
            writes = (
                planned
                if len(created) == len(items)
                # Some were there already (a foreign_id seen before).
                else planner.plan_many(self._direct_deliveries(created), announce=False)
            )
            with self.canonical.db.joining(conn):
                for write in writes:
                    write()

        # Before the outbox rows can be claimed: a runner that claims one
        # waits for these writes instead of making them again. Those found
        # stored already (a foreign_id seen before) have no row: dropped after.
        direct = self.deliverer.direct
        in_flight = [i.activity.id for i in items]
        direct.begin(in_flight)
        try:
            results = self.canonical.activities.add_activities(
                items, now_ms, then=write_direct if joined else None
            )
        except BaseException:
            direct.drop(in_flight)
            raise
        created = _created(items, results)
        if len(created) < len(items):
            direct.drop(sorted(set(in_flight) - {a.id for _, a in created}))
        self.stored(created, direct_written=joined)
        return results

    def stored(
        self, created: Sequence[tuple[Accepted, Activity]], *, direct_written: bool = False
    ) -> None:
        """After the commit of new activities: cache them, write their direct
        targets (unless the commit held them: ``direct_written``), wake the
        runner and tell the firehose."""
        if not created:
            return
        feeds = [i.feed for i, _ in created]
        docs = {a.id: (FIRST_VERSION, a.to_json()) for _, a in created}
        then = functools.partial(self._after_writes, created, docs)
        # Committed: nothing may raise from here on (the group commit would
        # write the activities again).
        try:
            forget = self.canonical.users.prepare_forget(feeds)
            put = self.cache.prepare_put_many(docs)
            deliveries = self._direct_deliveries(created)
            planner = self.deliverer.planner
            if direct_written:
                announcement = planner.announcement(deliveries)
                direct = [] if announcement is None else [announcement]
            else:
                direct = planner.plan_many(deliveries)
            # One round trip to Redis for the three, where they all go there;
            # with write-behind, not waited for (then is told on its thread).
            self.sender.submit([forget, put, *direct], then)
        except Exception as exc:
            then(exc)

    def _after_writes(
        self,
        created: Sequence[tuple[Accepted, Activity]],
        docs: Mapping[str, tuple[int, bytes]],
        error: BaseException | None,
    ) -> None:
        """How a publish's writes after its commit went; then the runner is
        told. Never raises (it runs after the commit, maybe on another thread)."""
        ids = [a.id for _, a in created]
        if error is None:
            # This process's runner need not write them again.
            self.deliverer.direct.add_many(ids)
        else:
            self.deliverer.direct.drop(ids)
            # The outbox rows make the runner redo the direct writes; the counts
            # and the cache are tried again alone, and a counts entry left
            # behind expires by itself.
            log.error("writes after storing %d activities failed", len(ids), exc_info=error)
            feeds = [i.feed for i, _ in created]
            again: list[Callable[[], None]] = [
                lambda: self.canonical.users.forget(feeds),
                lambda: self.cache.put_many(docs),
            ]
            for call in again:
                try:
                    call()
                except Exception:
                    log.exception("a cache write after storing %d activities failed", len(ids))
        try:
            self.notify()
        except Exception:
            # (Never raised to the publisher: its activities are committed.
            # Runners also find outbox rows by polling.)
            log.exception("telling the runner of %d activities failed", len(ids))
        if self._published is not None:
            # The firehose, after the feeds' own events (as before write-behind).
            try:
                self._published([(item.feed, a) for item, a in created])
            except Exception:
                log.exception("telling the firehose of %d activities failed", len(ids))

    @staticmethod
    def _direct_deliveries(created: Sequence[tuple[Accepted, Activity]]) -> list[Delivery]:
        """The deliveries to the direct targets (own feed, ``to``) of ``created``."""
        return [
            Delivery(a, item.keys, direct_targets(item.feed, a.to), flat=True)
            for item, a in created
        ]

    def _direct(
        self, kind: OutboxKind, activity: Activity, keys: Mapping[str, str], feed: str
    ) -> None:
        try:
            self.deliverer.write_direct(kind, activity, keys, feed, activity.to)
        except Exception:
            # Accepted all the same: the outbox row makes the runner redo it.
            log.exception("direct %s of %s failed; left to the runner", kind, activity.id)

    def get(self, ref: ActivityRef) -> Activity:
        if isinstance(ref, tuple):
            feed, foreign_id = ref
            self._feed(feed)
            # No stored foreign_id holds NUL (validation refuses it), and
            # PostgreSQL would refuse the lookup itself.
            found = (
                None
                if "\x00" in foreign_id
                else self.canonical.activities.get_by_foreign_id(feed, foreign_id)
            )
            if found is None:
                raise ActivityNotFound(f"no activity with foreign_id {foreign_id!r} in {feed}")
            return found
        if not isinstance(ref, str) or not ids.is_valid(ref):
            raise ValidationError(f"not an activity id: {str(ref)[:64]!r}", field="id")
        found = self.canonical.activities.get_activity(ref)
        if found is None:
            raise ActivityNotFound(f"no activity with id {ref}")
        return found

    def update(
        self,
        ref: ActivityRef,
        set: Mapping[str, Any] | None,
        unset: Sequence[str],
        paths: bool = False,
    ) -> Activity:
        if set is not None and not isinstance(set, Mapping):
            raise ValidationError("must be a JSON object", field="set")
        check_json(set or {}, "set")  # named as the caller wrote it, not as extra's
        if isinstance(unset, str) or not all(isinstance(k, str) for k in unset):
            raise ValidationError("must be a list of keys", field="unset")
        activity_id = self.get(ref).id

        if paths:  # (refused before the row is locked)
            for key in (*(set or {}), *unset):
                dotted.split(key, "set" if key in (set or {}) else "unset")

        def change(stored: Activity) -> Activity:
            if paths:
                return stored.with_extra(dotted.apply(stored.extra, set or {}, unset))
            extra = {k: v for k, v in stored.extra.items() if k not in unset}
            extra.update(set or {})
            return stored.with_extra(extra)

        # By (feed, foreign_id) the feed is known: the update then reads one
        # partition of a partitioned table rather than every one.
        feed = ref[0] if isinstance(ref, tuple) else None
        found = self.canonical.activities.update_activity(activity_id, change, feed=feed)
        if found is None:
            raise ActivityNotFound(f"activity {activity_id} was removed meanwhile")
        updated, version = found
        self.cache.put_many({updated.id: (version, updated.to_json())})
        if self._updated is not None:
            self._updated(updated)
        return updated

    def remove(self, feed: str, activity_id: str | None, foreign_id: str | None) -> Activity:
        self._feed(feed)
        if (activity_id is None) == (foreign_id is None):
            raise ValidationError("give exactly one of activity_id and foreign_id")
        ref: ActivityRef = activity_id if activity_id is not None else (feed, str(foreign_id))
        placements = self.canonical.placements
        try:
            activity = self.get(ref)
        except ActivityNotFound:
            # (by foreign_id, one placed in this feed: its own feed is another)
            found = None if activity_id is not None else placements.by_foreign_id(feed, ref[1])
            if found is None:
                raise
            activity = found
        if placements.is_placed(activity.id):
            # Placed in several feeds: taken out of this one alone; out of the
            # last, it is removed, so its foreign_id may be placed anew.
            self._hide(feed, activity)
            own = self.canonical.activities.feed_of(activity.id)
            if own is None or placements.placed_in_any(activity.id):
                return activity
            keys, notices = self.canonical.activities.remove_activity(
                own, activity, self.clock.ms()
            )
            if keys is not None:  # (None: a concurrent removal did it)
                self.removed([(own, activity, keys), *notices])
            return activity
        keys, notices = self.canonical.activities.remove_activity(feed, activity, self.clock.ms())
        if keys is None and activity_id is not None:
            return self._hide(feed, activity)
        if keys is None:
            raise ActivityNotFound(f"activity {activity.id} was not added or addressed to {feed}")
        self.removed([(feed, activity, keys), *notices])
        return activity

    def removed(self, gone: Sequence[tuple[str, Activity, Mapping[str, str]]]) -> None:
        """After the commit of removals (``(feed, activity, aggregate keys)``): drop
        them from the cache, retract them from their direct targets, wake the
        runner and tell the firehose."""
        self.canonical.users.forget([feed for feed, _, _ in gone])
        for feed, activity, keys in gone:
            self.cache.delete([activity.id])
            self._direct(OutboxKind.RETRACT, activity, keys, feed)
        if gone:
            self.notify()
        for feed, activity, _ in gone:
            if self._deleted is not None:
                self._deleted(feed, activity)

    def _hide(self, feed: str, activity: Activity) -> Activity:
        keys = self.canonical.hidden.hide(feed, activity.id)
        if keys is None:
            raise ActivityNotFound(
                f"activity {activity.id} was not added or addressed to {feed}, "
                "nor delivered there by a follow"
            )
        # Only this feed: the activity, its cache entry and its other feeds stay.
        self.deliverer.write(OutboxKind.RETRACT, [feed], activity, keys)
        return activity


def _created(
    items: Sequence[Accepted], results: Sequence[tuple[Activity, bool]]
) -> list[tuple[Accepted, Activity]]:
    """The items a publish stored anew (not found by ``foreign_id``), as stored."""
    return [(item, stored) for item, (stored, new) in zip(items, results, strict=True) if new]
