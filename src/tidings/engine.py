"""The engine: the facade every entry point (library, CLI, HTTP) calls.

It keeps the verbs a user reaches for every day (publish, follow, read) and
hands out the services (:mod:`tidings.services`) as attributes:
``feeds.activities``, ``feeds.reactions``, ``feeds.users``, ``feeds.objects``,
``feeds.rules``, ``feeds.access``, ``feeds.reads``, ``feeds.live`` and
``feeds.admin``. Parts are built by :func:`tidings.wiring.build` and
connected by :func:`tidings.wiring.assemble`; nothing is assembled here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Unpack

from tidings.core.activity import Activity, NewActivity
from tidings.core.aggregation import AggregatePage
from tidings.core.clock import Clock
from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.results import Follow, FollowList, Page
from tidings.services.reads import ReadOptions
from tidings.settings import Settings
from tidings.stores.base import ActivityCache, AggregateStore, TimelineStore
from tidings.wiring import Parts, TaskRunnerChoice, assemble, build
from tidings.writes.activities import ActivityRef

__all__ = ["ActivityRef", "ReadOptions", "TaskRunnerChoice", "Tidings"]


class Tidings:
    """Activity feeds over a canonical SQL store and a timeline store.

    ``task_runner`` picks who delivers: ``thread`` (background threads),
    ``process`` (a child process built from ``settings``), ``celery``
    (dispatched to ``tidings worker`` processes), ``sync``
    (delivered before ``add_activity`` returns) or ``manual`` (call
    ``feeds.admin.drain()``). Left out, it is the ``task_runner`` setting.

    Constructed so, the engine builds its parts from ``settings`` (parts
    given are used as they are) and starts; :meth:`from_parts` takes parts
    built elsewhere and starts on :meth:`start` (or ``with``).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        timeline: TimelineStore | None = None,
        aggregates: AggregateStore | None = None,
        cache: ActivityCache | None = None,
        redis_client: Any = None,
        task_runner: TaskRunnerChoice | None = None,
        clock: Clock | Callable[[], datetime] | None = None,
    ) -> None:
        config = settings or Settings.load()
        parts = build(
            config,
            timeline=timeline,
            aggregates=aggregates,
            cache=cache,
            redis_client=redis_client,
            task_runner=task_runner,
            clock=clock,
            engine_factory=lambda: Tidings(config, task_runner="manual"),
        )
        self._hold(parts)
        try:
            self.start()
        except BaseException:
            # (A runner that could not start its process): nothing left open.
            self.close()
            raise

    @classmethod
    def from_parts(cls, parts: Parts) -> Tidings:
        """An engine on ``parts`` (see :func:`tidings.wiring.build`), not started."""
        engine = cls.__new__(cls)
        engine._hold(parts)
        return engine

    def _hold(self, parts: Parts) -> None:
        services = assemble(parts)
        self.parts = parts
        self.settings = parts.settings
        self.feed_groups: Mapping[str, FeedGroup] = parts.settings.groups
        #: The time every part reads; tests move it with ``feeds.clock.now = …``.
        self.clock: Clock = parts.clock
        # The parts, for tests and benches that look inside.
        self.db, self.canonical = parts.db, parts.canonical
        self.timeline, self.aggregates, self.cache = parts.timeline, parts.aggregates, parts.cache
        self.cursors, self.deliverer, self.task_runner, self.bus = (
            parts.cursors,
            parts.deliverer,
            parts.task_runner,
            parts.bus,
        )
        self.activities = services.activities
        self.reads = services.reads
        self.access = services.access
        self.reactions = services.reactions
        self.users = services.users
        self.objects = services.objects
        self.rules = services.rules
        self.live = services.live
        self.admin = services.admin
        self._publishing = services.publishing
        self._follows = services.follows
        self._gate = services.gate
        self._started = self._closed = False

    def start(self) -> None:
        """Start the task runner and the thread that records reads (once; later calls
        do nothing)."""
        if self._started:
            return
        self._started = True
        self.task_runner.start()
        self._gate.start()

    def __enter__(self) -> Tidings:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the threads (recording the last reads), then close the parts."""
        if self._closed:
            return
        self._closed = True
        self._gate.stop()
        self._publishing.commits.close()
        self.parts.close()

    def check_feed(self, feed: str) -> None:
        """Raise InvalidFeedId / UnknownFeedGroup unless ``feed`` is a valid, configured feed id."""
        parse_feed_id(feed, self.feed_groups)

    # -- activities ---------------------------------------------------------

    def add_activity(self, feed: str, activity: NewActivity | Mapping[str, Any]) -> Activity:
        """Publish an activity to ``feed``; its followers and ``to`` feeds receive it.

        With a ``foreign_id`` already used in ``feed`` this returns the stored
        activity and changes nothing (``feeds.activities.publish`` says which).
        """
        return self._publishing.publish(feed, activity)[0]

    def add_activities(
        self, feed: str, activities: Sequence[NewActivity | Mapping[str, Any]]
    ) -> list[Activity]:
        """Publish several activities to ``feed`` in one transaction: all are
        validated first, and all are stored or none (a repeated ``foreign_id``
        returns the activity stored first)."""
        return [stored for stored, _ in self._publishing.publish_many(feed, activities)]

    def get_activity(self, ref: ActivityRef) -> Activity:
        """An activity by id, or by ``(feed, foreign_id)``."""
        return self._publishing.get(ref)

    def update_activity(
        self,
        ref: ActivityRef,
        *,
        set: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
        paths: bool = False,
    ) -> Activity:
        """Set and unset keys of ``extra``; every feed holding the activity shows the change.

        With ``paths``, keys are dotted paths into nested objects
        (:mod:`tidings.core.dotted`): ``"product.price"`` changes one key of
        ``product`` and keeps the others."""
        return self._publishing.update(ref, set, unset, paths)

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
        return self._publishing.remove(feed, activity_id, foreign_id)

    def settle(self) -> None:
        """Wait until this process's publishes have made their writes after
        the commit (own feed, cache, counts). With write-behind (the thread
        and process runners on Redis) a publish returns before Redis has
        answered them: reads of this process wait for them anyway, another
        process sees them a round trip later. Call this before telling
        another process to read (the HTTP service does before answering)."""
        self.parts.sender.settle()

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
        Follows between users who block one another are refused (Blocked).
        """
        return self._follows.follow_many(pairs, copy_limit)

    def unfollow(self, follower: str, source: str, keep_history: bool = False) -> bool:
        """Stop following; unless ``keep_history``, remove what came through the follow."""
        return self._follows.unfollow(follower, source, keep_history)

    def followers(self, source: str, *, cursor: str | None = None, limit: int = 25) -> Page[Follow]:
        """The feeds following ``source``, a page at a time."""
        return self._follows.page(FollowList.FOLLOWERS, source, cursor, limit)

    def following(self, feed: str, *, cursor: str | None = None, limit: int = 25) -> Page[Follow]:
        """The feeds ``feed`` follows, a page at a time."""
        return self._follows.page(FollowList.FOLLOWING, feed, cursor, limit)

    def counts(self, feed: str) -> tuple[int, int]:
        """``(followers, following)`` of a feed."""
        self.check_feed(feed)
        return self.canonical.follows.counts(feed)

    # -- reading ------------------------------------------------------------

    def read(
        self, feed: str, limit: int = 25, cursor: str | None = None, **options: Unpack[ReadOptions]
    ) -> Page[Activity]:
        """A page of ``feed``; pass ``next`` back as ``cursor`` for the next.

        Flat feeds come newest first; ranked feeds in the order of their
        group's ``ranking``, each activity's ``score`` in ``extras``.
        ``options`` (:class:`~tidings.services.reads.ReadOptions`): the
        reactions, enrichment and score explanations a page carries.
        """
        return self.reads.read(feed, limit, cursor, **options)

    def read_aggregates(
        self,
        feed: str,
        limit: int = 25,
        cursor: str | None = None,
        *,
        mark_seen: bool = False,
        mark_read: bool = False,
    ) -> AggregatePage:
        """A page of an aggregated or notification feed: aggregates, newest first.

        ``mark_seen`` / ``mark_read`` mark the returned aggregates after reading
        them (the aggregates show their state from before; the feed's counts,
        from after).
        """
        return self.reads.read_aggregates(
            feed, limit, cursor, mark_seen=mark_seen, mark_read=mark_read
        )

    def mark_seen(self, feed: str, aggregates: Sequence[str] | None = None) -> None:
        """Mark aggregates of a notification feed seen (``aggregates=None``: all of them)."""
        self.reads.mark_seen(feed, aggregates)

    def mark_read(self, feed: str, aggregates: Sequence[str] | None = None) -> None:
        """Mark aggregates of a notification feed read, and so seen (``None``: all)."""
        self.reads.mark_read(feed, aggregates)

    def notification_counts(self, feed: str) -> tuple[int, int]:
        """``(unseen, unread)`` aggregates of a notification feed (those its owner's
        rules hide whole are not counted)."""
        return self.reads.notification_counts(feed)
