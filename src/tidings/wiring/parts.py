"""Building an engine's parts from :class:`Settings`.

The one place that picks implementations: the database (migrated on the
way), the timeline and aggregate stores and activity cache the ``store``
setting names, the task runner ``task_runner`` names. Optional drivers are imported
here only, when chosen, and a missing one says what to install.

Nothing is started here: the engine starts the runner (and its own
threads) in :meth:`tidings.Tidings.start`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from tidings.bus.base import Bus
from tidings.bus.memory import MemoryBus
from tidings.canonical.counts import CountsCache
from tidings.canonical.db import Database
from tidings.canonical.store import CanonicalStore
from tidings.core.clock import Clock, real_monotonic, utc_now
from tidings.core.cursor import CursorCodec
from tidings.core.errors import ConfigurationError
from tidings.core.extras import needs
from tidings.core.fanout import OutboxKind
from tidings.core.hooks import Hook
from tidings.delivery.copies import Copied
from tidings.delivery.deliverer import Deliverer
from tidings.delivery.planner import Changes, Written
from tidings.settings import Settings, StoreName
from tidings.stores.base import (
    ActivityCache,
    AggregateStore,
    NoCache,
    Sender,
    SendNow,
    SnapshotStore,
    TimelineStore,
    no_call,
)
from tidings.task_runners import ManualRunner, SyncRunner, TaskRunner, ThreadRunner
from tidings.task_runners.base import EngineFactory

#: Who carries out deliveries: ``thread`` (background threads), ``process``
#: (a child process of this one), ``celery`` (``tidings worker`` processes),
#: ``sync`` (before ``add_activity`` returns) or ``manual`` (``Tidings.drain()``).
TaskRunnerChoice = Literal["thread", "process", "celery", "sync", "manual"]

#: Used to sign cursors when no secret is configured: cursors are then
#: tamper-evident but not secret, which is all pagination needs.
_DEFAULT_CURSOR_KEY = b"tidings-cursor-v1"


@dataclass(frozen=True)
class Parts:
    """What an engine runs on, built and not yet started."""

    settings: Settings
    clock: Clock
    db: Database
    canonical: CanonicalStore
    timeline: TimelineStore
    aggregates: AggregateStore
    cache: ActivityCache
    cursors: CursorCodec
    deliverer: Deliverer
    task_runner: TaskRunner
    #: Carries live events (:mod:`tidings.bus`).
    bus: Bus
    #: Told what each delivery wrote (the planner's ``Changes``); wiring
    #: connects the live events to it.
    written: Hook[[OutboxKind, Sequence[Written]]]
    #: Told what each copy of history wrote, by feed (it sends no event).
    copied: Hook[[Mapping[str, Sequence[str]]]]
    #: Frozen orders of ranked pages (:mod:`tidings.reading.ranked`).
    snapshots: SnapshotStore
    #: Makes a publish's writes after its commit: at once, or without waiting
    #: for Redis (:mod:`tidings.stores.redis.behind`).
    sender: Sender = field(default_factory=SendNow)
    #: Closes what was opened for the stores here (a Redis client), after them.
    disconnect: Callable[[], None] = no_call

    def close(self) -> None:
        """Let the publishes' writes finish and stop the runner, then close the
        stores and the database (a runner mid-delivery still writes to them)."""
        self.sender.settle()
        self.task_runner.stop()
        self.bus.close()
        self.timeline.close()
        self.aggregates.close()
        self.disconnect()
        self.db.close()


def build(
    settings: Settings,
    *,
    timeline: TimelineStore | None = None,
    aggregates: AggregateStore | None = None,
    cache: ActivityCache | None = None,
    redis_client: Any = None,
    task_runner: TaskRunnerChoice | None = None,
    clock: Clock | Callable[[], datetime] | None = None,
    engine_factory: EngineFactory | None = None,
) -> Parts:
    """The parts for ``settings``; those given are used as they are.

    ``redis_client`` is used for the Redis stores instead of one made from
    ``redis_url`` (and is not closed with the parts). ``engine_factory``
    builds the engine a Celery worker delivers with; the celery runner needs it.
    ``clock`` is what every part reads the time from: a :class:`Clock`, or
    its ``now`` alone (the real clock by default).
    """
    mode = task_runner or settings.task_runner
    if mode == "process":
        _check_process(settings, timeline, aggregates, cache, redis_client, clock)
    db = _database(settings)
    the_clock = clock if isinstance(clock, Clock) else Clock(clock or utc_now)
    stores = _StoreChoice(settings, db, redis_client)
    timeline, aggregates, cache = stores.build(timeline, aggregates, cache)
    canonical = _canonical(settings, db, stores.counts_cache(), the_clock)
    bus = stores.bus(the_clock)
    written: Hook[[OutboxKind, Sequence[Written]]] = Hook("deliveries written")
    copied: Hook[[Mapping[str, Sequence[str]]]] = Hook("history copied")
    deliverer = _deliverer(
        settings, (canonical, timeline, aggregates), the_clock, bus, written, copied
    )
    return Parts(
        settings=settings,
        clock=the_clock,
        db=db,
        canonical=canonical,
        timeline=timeline,
        aggregates=aggregates,
        cache=cache,
        cursors=_cursors(settings),
        deliverer=deliverer,
        task_runner=make_task_runner(
            settings, deliverer, mode, engine_factory, the_clock.monotonic
        ),
        bus=bus,
        written=written,
        copied=copied,
        snapshots=stores.snapshots(the_clock.ms),
        sender=stores.sender(mode),
        disconnect=stores.disconnect,
    )


def _deliverer(
    settings: Settings,
    stores: tuple[CanonicalStore, TimelineStore, AggregateStore],
    clock: Clock,
    bus: Bus,
    written: Changes,
    copied: Copied,
) -> Deliverer:
    """The deliverer, telling ``written`` what each delivery wrote and
    ``copied`` what each copy of history did (the live events listen)."""
    canonical, timeline, aggregates = stores
    return Deliverer(
        canonical,
        timeline,
        settings.groups,
        aggregates=aggregates,
        chunk_size=settings.delivery_chunk_size,
        now_ms=clock.ms,
        pull_grace_ms=int(settings.pull_grace_seconds * 1000),
        changes=written,
        watched=bus.subscribed,  # big deliveries write the feeds open here first
        copied=copied,
    )


def _database(settings: Settings) -> Database:
    """The canonical database, migrated to this code's schema."""
    db = Database(
        settings.database_url,
        sqlite_synchronous=settings.sqlite_synchronous,
        sqlite_cache_mb=settings.sqlite_cache_mb,
        postgres_pool_size=settings.postgres_pool_size,
        postgres_partitions=settings.postgres_partitions,
    )
    db.migrate()
    return db


def _canonical(
    settings: Settings, db: Database, counts_cache: CountsCache | None, clock: Clock
) -> CanonicalStore:
    return CanonicalStore(
        db,
        latest_reactions=settings.latest_reactions,
        counts_cache=counts_cache,
        monotonic=clock.monotonic,
    )


def _cursors(settings: Settings) -> CursorCodec:
    secret = settings.secret
    return CursorCodec(secret.encode() if secret else _DEFAULT_CURSOR_KEY)


def make_task_runner(
    settings: Settings,
    deliverer: Deliverer,
    task_runner: TaskRunnerChoice,
    engine_factory: EngineFactory | None = None,
    monotonic: Callable[[], float] = real_monotonic,
) -> TaskRunner:
    """The task runner ``task_runner`` names, not started; ``monotonic`` times
    its passes (the thread runner) and its child's life (the process runner)."""
    if task_runner == "thread":
        linger_ms = settings.delivery_linger_ms
        return ThreadRunner(
            deliverer,
            threads=settings.delivery_threads,
            max_linger_seconds=None if linger_ms is None else linger_ms / 1000,
            monotonic=monotonic,
        )
    if task_runner == "process":
        from tidings.task_runners.process import ProcessRunner  # no driver: the child imports them

        return ProcessRunner(settings, deliverer.direct, monotonic)
    if task_runner == "sync":
        return SyncRunner(deliverer)
    if task_runner == "manual":
        return ManualRunner()
    with needs("celery", "the celery task runner"):
        from tidings.task_runners.celery import CeleryRunner
    if engine_factory is None:
        raise ConfigurationError("the celery task runner needs an engine factory for its workers")
    return CeleryRunner.for_settings(deliverer, settings, engine_factory)


def _check_process(settings: Settings, *given: object) -> None:
    """Raise unless a child process can deliver as this engine would: it is
    built from ``settings`` alone."""
    from tidings.task_runners.process import check_settings

    if any(part is not None for part in given):
        raise ConfigurationError(
            "the process task runner builds its child's engine from the settings alone: "
            "stores, a Redis client or a clock given to this one would not reach it"
        )
    check_settings(settings)


class _StoreChoice:
    """The timeline store, aggregate store and activity cache ``settings.store`` names."""

    def __init__(self, settings: Settings, db: Database, redis_client: Any) -> None:
        self.settings = settings
        self.db = db
        self.client = redis_client
        #: Closes a Redis client made here (one handed in is its owner's to close).
        self.disconnect: Callable[[], None] = no_call

    def build(
        self,
        timeline: TimelineStore | None,
        aggregates: AggregateStore | None,
        cache: ActivityCache | None,
    ) -> tuple[TimelineStore, AggregateStore, ActivityCache]:
        if timeline is not None and aggregates is not None:
            return timeline, aggregates, cache or NoCache()
        store = self.settings.store
        if store == StoreName.MEMORY:
            from tidings.stores.memory import MemoryAggregateStore, MemoryTimelineStore

            return (
                timeline or MemoryTimelineStore(),
                aggregates or MemoryAggregateStore(),
                cache or NoCache(),
            )
        if store == StoreName.SQL:
            from tidings.stores.sql import SqlAggregateStore, SqlTimelineStore

            return (
                timeline or SqlTimelineStore(self.db),
                aggregates or SqlAggregateStore(self.db),
                cache or NoCache(),
            )
        return self._redis(timeline, aggregates, cache)

    def counts_cache(self) -> CountsCache | None:
        """Feed counts cached in Redis when the Redis store is in use (after
        :meth:`build`, which connects)."""
        if self.settings.store == StoreName.REDIS and self.client is not None:
            from tidings.stores.redis.counts import RedisCountsCache

            return RedisCountsCache(self.client, self.settings.namespace)
        return None

    def snapshots(self, now_ms: Callable[[], int]) -> SnapshotStore:
        """Where the timeline store is: this process, the database or Redis."""
        store = self.settings.store
        if store == StoreName.MEMORY:
            from tidings.stores.memory import MemorySnapshotStore

            return MemorySnapshotStore(now_ms)
        if store == StoreName.SQL or self.client is None:
            from tidings.stores.sql import SqlSnapshotStore

            return SqlSnapshotStore(self.db, now_ms)
        from tidings.stores.redis.snapshots import RedisSnapshotStore

        return RedisSnapshotStore(self.client, self.settings.namespace)

    def sender(self, mode: TaskRunnerChoice) -> Sender:
        """Write-behind (:mod:`tidings.stores.redis.behind`) where a publish's
        writes go to a Redis client of ``connect()`` (its pool can send them
        behind; a client handed in with a plain pool cannot) and a runner of this process
        (thread, or its delivery process) is told once they are done; at once
        otherwise: the sync runner delivers in the publishing call, a manual
        runner's app drains when it chooses, and Celery's producer is left
        to the threads that use it now. Without a Redis client (the embedded
        default) there is nothing to send behind, and the Redis driver, which
        a package-only install lacks, is not imported."""
        if self.client is None or mode not in ("thread", "process"):
            return SendNow()
        from tidings.stores.redis.behind import BehindPool

        pool = getattr(self.client, "connection_pool", None)
        return pool.behind if isinstance(pool, BehindPool) else SendNow()

    def bus(self, clock: Clock) -> Bus:
        """Redis streams when ``redis_url`` is set (whatever stores), else in-process.
        The in-process bus keeps time by ``clock``; Redis streams by the wall
        time Redis and every other process share (their ids, the watched
        set), and only their waits by ``clock``."""
        retention_ms = int(self.settings.events_retention_seconds * 1000)
        if not self.settings.redis_url and self.client is None:
            return MemoryBus(retention_ms, now_ms=clock.ms, monotonic=clock.monotonic)
        from tidings.bus.redis import RedisBus

        return RedisBus(
            self._client(), self.settings.namespace, retention_ms, monotonic=clock.monotonic
        )

    def _client(self) -> Any:
        """The Redis client handed in, or one made (once) from ``redis_url``."""
        if self.client is None:
            if not self.settings.redis_url:
                raise ConfigurationError("the redis timeline store needs TIDINGS_REDIS_URL")
            with needs("redis", "TIDINGS_REDIS_URL (live events and the Redis stores)"):
                from tidings.stores.redis.transport import connect, disconnect
            client = self.client = connect(self.settings.redis_url)
            self.disconnect = lambda: disconnect(client)
        return self.client

    def _redis(
        self,
        timeline: TimelineStore | None,
        aggregates: AggregateStore | None,
        cache: ActivityCache | None,
    ) -> tuple[TimelineStore, AggregateStore, ActivityCache]:
        with needs("redis", "the Redis store"):
            from tidings.stores.redis import (
                RedisActivityCache,
                RedisAggregateStore,
                RedisTimelineStore,
            )
        client = self._client()
        ns = self.settings.namespace
        return (
            timeline or RedisTimelineStore(client, ns),
            aggregates or RedisAggregateStore(client, ns),
            cache
            or RedisActivityCache(client, ns, ttl_seconds=self.settings.activity_cache_seconds),
        )
