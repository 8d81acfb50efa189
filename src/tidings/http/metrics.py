"""The service's Prometheus metrics, kept with prometheus_client.

Under ``tidings serve --workers N`` every worker keeps its values in files
of a directory the workers share, and a scrape of any worker adds up all of
them: the figures of the whole server (:mod:`tidings.http.multiprocess`). A
process on its own keeps them in memory.

The series come three ways:

- **counted where they happen** in the process serving: requests by route
  (the template, not the URL, so feed ids do not explode the label space)
  and status, their latency, activities published, live connections open,
  and store errors (requests that a store's exception ended, and the store
  failures tidings logs in background work: deliveries, live events);
- **sampled** from the engine every :data:`SAMPLE_SECONDS` by a thread of
  each worker (and at each scrape): deliveries done, bus lag and backlog,
  which the engine counts deep inside, knowing nothing of Prometheus;
- **read at scrape time** from the canonical store, the same for every
  worker: outbox depth and the age of its oldest row (the delivery lag).
"""

from __future__ import annotations

import glob
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from tidings.core.results import Stats
from tidings.core.store_errors import store_error, unavailable
from tidings.http.multiprocess import forget_dead, shared_dir
from tidings.task_runners.metrics import deliveries_done

if TYPE_CHECKING:
    from tidings.engine import Tidings

__all__ = ["BUCKETS", "CONTENT_TYPE", "SAMPLE_SECONDS", "Metrics", "StoreErrorLog", "render_outbox"]

log = logging.getLogger("tidings.http.metrics")

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: How often each worker copies the engine's own counts into its series: a
#: scrape of another worker sees them at most this late.
SAMPLE_SECONDS = 1.0
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


class Metrics:
    """One process's series, and the text a scrape of it answers.

    In a directory shared with other processes (``shared``, by default where
    prometheus_client keeps this process's values), a scrape reports the sum
    of all of them; the series are then written to files only, and not
    registered in memory too.
    """

    def __init__(self, shared: str | None = None) -> None:
        self.shared = shared if shared is not None else shared_dir()
        self._scrape = CollectorRegistry(auto_describe=True)
        if self.shared is not None:
            self._scrape.register(_SizedFiles(self.shared))
        own = None if self.shared is not None else self._scrape
        self._counted_series(own)
        self._sampled_series(own)
        # Labelled children, looked up once: a request costs two increments.
        self._request_series: dict[tuple[str, str, int], Counter] = {}
        self._latency_series: dict[tuple[str, str], Histogram] = {}
        self._sampled_lock = threading.Lock()
        self._delivered = 0
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._errors_logged = StoreErrorLog(self)

    def _counted_series(self, own: CollectorRegistry | None) -> None:
        self.requests = Counter(
            "tidings_http_requests",
            "HTTP requests by method, route and status.",
            ["method", "route", "status"],
            registry=own,
        )
        self.latency = Histogram(
            "tidings_http_request_seconds",
            "HTTP request latency, from the request's arrival to its response's end.",
            ["method", "route"],
            buckets=BUCKETS,
            registry=own,
        )
        self.published = Counter(
            "tidings_activities_published",
            "Activities stored by publish requests (a foreign_id seen before is not counted).",
            registry=own,
        )
        self.live = Gauge(
            "tidings_live_connections",
            "Live connections open: SSE streams and WebSockets.",
            ["transport"],
            multiprocess_mode="livesum",
            registry=own,
        )
        self.store_errors = Counter(
            "tidings_store_errors",
            "Store failures, by store and the driver's exception: requests they ended, "
            "and those logged by background work (deliveries, live events).",
            ["store", "kind"],
            registry=own,
        )

    def _sampled_series(self, own: CollectorRegistry | None) -> None:
        self.deliveries = deliveries_done(own)
        # Gauges of a process's own state: how those of several processes
        # combine is chosen per meaning (live*: only running ones count).
        self.bus_lag = Gauge(
            "tidings_bus_lag_seconds",
            "Longest time, in the last 5 to 10 s, from the bus (Redis) taking an event to "
            "its hand-over to a subscriber; the largest of the processes.",
            multiprocess_mode="livemax",
            registry=own,
        )
        self.bus_backlog = Gauge(
            "tidings_bus_backlog",
            "Live events made and waiting to be sent to the bus.",
            multiprocess_mode="livesum",
            registry=own,
        )

    # -- counted where they happen ---------------------------------------------------------

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """A request answered ``status`` after ``seconds``."""
        counter = self._request_series.get((method, route, status))
        if counter is None:
            counter = self.requests.labels(method, route, str(status))
            self._request_series[(method, route, status)] = counter
        counter.inc()
        histogram = self._latency_series.get((method, route))
        if histogram is None:
            histogram = self._latency_series[(method, route)] = self.latency.labels(method, route)
        histogram.observe(seconds)

    def failed(self, exc: BaseException) -> None:
        """Count ``exc`` if a store's driver raised it (or what it wraps)."""
        found = store_error(exc)
        if found is not None:
            self.store_errors.labels(*found).inc()

    def opened(self, transport: str) -> None:
        """A live connection (``sse`` or ``websocket``) opened."""
        self.live.labels(transport).inc()

    def closed(self, transport: str) -> None:
        """A live connection :meth:`opened` counted has ended."""
        self.live.labels(transport).dec()

    # -- sampled ------------------------------------------------------------------------------

    def sample(self, engine: Tidings) -> None:
        """Copy the engine's own counts of this process into the series."""
        done = engine.admin.delivered()
        bus = engine.live.figures()
        with self._sampled_lock:
            if done < self._delivered:  # another engine (the app's lifespan made a new one)
                self._delivered = 0
            if done > self._delivered:
                self.deliveries.inc(done - self._delivered)
                self._delivered = done
            self.bus_lag.set(bus.lag_seconds)
            self.bus_backlog.set(bus.backlog)

    def start(self, engine: Tidings) -> None:
        """Sample ``engine`` every :data:`SAMPLE_SECONDS` in a thread, and count
        the store failures tidings logs, until :meth:`stop`."""
        if self._sampler is not None:
            return
        self._stop.clear()
        logging.getLogger("tidings").addHandler(self._errors_logged)
        self._sampler = threading.Thread(
            target=self._sample_loop, args=(engine,), name="tidings-metrics", daemon=True
        )
        self._sampler.start()

    def stop(self, engine: Tidings | None = None) -> None:
        """Stop sampling (sampling ``engine`` a last time); in a shared
        directory, this process's live gauges stop counting."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            self._stop.set()
            sampler.join(timeout=5)
            logging.getLogger("tidings").removeHandler(self._errors_logged)
        if engine is not None:
            self._sample_quietly(engine)
        if self.shared is not None:
            mark_process_dead(os.getpid(), self.shared)

    def _sample_loop(self, engine: Tidings) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self._sample_quietly(engine)

    def _sample_quietly(self, engine: Tidings) -> None:
        try:
            self.sample(engine)
        except Exception:  # (a closed engine): the next scrape says more
            log.debug("sampling the engine's figures failed", exc_info=True)

    # -- a scrape ------------------------------------------------------------------------------

    def render(self, engine: Tidings) -> bytes:
        """The text of a scrape: every series (of every process sharing the
        directory), and the outbox's figures read now (left out while the
        canonical store cannot be reached)."""
        self.sample(engine)
        try:
            outbox = render_outbox(engine.admin.stats())
        except Exception as exc:
            # The outbox's figures are the canonical store's: while it is out
            # of reach, the scrape still reports the rest (the store errors
            # among them), which is when an operator needs them most.
            if unavailable(exc) is None:
                raise
            self.failed(exc)
            outbox = b""
        return self.render_series() + outbox

    def render_series(self) -> bytes:
        """The text of every series (of every process sharing the directory)."""
        if self.shared is not None:
            forget_dead(self.shared)
        return generate_latest(_WithoutCreated(self._scrape))


class _SizedFiles(Collector):
    """The series of a shared directory's files, as prometheus_client's
    ``MultiProcessCollector`` merges them, leaving out a file a process is
    creating at this instant: it exists empty before it is sized
    (prometheus_client issue #1199), and reading it fails the whole scrape (a
    worker starting under a scrape made /metrics answer 500)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def collect(self) -> Iterator[Metric]:
        files = [f for f in glob.glob(os.path.join(self.path, "*.db")) if _sized(f)]
        merged: Iterable[Metric] = MultiProcessCollector.merge(files, accumulate=True)
        return iter(merged)


def _sized(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except FileNotFoundError:  # (a dead process's, removed since the listing)
        return False


class _WithoutCreated:
    """A registry's series without the ``_created`` ones prometheus_client adds
    in memory (not from shared files): one process alone or many, the same
    series, and no extra series per counter for Prometheus to keep."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


def render_outbox(stats: Stats) -> bytes:
    """The text of the canonical store's figures: outbox depth and delivery lag."""
    return generate_latest(_Outbox(stats))


class _Outbox:
    """The canonical store's figures at scrape time (one collector per scrape)."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "tidings_deliveries_pending",
            "Outbox rows waiting to be delivered (the outbox depth).",
            value=self.stats.pending,
        )
        yield GaugeMetricFamily(
            "tidings_outbox_lag_seconds",
            "Age of the oldest pending delivery (the delivery lag); 0 when none is pending.",
            value=self.stats.lag_seconds,
        )


class StoreErrorLog(logging.Handler):
    """Counts the store failures tidings logs (a record carrying a driver's
    exception) in :attr:`Metrics.store_errors`; writes nothing.

    Attached to the ``tidings`` logger, it must not silence it: a logger
    tree with a handler anywhere no longer falls back to
    :data:`logging.lastResort` (stderr), so a record no other handler takes
    is handed to it here, as it would have been (by the first of these
    handlers only, when several apps of one process each attached one).
    """

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self.metrics = metrics

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None and record.exc_info[1] is not None:
            self.metrics.failed(record.exc_info[1])
        last = logging.lastResort
        if last is not None and record.levelno >= last.level and self._falls_back(record):
            last.handle(record)

    def _falls_back(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` would have gone to :data:`logging.lastResort`
        without handlers of this class, and this one is the first of them."""
        first: StoreErrorLog | None = None
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            for handler in logger.handlers:
                if not isinstance(handler, StoreErrorLog):
                    return False
                first = first or handler
            logger = logger.parent if logger.propagate else None
        return first is self
