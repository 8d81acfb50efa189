"""The engine: the one facade every entry point (library, CLI, HTTP) calls.

Nothing outside this module talks to a store directly. Publishing writes the
activity and its outbox row in one transaction, then writes the direct
targets (the source feed and ``to``) at once so the publisher reads its own
write; deliveries to followers go through the task runner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from tidings import ids
from tidings.activity import Activity, NewActivity, validate
from tidings.aggregation import (
    MAX_GROUP_KEY_LENGTH,
    ActivityGroup,
    GroupPage,
    Member,
    Position,
    decode_position,
    encode_position,
    ms_time,
)
from tidings.canonical import CanonicalStore, Follow
from tidings.cursor import CursorCodec
from tidings.db import Database
from tidings.delivery import Deliverer
from tidings.errors import ActivityNotFound, ConfigurationError, InvalidCursor, ValidationError
from tidings.feeds import FeedGroup, FeedKind, parse_feed_id
from tidings.page import Page
from tidings.settings import Settings
from tidings.stores.base import ActivityCache, Cap, GroupStore, NoCache, TimelineStore
from tidings.tasks import ManualRunner, Runner, SyncRunner, ThreadRunner

log = logging.getLogger("tidings")

MAX_PAGE_SIZE = 100
MAX_COPY_LIMIT = 1000
MAX_FOLLOW_BATCH = 1000
MAX_MARK_GROUPS = 1000
#: Used to sign cursors when no secret is configured: cursors are then
#: tamper-evident but not secret, which is all pagination needs.
_DEFAULT_CURSOR_KEY = b"tidings-cursor-v1"

ActivityRef = str | tuple[str, str]
DeliveryMode = Literal["thread", "sync", "manual"]


class Tidings:
    """Activity feeds over a canonical SQL store and a timeline store.

    ``delivery`` picks the runner: ``thread`` (background threads, the
    default), ``sync`` (delivered before ``add_activity`` returns) or
    ``manual`` (call :meth:`drain`).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        timeline: TimelineStore | None = None,
        aggregates: GroupStore | None = None,
        cache: ActivityCache | None = None,
        redis_client: Any = None,
        delivery: DeliveryMode = "thread",
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
        )
        self.runner: Runner
        if delivery == "thread":
            self.runner = ThreadRunner(self.deliverer, threads=self.settings.delivery_threads)
        elif delivery == "sync":
            self.runner = SyncRunner(self.deliverer)
        else:
            self.runner = ManualRunner()
        self.runner.start()

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
            cache or RedisActivityCache(client, ns),
        )

    def __enter__(self) -> Tidings:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.runner.stop()
        self.timeline.close()
        self.aggregates.close()
        if self._owned_client is not None:
            self._owned_client.close()
        self.db.close()

    def now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

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
        return self.canonical.pending()

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
        stored, created = self.canonical.add_activity(feed, new, self.now_ms(), keys)
        if created:
            self.cache.put_many({stored.id: stored.to_json()})
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
                None if "\x00" in foreign_id else self.canonical.get_by_foreign_id(feed, foreign_id)
            )
            if found is None:
                raise ActivityNotFound(f"no activity with foreign_id {foreign_id!r} in {feed}")
            return found
        if not isinstance(ref, str) or not ids.is_valid(ref):
            raise ValidationError(f"not an activity id: {str(ref)[:64]!r}", field="id")
        found = self.canonical.get_activity(ref)
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
        if isinstance(unset, str) or not all(isinstance(k, str) for k in unset):
            raise ValidationError("must be a list of keys", field="unset")
        current = self.get_activity(ref)
        extra = {k: v for k, v in current.extra.items() if k not in unset}
        extra.update(set or {})
        updated = current.with_extra(extra)
        if not self.canonical.replace_activity(updated):
            raise ActivityNotFound(f"activity {current.id} was removed meanwhile")
        self.cache.put_many({updated.id: updated.to_json()})
        return updated

    def remove_activity(
        self, feed: str, activity_id: str | None = None, *, foreign_id: str | None = None
    ) -> Activity:
        """Remove an activity (by id or foreign_id) from ``feed`` and every feed it reached."""
        self._feed(feed)
        if (activity_id is None) == (foreign_id is None):
            raise ValidationError("give exactly one of activity_id and foreign_id")
        ref: ActivityRef = activity_id if activity_id is not None else (feed, str(foreign_id))
        activity = self.get_activity(ref)
        keys = self.canonical.remove_activity(feed, activity, self.now_ms())
        if keys is None:
            raise ActivityNotFound(f"activity {activity.id} was not added to {feed}")
        self.cache.delete([activity.id])
        self._direct("retract", activity, keys, feed)
        self.runner.notify()
        return activity

    # -- follows ------------------------------------------------------------

    def follow(self, follower: str, source: str, copy_limit: int = 100) -> bool:
        """``follower`` receives what is added to ``source`` from now on, and its newest
        ``copy_limit`` activities now. Returns False when it already followed."""
        return bool(self.follow_many([(follower, source)], copy_limit=copy_limit))

    def follow_many(
        self, pairs: Iterable[tuple[str, str]], copy_limit: int = 100
    ) -> list[tuple[str, str]]:
        """Several follows in one transaction; returns the pairs that were new."""
        checked = [self._follow_pair(p) for p in pairs]
        if len(checked) > MAX_FOLLOW_BATCH:
            raise ValidationError(
                f"{len(checked)} follows in one batch; the limit is {MAX_FOLLOW_BATCH}"
            )
        if not isinstance(copy_limit, int) or not 0 <= copy_limit <= MAX_COPY_LIMIT:
            raise ValidationError(
                f"must be an integer from 0 to {MAX_COPY_LIMIT}", field="copy_limit"
            )
        created = self.canonical.follow(checked, self.now_ms())
        if copy_limit:
            for follower, source in created:
                recent = self.canonical.newest_ids(source, copy_limit)
                group = follower.split(":")[0]
                if self.groups[group].grouped:
                    members = self._members(group, recent)
                    self.aggregates.add([follower], members, self.deliverer.group_cap(group))
                else:
                    self.timeline.add([follower], recent, self.deliverer.cap(group))
        return created

    def _members(self, group: str, activity_ids: Sequence[str]) -> list[Member]:
        """Those of the activities that still exist, as feeds of ``group`` hold them."""
        docs = self.canonical.get_docs(activity_ids)
        found = [Activity.from_json(docs[i]) for i in activity_ids if i in docs]
        return self.deliverer.members(group, found, self.canonical.group_keys(list(docs)))

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
        if not self.canonical.unfollow(follower, source):
            return False
        if keep_history:
            return True
        group = follower.split(":")[0]
        if self.groups[group].grouped:
            held = self.aggregates.member_ids(follower)
            came = self.canonical.ids_from(source, held, unless_to=follower)
            members = self._members(group, came)
            self.aggregates.remove([follower], members, self.deliverer.group_cap(group))
        else:
            cap = self.deliverer.cap(group)
            held = self.timeline.page(follower, limit=cap.max_length, before=None, cap=cap)
            came = self.canonical.ids_from(source, held, unless_to=follower)
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
        lookup = self.canonical.followers if kind == "followers" else self.canonical.following
        rows = lookup(feed, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        position = (rows[-1].follower if kind == "followers" else rows[-1].source) if rows else ""
        return Page(rows, self.cursors.encode(context, position) if more else None)

    def counts(self, feed: str) -> tuple[int, int]:
        """``(followers, following)`` of a feed."""
        return self.canonical.counts(self._feed(feed))

    # -- reading ------------------------------------------------------------

    def read(self, feed: str, limit: int = 25, cursor: str | None = None) -> Page[Activity]:
        """A page of ``feed``, newest first; pass ``next`` back as ``cursor`` for the next."""
        page = self.read_json(feed, limit, cursor)
        return Page([Activity.from_json(doc) for doc in page.results], page.next)

    def read_json(self, feed: str, limit: int = 25, cursor: str | None = None) -> Page[bytes]:
        """:meth:`read`, with each activity as its stored JSON (the API's shape).

        The HTTP service splices these bytes into its response instead of
        parsing and re-serialising every activity of every page.
        """
        read = self._feed_read(feed, limit, cursor)
        while not read.done:
            page, docs = self.timeline.page_docs(
                feed, limit=read.ask, before=read.before, cap=read.cap
            )
            shown = read.cut(page)
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
            return self.read_json(feed, limit, cursor)
        read = self._feed_read(feed, limit, cursor)
        while not read.done:
            page, docs = await pages(feed, limit=read.ask, before=read.before, cap=read.cap)
            shown = read.cut(page)
            if [i for i in shown if i not in docs]:
                # Rare (the page script brings the cached activities along) and a
                # blocking cache or SQL lookup: off the loop.
                docs = await asyncio.to_thread(self._hydrate, shown, docs)
            gone = read.take(shown, docs)
            if gone:
                await asyncio.to_thread(self.timeline.remove, [feed], gone, read.cap)
        return read.page(self.cursors)

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
            return GroupPage(results, next_cursor)
        unseen, unread = page.unseen, page.unread
        if mark_seen or mark_read:
            self.aggregates.mark(feed, [g.key for g in shown], read=mark_read)
            unseen -= sum(not g.is_seen for g in shown)
            if mark_read:
                unread -= sum(not g.is_read for g in shown)
        return GroupPage(results, next_cursor, unseen, unread)

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
            if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
                raise ValidationError("must be a list of group keys", field="groups")
            if len(groups) > MAX_MARK_GROUPS:
                raise ValidationError(
                    f"has {len(groups)} groups; the limit is {MAX_MARK_GROUPS}", field="groups"
                )
            groups = [g for g in groups if len(g) <= MAX_GROUP_KEY_LENGTH]
        self.aggregates.mark(feed, groups, read=read)

    def _hydrate(self, activity_ids: Sequence[str], docs: dict[str, bytes]) -> dict[str, bytes]:
        """``docs`` completed for ``activity_ids``: cache, then canonical store."""
        misses = [i for i in activity_ids if i not in docs]
        if misses:
            docs.update(self.cache.get_many(misses))
            misses = [i for i in misses if i not in docs]
        if misses:
            found = self.canonical.get_docs(misses)
            if found:
                self.cache.put_many(found)
                docs.update(found)
        return docs

    # -- delivery -----------------------------------------------------------

    def drain(self) -> int:
        """Carry out every pending delivery in this thread; returns rows done."""
        return self.deliverer.run_pending()

    def pending_deliveries(self) -> int:
        return self.canonical.pending()


class _FeedRead:
    """One page of a flat feed across its store round trips; the sync and async
    reads differ only in how they wait for the store.

    Ids whose activity is gone are skipped (and returned by :meth:`take` for
    lazy cleanup); when a page comes up short for that, the next round trip
    continues after it.
    """

    __slots__ = ("before", "cap", "context", "done", "last", "limit", "more", "results")

    def __init__(self, context: str, cap: Cap, limit: int, before: str | None) -> None:
        self.context, self.cap, self.limit, self.before = context, cap, limit, before
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
        return Page(self.results, cursors.encode(self.context, self.last) if more else None)


def _check_limit(limit: object) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValidationError(f"must be an integer from 1 to {MAX_PAGE_SIZE}", field="limit")
