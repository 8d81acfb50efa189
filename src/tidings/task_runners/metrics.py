"""The deliveries' Prometheus series, shared by every process of a deployment
on one host through a metrics directory.

prometheus_client's multiprocess mode keeps each process's values in files
of a directory (``PROMETHEUS_MULTIPROC_DIR``), and a collector reading the
directory reports the sum of every process. ``tidings serve`` makes one per
server for its workers; with the ``metrics_dir`` setting, the server and the
``tidings worker`` processes of the host all write to that one, so a scrape
of the server's ``/metrics`` also reports the deliveries the Celery workers
carried out (:class:`TaskMetrics`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum

from prometheus_client import CollectorRegistry, Counter, Histogram, values

from tidings.core.errors import ConfigurationError

__all__ = ["ENV", "TaskMetrics", "TaskName", "deliveries_done", "share"]

#: prometheus_client's switch: where processes keep their values.
ENV = "PROMETHEUS_MULTIPROC_DIR"
#: From a small batch (a few ms) to a part of a 100,000-follower fan-out.
TASK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class TaskName(StrEnum):
    """The delivery tasks, as the ``task`` label names them."""

    #: Small deliveries, several outbox rows at once.
    BATCH = "batch"
    #: One part of a big delivery's followers.
    PART = "part"


def share(path: str) -> None:
    """Keep this process's series, and those of the processes it starts, in
    files of ``path`` (made if missing), from now on.

    prometheus_client picks where values live when it is first imported;
    whatever imported it before this call, series made after it are kept in
    ``path``.
    """
    os.makedirs(path, exist_ok=True)
    os.environ[ENV] = path
    # prometheus_client has no call for this: its value class is chosen from
    # the environment once, at import, and read again for each series made.
    values.ValueClass = values.get_value_class()


def deliveries_done(registry: CollectorRegistry | None) -> Counter:
    """Outbox rows carried out: one series for the server's own runners and
    the Celery workers sharing its directory, so a scrape adds them up."""
    return Counter(
        "tidings_deliveries_done",
        "Outbox rows carried out by the delivery runners of the processes sharing these "
        "metrics: the server's workers, and Celery workers writing to its metrics_dir.",
        registry=registry,
    )


class TaskMetrics:
    """The delivery tasks of a ``tidings worker``'s processes, counted in the
    shared directory (:func:`share` first): each attempt's outcome and time,
    the retries, and the outbox rows they completed."""

    def __init__(self) -> None:
        if values.ValueClass is values.MutexValue:
            raise ConfigurationError(
                "a worker's metrics need a metrics directory (metrics_dir) shared with "
                "tidings serve; without it they would be counted where no scrape sees them"
            )
        # Not registered anywhere: in a shared directory the files are what a
        # scrape reads, whichever process answers it.
        self.deliveries = deliveries_done(None)
        self.attempts = Counter(
            "tidings_delivery_tasks",
            "Delivery task attempts by task (batch, part) and outcome: done, or failed "
            "(retried later with backoff: its writes are idempotent).",
            ["task", "outcome"],
            registry=None,
        )
        self.retries = Counter(
            "tidings_delivery_task_retries",
            "Delivery task attempts that retried a failed one, by task.",
            ["task"],
            registry=None,
        )
        self.seconds = Histogram(
            "tidings_delivery_task_seconds",
            "Time a delivery task attempt took, done or failed, by task.",
            ["task"],
            buckets=TASK_BUCKETS,
            registry=None,
        )
        self._lock = threading.Lock()
        #: The process whose completed count ``_counted`` is (pool processes
        #: are forked from the worker's main process, this object with them).
        self._pid = os.getpid()
        self._counted = 0

    @contextmanager
    def task(self, name: TaskName, retries: int, completed: Callable[[], int]) -> Iterator[None]:
        """Time and count the attempt run inside; ``retries`` is how many
        failed before it, ``completed`` the rows this process's deliverer has
        completed in all (read after the attempt)."""
        if retries:
            self.retries.labels(name).inc()
        started = time.perf_counter()
        try:
            yield
        except BaseException:
            self.attempts.labels(name, "failed").inc()
            raise
        else:
            self.attempts.labels(name, "done").inc()
        finally:
            self.seconds.labels(name).observe(time.perf_counter() - started)
            self._count(completed)

    def _count(self, completed: Callable[[], int]) -> None:
        try:
            done = completed()
        except Exception:  # no engine could be made: the attempt's own error says why
            return
        with self._lock:
            if self._pid != os.getpid() or done < self._counted:
                # Forked since, or another engine: its count starts afresh.
                self._pid, self._counted = os.getpid(), 0
            if done > self._counted:
                self.deliveries.inc(done - self._counted)
                self._counted = done
