"""The Celery runner: deliveries carried out by ``tidings worker`` processes.

The outbox stays the source of truth. A dispatcher claims a row (a lease),
writes its direct targets, records its followers as parts of
``delivery_chunk_size`` (``tidings_outbox_parts``) and sends one task a part,
with JSON arguments ``[row id, after, last, tier]``. Parts of followers who
read recently go to the ``tidings.high`` queue, the others to
``tidings.low``; idle followers are not delivered to at all. A task delivers its part with
idempotent store writes, marks it done, and the last part completes the row.
Parts are coarse on purpose: Celery runs hundreds of tasks a second, not the
hundreds of thousands of feeds a second a fan-out writes. For the same
reason, deliveries of small sources (the everyday case: most activities
reach a few dozen feeds) are not split at all: the dispatcher sends them as
batches, ``[[row id, claim token], ...]`` a task, each about
:data:`tidings.delivery.batch.BATCH_ENTRIES` entries, on the high queue; the
worker reads their followers and writes the whole batch at once.

Nothing is lost: a row whose parts are not all done when its lease lapses is
dispatched again (undone parts only), wherever a dispatcher runs: in the
publishing process (:class:`CeleryRunner`) and in every worker. Nothing is
duplicated: parts run twice write the same entries. Tasks are acknowledged
late, so a part a killed worker held is also redelivered by the broker
(after its visibility timeout, for Redis).

Everything Celery-specific is here; ``celery`` is imported by this module
only, and only when the celery runner is chosen. It never imports the
engine: workers get an engine factory (:class:`tidings.task_runners.base.WorkerEngine`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

from celery import Celery, bootsteps
from tidings.canonical.rows import OutboxRow, Part
from tidings.core.errors import ConfigurationError
from tidings.core.readers import PartTier
from tidings.delivery.deliverer import Deliverer
from tidings.settings import Settings
from tidings.task_runners.base import QUEUES, EngineFactory, WorkerEngine
from tidings.task_runners.metrics import TaskMetrics, TaskName, share

log = logging.getLogger("tidings.celery")

TASK = "tidings.deliver_part"
#: Small deliveries, several at once: ``[[row id, claim token], ...]``.
BATCH_TASK = "tidings.deliver_batch"
#: Re-classifies sources between push and pull fan-out (``Tidings.reclassify``);
#: schedule it with Celery beat, e.g. every five minutes.
RECLASSIFY_TASK = "tidings.reclassify"
#: Publishing gives up quickly when the broker is down: the row is released
#: and dispatched again on the next poll, so waiting longer buys nothing.
_SEND_RETRY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}


#: Delivery tasks: retried with backoff until they succeed (their writes are
#: idempotent), acknowledged only once done. shared=False: a shared task
#: would also be registered with every app made later in this process (a
#: second make_app, e.g. in tests), under the same name.
_DELIVERY_TASK: dict[str, Any] = {
    "shared": False,
    "autoretry_for": (Exception,),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "max_retries": None,
    "acks_late": True,
}


def make_app(
    settings: Settings, engine_factory: EngineFactory, metrics: TaskMetrics | None = None
) -> Any:
    """A Celery app for ``settings``: JSON only, late acks, retries with backoff.

    ``engine_factory`` builds the engine tasks run with, in each worker process
    that runs one (a publishing process only sends tasks and never calls it);
    ``metrics``, when given, counts and times every task attempt.
    """
    broker = settings.celery_broker
    if not broker:
        raise ConfigurationError("the celery task runner needs TIDINGS_BROKER_URL (or REDIS_URL)")
    app = Celery("tidings", broker=broker, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],  # never pickle
        task_ignore_result=True,
        task_default_queue=QUEUES[PartTier.HIGH],
        task_acks_late=True,
        # A task whose worker process died is requeued, not acknowledged.
        task_reject_on_worker_lost=True,
        # Parts are big: a worker holding several would hold them back from others.
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    if broker.startswith(("redis://", "rediss://")):
        # Consume the queues in the order given (high first) rather than in
        # turn. AMQP brokers have no such option: give them workers of their own
        # for the high queue (``tidings worker --queues tidings.high``).
        app.conf.broker_transport_options = {"queue_order_strategy": "priority"}
    engines = _ProcessEngine(engine_factory)
    attempt = _Attempts(engines, metrics)

    @app.task(name=TASK, bind=True, **_DELIVERY_TASK)  # type: ignore[untyped-decorator]
    def deliver_part(
        task: Any, row_id: int, after: str, last: str | None, tier: str = PartTier.ALL
    ) -> None:
        part = Part(row_id, after, last, PartTier(tier))
        with attempt(TaskName.PART, task.request.retries):
            engines.get().deliverer.distributed.run_part(part)

    @app.task(name=BATCH_TASK, bind=True, **_DELIVERY_TASK)  # type: ignore[untyped-decorator]
    def deliver_batch(task: Any, rows: list[list[int]]) -> None:
        with attempt(TaskName.BATCH, task.request.retries):
            engines.get().deliverer.distributed.run_batch([(r, token) for r, token in rows])

    @app.task(name=RECLASSIFY_TASK, shared=False)  # type: ignore[untyped-decorator]
    def reclassify() -> list[list[str]]:
        # Idempotent, and a run cut short is finished by the next: an overlap
        # of two scheduled runs changes nothing. Sorts readers into tiers too.
        engine = engines.get()
        engine.admin.sweep_readers()
        return [list(change) for change in engine.admin.reclassify()]

    app.steps["worker"].add(_dispatcher_step(settings, engines))
    return app


class _ProcessEngine:
    """One engine per process, made on first use: prefork children must not
    share the parent's database and Redis connections."""

    def __init__(self, factory: EngineFactory) -> None:
        self.factory = factory
        self._engine: WorkerEngine | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def get(self) -> WorkerEngine:
        with self._lock:
            if self._engine is None or self._pid != os.getpid():
                self._engine = self.factory()
                self._pid = os.getpid()
            return self._engine

    def close(self) -> None:
        with self._lock:
            if self._engine is not None and self._pid == os.getpid():
                self._engine.close()
            self._engine = None


class _Attempts:
    """Each task attempt counted in ``metrics`` (when there are any)."""

    def __init__(self, engines: _ProcessEngine, metrics: TaskMetrics | None) -> None:
        self.engines = engines
        self.metrics = metrics

    def __call__(self, name: TaskName, retries: int) -> AbstractContextManager[None]:
        if self.metrics is None:
            return nullcontext()
        return self.metrics.task(name, retries, self._completed)

    def _completed(self) -> int:
        return self.engines.get().deliverer.completed


class CeleryRunner:
    """Dispatches outbox rows to Celery from a background thread.

    ``notify`` wakes it; it also polls, for rows left by a process that died
    and rows whose lease lapsed with parts undone.
    """

    def __init__(
        self,
        deliverer: Deliverer,
        app: Any,
        *,
        redispatch_seconds: float,
        poll_seconds: float = 1.0,
    ) -> None:
        self.deliverer = deliverer
        self.app = app
        self.lease_ms = int(redispatch_seconds * 1000)
        self.poll_seconds = min(poll_seconds, redispatch_seconds)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_settings(
        cls, deliverer: Deliverer, settings: Settings, engine_factory: EngineFactory
    ) -> CeleryRunner:
        return cls(
            deliverer,
            make_app(settings, engine_factory),
            redispatch_seconds=settings.celery_redispatch_seconds,
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="tidings-dispatch", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def dispatch(self) -> int:
        """Dispatch every claimable row now, running pending regenerations between
        batches (a reader waits for each; they are short); returns the rows
        dispatched."""
        done = 0
        while True:
            self.deliverer.regenerations.run()
            claimed = self.deliverer.distributed.dispatch_pending(
                self.send, self.lease_ms, self.send_batch
            )
            if not claimed:
                return done
            done += claimed

    def send(self, parts: Sequence[Part]) -> None:
        with self.app.producer_or_acquire() as producer:
            for part in parts:
                self.app.send_task(
                    TASK,
                    args=[part.row_id, part.after, part.last, part.tier],
                    queue=QUEUES[part.tier],
                    producer=producer,
                    retry=True,
                    retry_policy=_SEND_RETRY,
                )

    def send_batch(self, rows: Sequence[OutboxRow]) -> None:
        self.app.send_task(
            BATCH_TASK,
            args=[[[row.id, row.token] for row in rows]],
            queue=QUEUES[PartTier.HIGH],
            retry=True,
            retry_policy=_SEND_RETRY,
        )

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self.poll_seconds)
            self._wake.clear()
            try:
                self.dispatch()
            except Exception:
                # Logged by the deliverer (broker down, say); the row was
                # released and is dispatched again on the next poll.
                self._stopping.wait(self.poll_seconds)


def _dispatcher_step(settings: Settings, engines: _ProcessEngine) -> type[Any]:
    """A worker bootstep running a dispatcher in the worker's main process, so
    rows left by a dead publishing process are delivered by the workers."""

    class Dispatcher(bootsteps.StartStopStep):  # type: ignore[misc]
        # After the pool: prefork children are forked before this process
        # opens any connection.
        requires: ClassVar[tuple[str, ...]] = ("celery.worker.components:Pool",)

        def __init__(self, worker: Any, **kwargs: Any) -> None:
            self.runner: CeleryRunner | None = None

        def start(self, worker: Any) -> None:
            engine = engines.get()
            self.runner = CeleryRunner(
                engine.deliverer,
                worker.app,
                redispatch_seconds=settings.celery_redispatch_seconds,
            )
            self.runner.start()

        def stop(self, worker: Any) -> None:
            if self.runner is not None:
                self.runner.stop()
                self.runner = None
            engines.close()

    return Dispatcher


def run_worker(
    settings: Settings,
    engine_factory: EngineFactory,
    *,
    concurrency: int,
    queues: Sequence[str],
) -> None:
    """Run a Celery worker (and a dispatcher) until it is told to stop; with
    ``metrics_dir`` set, its pool processes count their tasks there."""
    metrics = None
    if settings.metrics_dir:
        share(settings.metrics_dir)
        metrics = TaskMetrics()
    app = make_app(settings, engine_factory, metrics)
    # A name of its own per process: AMQP brokers refuse a second worker of
    # the same name (its control queue is exclusive), and Celery's default is
    # the same for every worker on a machine.
    name = f"tidings{os.getpid()}@{socket.gethostname()}"
    argv = [
        "worker",
        f"--concurrency={concurrency}",
        f"--queues={','.join(queues)}",
        f"--hostname={name}",
    ]
    app.worker_main([*argv, "--loglevel=INFO", "--without-gossip", "--without-mingle"])
