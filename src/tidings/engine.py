"""The engine: the one facade every entry point (library, CLI, HTTP) calls.

Nothing outside this module talks to a store directly. Publishing writes the
activity and its outbox row in one transaction, then writes the direct
targets (the source feed and ``to``) at once so the publisher reads its own
write; deliveries to followers go through the task runner.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from tidings.canonical.activities import FIRST_VERSION
from tidings.canonical.db import Database
from tidings.canonical.store import CanonicalStore
from tidings.core import ids
from tidings.core.activity import Activity, NewActivity, check_json, validate
from tidings.core.aggregation import (
    ActivityGroup,
    GroupPage,
    Member,
    Position,
    check_group_keys,
    decode_position,
    encode_position,
    ms_time,
)
from tidings.core.cursor import CursorCodec
from tidings.core.errors import ActivityNotFound, ConfigurationError, InvalidCursor, ValidationError
from tidings.core.fanout import Strategy, backfill_plan, by_group, classify, merge_newest
from tidings.core.feeds import FeedGroup, FeedKind, parse_feed_id
from tidings.core.readers import ReadTracker, read_window_ms
from tidings.core.results import Follow, Page, Stats
from tidings.delivery.deliverer import LEASE_MS, Deliverer
from tidings.settings import Settings
from tidings.stores.base import ActivityCache, Cap, GroupStore, NoCache, TimelineStore
from tidings.tasks import ManualRunner, Runner, SyncRunner, ThreadRunner

log = logging.getLogger("tidings")

MAX_PAGE_SIZE = 100
MAX_COPY_LIMIT = 1000
MAX_FOLLOW_BATCH = 1000
MAX_MARK_GROUPS = 1000
#: How often reads noted in memory are written to the canonical store.
READS_FLUSH_SECONDS = 1.0
#: How often a process asks whether any feed is idle or being rebuilt.
UNSETTLED_VIEW_SECONDS = 5.0
#: Used to sign cursors when no secret is configured: cursors are then
#: tamper-evident but not secret, which is all pagination needs.
_DEFAULT_CURSOR_KEY = b"tidings-cursor-v1"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

ActivityRef = str | tuple[str, str]
DeliveryMode = Literal["thread", "celery", "sync", "manual"]


class Tidings:
    """Activity feeds over a canonical SQL store and a timeline store.

    ``delivery`` picks the runner: ``thread`` (background threads),
    ``celery`` (dispatched to ``tidings worker`` processes), ``sync``
    (delivered before ``add_activity`` returns) or ``manual`` (call
    :meth:`drain`). Left out, it is the ``task_runner`` setting.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        timeline: TimelineStore | None = None,
        aggregates: GroupStore | None = None,
        cache: ActivityCache | None = None,
        redis_client: Any = None,
        delivery: DeliveryMode | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings or Settings.load()
        self.groups: Mapping[str, FeedGroup] = self.settings.groups
        self.clock = clock or (lambda: datetime.now(UTC))
        self.db = Database(self.settings.database_url)
        self.db.migrate()
        self.canonical = CanonicalStore(self.db)
        self._owned_client: Any = None  # a Redis client this engine made, and so closes
        self.timeline, self.aggregates, self.cache = self._stores(
            timeline, aggregates, cache, redis_client
        )
        secret = self.settings.secret
        self.cursors = CursorCodec(secret.encode() if secret else _DEFAULT_CURSOR_KEY)
        self.deliverer = Deliverer(
            self.canonical,
            self.timeline,
            self.groups,
            aggregates=self.aggregates,
            chunk_size=self.settings.delivery_chunk_size,
            now_ms=self.now_ms,
            pull_grace_ms=int(self.settings.pull_grace_seconds * 1000),
        )
        # Whether any source is pulled, looked up at most every half grace period
        # (deliveries keep pushing for a whole one after a switch to pull): most
        # deployments pull nothing, and their reads then skip that query.
        self._merges_pulled = _Recheck(
            self.canonical.fanout.any_pulled, self.settings.pull_grace_seconds / 2
        )
        # Whether any feed is idle or being rebuilt: with none (inactive_days = 0,
        # or nobody idle yet), a first read needs no state lookup. A feed idled
        # by another process meanwhile is read from its (cleared) store, flat
        # feeds falling back to the canonical store; the read, recorded within
        # a second, wakes it.
        self._any_unsettled = _Recheck(self.canonical.readers.any_unsettled, UNSETTLED_VIEW_SECONDS)
        self.runner = self._runner(delivery or self.settings.task_runner)
        self.runner.start()
        self.reads = ReadTracker(
            read_window_ms(self.settings.inactive_days, self.settings.recent_read_hours)
        )
        self._reads_stop = threading.Event()
        self._reads_thread = threading.Thread(
            target=self._flush_reads_loop, name="tidings-reads", daemon=True
        )
        self._reads_thread.start()

    def _runner(self, delivery: DeliveryMode) -> Runner:
        if delivery == "thread":
            return ThreadRunner(self.deliverer, threads=self.settings.delivery_threads)
        if delivery == "sync":
            return SyncRunner(self.deliverer)
        if delivery == "manual":
            return ManualRunner()
        try:
            from tidings.tasks.celery import CeleryRunner
        except ModuleNotFoundError as exc:
            raise ConfigurationError(
                f"the celery task runner needs Celery: pip install 'tidings[celery]' ({exc})"
            ) from None
        settings = self.settings
        return CeleryRunner.for_settings(
            self.deliverer, settings, lambda: Tidings(settings, delivery="manual")
        )

    def _stores(
        self,
        timeline: TimelineStore | None,
        aggregates: GroupStore | None,
        cache: ActivityCache | None,
        client: Any,
    ) -> tuple[TimelineStore, GroupStore, ActivityCache]:
        if timeline is not None and aggregates is not None:
            return timeline, aggregates, cache or NoCache()
        store = self.settings.store
        if store == "memory":
            from tidings.stores.memory import MemoryGroupStore, MemoryTimelineStore

            return (
                timeline or MemoryTimelineStore(),
                aggregates or MemoryGroupStore(),
                cache or NoCache(),
            )
        if store == "sql":
            from tidings.stores.sql import SqlGroupStore, SqlTimelineStore

            return (
                timeline or SqlTimelineStore(self.db),
                aggregates or SqlGroupStore(self.db),
                cache or NoCache(),
            )
        try:
            from tidings.stores.redis import (
                RedisActivityCache,
                RedisGroupStore,
                RedisTimelineStore,
                connect,
            )
        except ModuleNotFoundError as exc:
            raise ConfigurationError(
                f"the Redis store needs its driver: pip install 'tidings[redis]' ({exc})"
            ) from None

        if client is None:
            if not self.settings.redis_url:
                raise ConfigurationError("the redis timeline store needs TIDINGS_REDIS_URL")
            client = self._owned_client = connect(self.settings.redis_url)
        ns = self.settings.namespace
        return (
            timeline or RedisTimelineStore(client, ns),
            aggregates or RedisGroupStore(client, ns),
            cache
            or RedisActivityCache(client, ns, ttl_seconds=self.settings.activity_cache_seconds),
        )

    def __enter__(self) -> Tidings:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._reads_stop.set()
        self._reads_thread.join()
        try:
            self.flush_reads()
        except Exception:
            log.exception("recording the last reads failed")
        self.runner.stop()
        self.timeline.close()
        self.aggregates.close()
        if self._owned_client is not None:
            from tidings.stores.redis import disconnect

            disconnect(self._owned_client)
        self.db.close()

    def now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

    def now_us(self) -> int:
        return (self.clock() - _EPOCH) // _MICROSECOND

    def _feed(self, feed: str) -> str:
        parse_feed_id(feed, self.groups)
        return feed

    def grouped(self, feed: str) -> bool:
        """Whether ``feed`` holds groups (aggregated, notification) rather than activities."""
        return self.groups[parse_feed_id(feed, self.groups).group].grouped

    def check_feed(self, feed: str) -> None:
        """Raise InvalidFeedId / UnknownFeedGroup unless ``feed`` is a valid, configured feed id."""
        self._feed(feed)

    def health(self) -> int:
        """Touch both stores; returns the number of pending deliveries."""
        group = next(iter(self.groups))
        self.timeline.page(f"{group}:healthz", limit=1, before=None, cap=self.deliverer.cap(group))
        return self.canonical.outbox.pending()

    # -- activities ---------------------------------------------------------

    def add_activity(self, feed: str, activity: NewActivity | Mapping[str, Any]) -> Activity:
        """Publish an activity to ``feed``; its followers and ``to`` feeds receive it.

        With a ``foreign_id`` already used in ``feed`` this returns the stored
        activity and changes nothing.
        """
        return self.publish(feed, activity)[0]

    def publish(
        self, feed: str, activity: NewActivity | Mapping[str, Any]
    ) -> tuple[Activity, bool]:
        """:meth:`add_activity`, also saying whether it was new (False: the
        ``foreign_id`` was already used in ``feed`` and nothing changed)."""
        self._feed(feed)
        new = validate(activity, now=self.clock(), check_feed=self._feed)
        keys = self.deliverer.group_keys(new)
        now_us = self.now_us()
        stored, created = self.canonical.activities.add_activity(
            feed, new, now_us // 1000, keys, now_us=now_us
        )
        if created:
            self.cache.put_many({stored.id: (FIRST_VERSION, stored.to_json())})
            self._direct("deliver", stored, keys, feed)
            self.runner.notify()
        return stored, created

    def _direct(self, kind: str, activity: Activity, keys: Mapping[str, str], feed: str) -> None:
        try:
            self.deliverer.write_direct(kind, activity, keys, feed, activity.to)
        except Exception:
            # Accepted all the same: the outbox row makes the runner redo it.
            log.exception("direct %s of %s failed; left to the runner", kind, activity.id)

    def get_activity(self, ref: ActivityRef) -> Activity:
        """An activity by id, or by ``(feed, foreign_id)``."""
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

    def update_activity(
        self,
        ref: ActivityRef,
        *,
        set: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
    ) -> Activity:
        """Set and unset keys of ``extra``; every feed holding the activity shows the change."""
        if set is not None and not isinstance(set, Mapping):
            raise ValidationError("must be a JSON object", field="set")
        check_json(set or {}, "set")  # named as the caller wrote it, not as extra's
        if isinstance(unset, str) or not all(isinstance(k, str) for k in unset):
            raise ValidationError("must be a list of keys", field="unset")
        activity_id = self.get_activity(ref).id

        def change(stored: Activity) -> Activity:
            extra = {k: v for k, v in stored.extra.items() if k not in unset}
            extra.update(set or {})
            return stored.with_extra(extra)

        found = self.canonical.activities.update_activity(activity_id, change)
        if found is None:
            raise ActivityNotFound(f"activity {activity_id} was removed meanwhile")
        updated, version = found
        self.cache.put_many({updated.id: (version, updated.to_json())})
        return updated

    def remove_activity(
        self, feed: str, activity_id: str | None = None, *, foreign_id: str | None = None
    ) -> Activity:
        """Remove an activity (by id or foreign_id) from ``feed``.

        One added to ``feed`` is deleted, and retracted from every feed it
        reached. One that only reached ``feed`` through its ``to`` (by id) is
        taken out of ``feed`` alone, for good (rebuilds leave it out); it stays
        everywhere else, and in ``feed`` too while ``feed`` follows the feed it
        was added to (unfollowing removes it then).
        """
        self._feed(feed)
        if (activity_id is None) == (foreign_id is None):
            raise ValidationError("give exactly one of activity_id and foreign_id")
        ref: ActivityRef = activity_id if activity_id is not None else (feed, str(foreign_id))
        activity = self.get_activity(ref)
        keys = self.canonical.activities.remove_activity(feed, activity, self.now_ms())
        if keys is None and activity_id is not None:
            return self._unaddress(feed, activity)
        if keys is None:
            raise ActivityNotFound(f"activity {activity.id} was not added or addressed to {feed}")
        self.cache.delete([activity.id])
        self._direct("retract", activity, keys, feed)
        self.runner.notify()
        return activity

    def _unaddress(self, feed: str, activity: Activity) -> Activity:
        found = self.canonical.activities.unaddress(feed, activity.id)
        if found is None:
            raise ActivityNotFound(f"activity {activity.id} was not added or addressed to {feed}")
        keys, followed = found
        if not followed:
            # Only this feed: the activity, its cache entry and its other feeds stay.
            self.deliverer.write("retract", [feed], activity, keys)
        return activity

    # -- follows ------------------------------------------------------------

    def follow(self, follower: str, source: str, copy_limit: int = 100) -> bool:
        """``follower`` receives what is added to ``source`` from now on, and its newest
        ``copy_limit`` activities now. Returns False when it already followed."""
        return bool(self.follow_many([(follower, source)], copy_limit=copy_limit))

    def follow_many(
        self, pairs: Iterable[tuple[str, str]], copy_limit: int = 100
    ) -> list[tuple[str, str]]:
        """Several follows in one transaction; returns the pairs that were new.

        Their history copy is queued in the same transaction and carried out
        here; if this fails (or the process dies), a runner finishes it.
        """
        checked = [self._follow_pair(p) for p in pairs]
        if len(checked) > MAX_FOLLOW_BATCH:
            raise ValidationError(
                f"{len(checked)} follows in one batch; the limit is {MAX_FOLLOW_BATCH}"
            )
        if not isinstance(copy_limit, int) or not 0 <= copy_limit <= MAX_COPY_LIMIT:
            raise ValidationError(
                f"must be an integer from 0 to {MAX_COPY_LIMIT}", field="copy_limit"
            )
        now = self.now_ms()
        # Claimed by this call: no runner takes the copy unless this one fails.
        followed = self.canonical.follows.follow(
            checked, now, copy_limit=copy_limit, lease_until_ms=now + LEASE_MS
        )
        if followed.copy is not None:
            try:
                self.deliverer.copy(followed.copy)
            except Exception:
                log.exception("copying history of new follows failed; left to the runner")
                self.canonical.outbox.release(followed.copy)
                self.runner.notify()
        return followed.created

    def _members(self, group: str, activity_ids: Sequence[str]) -> list[Member]:
        """Those of the activities that still exist, as feeds of ``group`` hold them."""
        return self.deliverer.stored_members(group, activity_ids)

    def _follow_pair(self, pair: object) -> tuple[str, str]:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValidationError("each follow must be a (follower, source) pair")
        follower, source = self._feed(pair[0]), self._feed(pair[1])
        if follower == source:
            raise ValidationError(f"a feed cannot follow itself: {follower}")
        return follower, source

    def unfollow(self, follower: str, source: str, keep_history: bool = False) -> bool:
        """Stop following; unless ``keep_history``, remove what came through the follow."""
        self._follow_pair((follower, source))
        if not self.canonical.follows.unfollow(follower, source):
            return False
        if keep_history:
            return True
        group = follower.split(":")[0]
        if self.groups[group].grouped:
            held = self.aggregates.member_ids(follower)
            came = self.canonical.activities.ids_from(source, held, unless_to=follower)
            members = self._members(group, came)
            self.aggregates.remove([follower], members, self.deliverer.group_cap(group))
        else:
            cap = self.deliverer.cap(group)
            held = self.timeline.page(follower, limit=cap.max_length, before=None, cap=cap)
            came = self.canonical.activities.ids_from(source, held, unless_to=follower)
            self.timeline.remove([follower], came, cap)
        return True

    def followers(self, source: str, *, cursor: str | None = None, limit: int = 25) -> Page[Follow]:
        return self._follows("followers", source, cursor, limit)

    def following(self, feed: str, *, cursor: str | None = None, limit: int = 25) -> Page[Follow]:
        return self._follows("following", feed, cursor, limit)

    def _follows(self, kind: str, feed: str, cursor: str | None, limit: int) -> Page[Follow]:
        self._feed(feed)
        _check_limit(limit)
        context = f"{kind}:{feed}"
        after = None if cursor is None else self.cursors.decode(context, cursor)
        lookup = (
            self.canonical.follows.followers
            if kind == "followers"
            else self.canonical.follows.following
        )
        rows = lookup(feed, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        position = (rows[-1].follower if kind == "followers" else rows[-1].source) if rows else ""
        return Page(rows, self.cursors.encode(context, position) if more else None)

    def counts(self, feed: str) -> tuple[int, int]:
        """``(followers, following)`` of a feed."""
        return self.canonical.follows.counts(self._feed(feed))

    # -- reading ------------------------------------------------------------

    def read(self, feed: str, limit: int = 25, cursor: str | None = None) -> Page[Activity]:
        """A page of ``feed``, newest first; pass ``next`` back as ``cursor`` for the next."""
        page = self.read_json(feed, limit, cursor)
        activities = [Activity.from_json(doc) for doc in page.results]
        return Page(activities, page.next, page.regenerating)

    def read_json(self, feed: str, limit: int = 25, cursor: str | None = None) -> Page[bytes]:
        """:meth:`read`, with each activity as its stored JSON (the API's shape).

        The HTTP service splices these bytes into its response instead of
        parsing and re-serialising every activity of every page.
        """
        read = self._feed_read(feed, limit, cursor)
        read.regenerating = not self._reading(feed)
        page: list[str]
        docs: dict[str, bytes]
        while not read.done:
            if read.regenerating:
                page, docs = [], {}  # the canonical store alone is complete
            else:
                page, docs = self.timeline.page_docs(
                    feed, limit=read.ask, before=read.before, cap=read.cap
                )
            shown = read.cut(self._with_canonical(feed, read, page, docs))
            gone = read.take(shown, self._hydrate(shown, docs))
            if gone:
                # Removed activities are dropped here and cleaned lazily.
                self.timeline.remove([feed], gone, read.cap)
        return read.page(self.cursors)

    async def read_json_async(
        self, feed: str, limit: int = 25, cursor: str | None = None
    ) -> Page[bytes]:
        """:meth:`read_json` for an event loop: the store round trip is awaited, not
        blocking the loop, on stores that can (Redis); others read as ``read_json``."""
        pages = getattr(self.timeline, "page_docs_async", None)
        if pages is None:
            # A store without async reads (memory, SQL) may wait on a lock.
            return await asyncio.to_thread(self.read_json, feed, limit, cursor)
        read = self._feed_read(feed, limit, cursor)
        # SQLite answers in microseconds in this process; a database server's
        # round trip would hold up the loop, so it waits in a thread.
        inline = self.db.dialect == "sqlite"
        # The state lookup (and the write that wakes an idle feed) waits in a
        # thread; known feeds, nearly every read, need neither.
        known = self._reading_known(feed)
        if known is None:
            known = await asyncio.to_thread(self._reading_looked_up, feed)
        read.regenerating = not known
        while not read.done:
            if read.regenerating:
                page, docs = [], {}
            else:
                page, docs = await pages(feed, limit=read.ask, before=read.before, cap=read.cap)
            if inline:
                merged = self._with_canonical(feed, read, page, docs)
            else:
                merged = await asyncio.to_thread(self._with_canonical, feed, read, page, docs)
            shown = read.cut(merged)
            if [i for i in shown if i not in docs]:
                # Rare (the page script brings the cached activities along) and a
                # blocking cache or SQL lookup: off the loop.
                docs = await asyncio.to_thread(self._hydrate, shown, docs)
            gone = read.take(shown, docs)
            if gone:
                await asyncio.to_thread(self.timeline.remove, [feed], gone, read.cap)
        return read.page(self.cursors)

    def _with_canonical(
        self, feed: str, read: _FeedRead, page: list[str], docs: dict[str, bytes]
    ) -> list[str]:
        """``page`` of the timeline store merged with what readers of ``feed`` take
        from the canonical store: the pulled sources it follows and, once the
        materialised feed ends (capped or short), its history, so a cursor walks
        the whole of it. Their JSON comes in the same statements, into ``docs``."""
        ask, floor = read.ask, read.cap.floor
        lists = [page]
        if self._merges_pulled():
            pulled = self.canonical.history.pulled(feed, before=read.before, floor=floor, limit=ask)
            lists += pulled.lists
            docs.update(pulled.docs)
        if len(page) < ask:
            end = page[-1] if page else read.before
            history = self.canonical.history.history(feed, before=end, floor=floor, limit=ask)
            lists += history.lists
            docs.update(history.docs)
        return merge_newest(lists, ask)

    def _reading(self, feed: str) -> bool:
        """Note that ``feed`` is read; False while it is being rebuilt after its
        owner was idle (a first read after idleness sets that going).

        A feed confirmed active within the tracker's window costs no lookup;
        the read itself is recorded in the background, in batches.
        """
        known = self._reading_known(feed)
        return known if known is not None else self._reading_looked_up(feed)

    def _reading_known(self, feed: str) -> bool | None:
        """:meth:`_reading` without blocking: None when the state must be looked up."""
        now = self.now_ms()
        if self.reads.fresh(feed, now):
            return True
        if not self._any_unsettled():
            self.reads.confirm(feed, now)
            return True
        return None

    def _reading_looked_up(self, feed: str) -> bool:
        now = self.now_ms()
        state = self.canonical.readers.reader_state(feed)
        if state == "idle":
            woken = self.canonical.readers.record_reads({feed: now}, now)
            if woken:
                self._woken(woken)
                state = self.canonical.readers.reader_state(feed)  # a sync runner rebuilt it
        if state == "active":
            self.reads.confirm(feed, now)
            return True
        return False

    def _woken(self, feeds: list[str]) -> None:
        self.reads.forget(feeds)
        self._any_unsettled.expire()
        self.runner.notify()

    def flush_reads(self) -> None:
        """Write the reads noted in memory to the canonical store (the background
        thread does so every second); wakes idle feeds read meanwhile."""
        reads = self.reads.take()
        if not reads:
            return
        try:
            woken = self.canonical.readers.record_reads(reads, self.now_ms())
        except Exception:
            self.reads.put_back(reads)
            raise
        if woken:
            self._woken(woken)

    def _flush_reads_loop(self) -> None:
        while not self._reads_stop.wait(READS_FLUSH_SECONDS):
            try:
                self.flush_reads()
            except Exception:
                log.exception("recording reads failed; will retry")

    def _feed_read(self, feed: str, limit: int, cursor: str | None) -> _FeedRead:
        """A flat feed read, its arguments checked, before its first round trip."""
        group = parse_feed_id(feed, self.groups).group
        if self.groups[group].grouped:
            raise ValidationError(
                f"{feed} is a {self.groups[group].kind} feed of groups: read it with read_groups"
            )
        _check_limit(limit)
        context = f"feed:{feed}"
        before = None
        if cursor is not None:
            before = self.cursors.decode(context, cursor)
            if not ids.is_valid(before):
                raise InvalidCursor("cursor is malformed", field="cursor")
        return _FeedRead(context, self.deliverer.cap(group), limit, before)

    def read_groups(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        mark_seen: bool = False,
        mark_read: bool = False,
    ) -> GroupPage:
        """A page of an aggregated or notification feed: groups, newest first.

        ``mark_seen`` / ``mark_read`` mark the returned groups after reading
        them (the groups show their state from before; the feed's counts,
        from after).
        """
        group = parse_feed_id(feed, self.groups).group
        config = self.groups[group]
        if not config.grouped:
            raise ValidationError(f"{feed} is a flat feed: read it with read")
        _check_limit(limit)
        context = f"groups:{feed}"
        regenerating = not self._reading(feed)
        snapshot: str | None = None
        after: Position | None = None
        if cursor is not None:
            snapshot, after = decode_position(self.cursors.decode(context, cursor))
        page = self.aggregates.page(
            feed,
            limit=limit + 1,
            snapshot=snapshot,
            after=after,
            cap=self.deliverer.group_cap(group),
            docs=True,
        )
        shown = page.groups[:limit]
        docs = self._hydrate([i for g in shown for i in g.activity_ids], dict(page.docs))
        notification = config.kind == FeedKind.NOTIFICATION
        results: list[ActivityGroup] = []
        for g in shown:
            # Ids whose activity is gone are awaiting their retraction: skip them.
            activities = [Activity.from_json(docs[i]) for i in g.activity_ids if i in docs]
            if not activities:
                continue
            results.append(
                ActivityGroup(
                    group=g.key,
                    verb=activities[0].verb,
                    activity_count=g.activity_count,
                    actor_count=g.actor_count,
                    activities=activities,
                    created_at=ms_time(g.oldest),
                    updated_at=ms_time(g.newest),
                    is_seen=g.is_seen if notification else None,
                    is_read=g.is_read if notification else None,
                )
            )
        next_cursor = None
        if len(page.groups) > limit and shown and page.snapshot is not None:
            last = Position(shown[-1].position, shown[-1].key)  # ms, key
            next_cursor = self.cursors.encode(context, encode_position(page.snapshot, last))
        if not notification:
            return GroupPage(results, next_cursor, regenerating=regenerating)
        unseen, unread = page.unseen, page.unread
        if mark_seen or mark_read:
            marked = [g.key for g in shown]
            self.canonical.marks.record_marks(feed, marked, read=mark_read, now_us=self.now_us())
            self.aggregates.mark(feed, marked, read=mark_read)
            unseen -= sum(not g.is_seen for g in shown)
            if mark_read:
                unread -= sum(not g.is_read for g in shown)
        return GroupPage(results, next_cursor, unseen, unread, regenerating)

    def mark_seen(self, feed: str, groups: Sequence[str] | None = None) -> None:
        """Mark groups of a notification feed seen (``groups=None``: all of them)."""
        self._mark(feed, groups, read=False)

    def mark_read(self, feed: str, groups: Sequence[str] | None = None) -> None:
        """Mark groups of a notification feed read, and so seen (``None``: all)."""
        self._mark(feed, groups, read=True)

    def notification_counts(self, feed: str) -> tuple[int, int]:
        """``(unseen, unread)`` groups of a notification feed."""
        group = self._notification_group(feed)
        page = self.aggregates.page(
            feed, limit=1, snapshot=None, after=None, cap=self.deliverer.group_cap(group)
        )
        return page.unseen, page.unread

    def _notification_group(self, feed: str) -> str:
        group = parse_feed_id(feed, self.groups).group
        kind = self.groups[group].kind
        if kind != FeedKind.NOTIFICATION:
            raise ValidationError(
                f"{feed} is a {kind} feed; only notification feeds track seen and read"
            )
        return group

    def _mark(self, feed: str, groups: Sequence[str] | None, *, read: bool) -> None:
        self._notification_group(feed)
        if groups is not None:
            groups = check_group_keys(groups)
            if len(groups) > MAX_MARK_GROUPS:
                raise ValidationError(
                    f"has {len(groups)} groups; the limit is {MAX_MARK_GROUPS}", field="groups"
                )
        # Recorded first: the store's state is rebuilt from the record.
        self.canonical.marks.record_marks(feed, groups, read=read, now_us=self.now_us())
        self.aggregates.mark(feed, groups, read=read)

    def _hydrate(self, activity_ids: Sequence[str], docs: dict[str, bytes]) -> dict[str, bytes]:
        """``docs`` completed for ``activity_ids``: cache, then canonical store."""
        misses = [i for i in activity_ids if i not in docs]
        if misses:
            docs.update(self.cache.get_many(misses))
            misses = [i for i in misses if i not in docs]
        if misses:
            found = self.canonical.activities.get_versioned_docs(misses)
            if found:
                self.cache.put_many(found)
                docs.update((aid, doc) for aid, (_, doc) in found.items())
        return docs

    # -- fan-out strategy ---------------------------------------------------

    def fanout_strategy(self, source: str) -> Strategy:
        """How ``source`` reaches its flat followers: ``push``, ``pull`` or ``draining``."""
        return self.canonical.fanout.strategy(self._feed(source))

    # -- repair -------------------------------------------------------------

    def known_feeds(self) -> list[str]:
        """Every feed of a configured group that the canonical store knows of
        (published to, addressed, or following), sorted."""
        return [f for f in self.canonical.history.feeds() if f.partition(":")[0] in self.groups]

    def rebuild(self, feeds: Iterable[str] | None = None) -> Iterator[str]:
        """Rebuild feeds (None: every feed the canonical store knows) in the timeline
        and group stores from the canonical store; yields each feed when done.

        A flat feed gets the newest ``max_length`` entries of its history (what
        reading past the cap walks). A grouped feed gets its newest
        ``REBUILD_GROUPED_HISTORY`` activities, regrouped under the keys fixed
        at publish, with the seen/read state the recorded marks give them.
        """
        chosen = self.known_feeds() if feeds is None else [self._feed(f) for f in feeds]
        for feed in chosen:
            self.deliverer.rebuild(feed)
            yield feed

    def sweep_readers(self) -> list[str]:
        """Sort follows into delivery tiers by when their follower was last read,
        and idle the follower feeds not read for ``inactive_days``: deliveries
        skip them and their stores are cleared. Returns the feeds newly idle.

        An idle feed read again is rebuilt from the canonical store (reads are
        served from there meanwhile). ``tidings reclassify`` runs this.
        """
        self.flush_reads()
        days = self.settings.inactive_days
        can_idle = {g for g, c in self.groups.items() if c.kind != FeedKind.NOTIFICATION}
        chunks = self.canonical.readers.sweep_readers(
            self.now_ms,
            recent_ms=int(self.settings.recent_read_hours * 3_600_000),
            idle_ms=int(days * 86_400_000) if days > 0 else None,
            can_idle=lambda feed: feed.partition(":")[0] in can_idle,
        )
        idled: list[str] = []
        for part in chunks:
            if not part:
                continue
            self._any_unsettled.expire()  # readers here look states up again
            try:
                for group, feeds in by_group(part, presorted=True).items():
                    if self.groups[group].grouped:
                        self.aggregates.clear(feeds)
                    else:
                        self.timeline.clear(feeds)
            finally:
                # A feed read between the sweep's commit and the clear woke up
                # and may have been rebuilt already: the clear undid that (or
                # part of it, if the clear failed), so again.
                if self.canonical.readers.regenerate(part, self.now_ms()):
                    self.runner.notify()
            idled += part
        if idled:
            log.info("%d follower feeds idle (not read for %g days)", len(idled), days)
        return idled

    def reclassify(self, threshold: int | None = None) -> list[tuple[str, Strategy, Strategy]]:
        """Move sources between push and pull by follower count (with hysteresis);
        returns the changes as ``(source, before, after)``.

        ``threshold`` overrides ``pull_threshold`` for this run. A source going
        back to push is first marked draining (delivered again, still merged by
        readers), then its newest activities are copied into its flat
        followers, and only then is it pushed: no reader misses an entry, and
        a run cut short is finished by the next one.
        """
        limit = self.settings.pull_threshold if threshold is None else threshold
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ValidationError("must be a non-negative integer", field="threshold")
        hysteresis = self.settings.pull_hysteresis
        changes: list[tuple[str, Strategy, Strategy]] = []
        for source, followers, current in self.canonical.fanout.fanout_candidates(limit):
            target = classify(current, followers, limit, hysteresis)
            if target == current:
                continue
            if target == "push":
                if current == "pull":
                    self.canonical.fanout.set_strategy(source, "draining", self.now_ms())
                self._backfill(source)
            self.canonical.fanout.set_strategy(source, target, self.now_ms())
            log.info("fan-out of %s: %s -> %s (%d followers)", source, current, target, followers)
            changes.append((source, current, target))
        return changes

    def _backfill(self, source: str) -> None:
        """Copy the newest activities of ``source`` into its flat followers, as far
        as each follower's cap and history go (idempotent)."""
        caps = {g: self.deliverer.cap(g) for g, config in self.groups.items() if not config.grouped}
        if not caps:
            return
        newest = self.canonical.activities.newest_ids(
            source, max(c.max_length for c in caps.values())
        )
        after = None
        while spans := self.canonical.follows.follower_spans(
            source, after, self.settings.delivery_chunk_size
        ):
            after = spans[-1][0]
            starts = dict(spans)
            for group, feeds in by_group([f for f, _ in spans], presorted=True).items():
                cap = caps.get(group)
                if cap is None:  # grouped, or no longer configured
                    continue
                for copied, targets in backfill_plan(
                    newest[: cap.max_length], [(f, starts[f]) for f in feeds]
                ):
                    self.timeline.add(targets, copied, cap)

    # -- delivery -----------------------------------------------------------

    def drain(self) -> int:
        """Carry out every pending delivery (and regeneration) in this thread;
        returns outbox rows done."""
        return self.deliverer.run_pending()

    def pending_deliveries(self) -> int:
        return self.canonical.outbox.pending()

    # -- monitoring -----------------------------------------------------------

    def stats(self) -> Stats:
        """Deliveries done by this process, those pending, and the oldest one's age."""
        pending, oldest = self.canonical.outbox.outbox_stats()
        lag = 0.0 if oldest is None else max(0.0, (self.now_ms() - oldest) / 1000)
        return Stats(delivered=self.deliverer.completed, pending=pending, lag_seconds=lag)


class _Recheck:
    """A yes/no fact of the canonical store, looked up at most every ``seconds``;
    until first looked up (or after :meth:`expire`), it is asked again."""

    __slots__ = ("_ask", "_checked", "_seconds", "_value")

    def __init__(self, ask: Callable[[], bool], seconds: float) -> None:
        self._ask, self._seconds = ask, seconds
        self._checked = -math.inf
        self._value = True

    def __call__(self) -> bool:
        now = time.monotonic()
        if now >= self._checked + self._seconds:
            self._value = self._ask()
            self._checked = now
        return self._value

    def expire(self) -> None:
        self._checked = -math.inf


class _FeedRead:
    """One page of a flat feed across its store round trips; the sync and async
    reads differ only in how they wait for the store.

    Ids whose activity is gone are skipped (and returned by :meth:`take` for
    lazy cleanup); when a page comes up short for that, the next round trip
    continues after it.
    """

    __slots__ = (
        "before",
        "cap",
        "context",
        "done",
        "last",
        "limit",
        "more",
        "regenerating",
        "results",
    )

    def __init__(self, context: str, cap: Cap, limit: int, before: str | None) -> None:
        self.context, self.cap, self.limit, self.before = context, cap, limit, before
        self.regenerating = False
        self.results: list[bytes] = []
        self.last = ""
        self.more = False
        self.done = False

    @property
    def ask(self) -> int:
        """Ids to ask the store for: one more than wanted, to know if there are more."""
        return self.limit - len(self.results) + 1

    def cut(self, page: list[str]) -> list[str]:
        want = self.limit - len(self.results)
        self.more = len(page) > want
        return page[:want]

    def take(self, shown: list[str], docs: Mapping[str, bytes]) -> list[str]:
        """Keep the found activities of ``shown``; returns the ids without one."""
        got = [docs.get(i) for i in shown]
        if None not in got:  # nearly every page: all found, no list built twice
            self.results += got  # type: ignore[arg-type]  # no None in it
            if shown:
                self.last = shown[-1]
            self.done = True
            return []
        found = [i for i in shown if i in docs]
        self.results.extend(docs[i] for i in found)
        if found:
            self.last = found[-1]
        if len(found) == len(shown):
            self.done = True
            return []
        if self.more:
            self.before = shown[-1]
        else:
            self.done = True
        return [i for i in shown if i not in docs]

    def page(self, cursors: CursorCodec) -> Page[bytes]:
        more = self.more and self.results
        cursor = cursors.encode(self.context, self.last) if more else None
        return Page(self.results, cursor, self.regenerating)


def _check_limit(limit: object) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValidationError(f"must be an integer from 1 to {MAX_PAGE_SIZE}", field="limit")
