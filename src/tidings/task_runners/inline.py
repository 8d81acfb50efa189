"""In-process runners.

``ThreadRunner`` is the embedded default: background threads that wake on
``notify`` (and poll, to pick up rows left by a crashed process).
``SyncRunner`` delivers in the publishing thread before the call returns,
which makes scripts and tests deterministic. ``ManualRunner`` does nothing:
the owner calls ``Tidings.drain()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tidings.core.clock import real_monotonic
from tidings.core.limits import CLAIM_ROWS
from tidings.delivery.deliverer import Deliverer

log = logging.getLogger("tidings.task_runner")

#: How long a woken runner waits for more work before its pass.
LINGER_SECONDS = 0.005
#: The longest a busy runner waits between passes (``delivery_linger_ms``),
#: by default: where feeds are rows of the SQLite database (see
#: ``Deliverer.joins_writes``), and elsewhere.
MAX_LINGER_SQLITE_SECONDS = 0.05
MAX_LINGER_SECONDS = 0.01


class ThreadRunner:
    def __init__(
        self,
        deliverer: Deliverer,
        *,
        threads: int = 1,
        poll_seconds: float = 1.0,
        max_linger_seconds: float | None = None,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        self.deliverer = deliverer
        #: Times a pass (the engine's clock): a busy runner lingers as long.
        self.monotonic = monotonic
        self.threads = threads
        self.poll_seconds = poll_seconds
        if max_linger_seconds is None:
            max_linger_seconds = (
                MAX_LINGER_SQLITE_SECONDS if deliverer.joins_writes else MAX_LINGER_SECONDS
            )
        self.max_linger_seconds = max_linger_seconds
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._workers: list[threading.Thread] = []

    def start(self) -> None:
        for i in range(self.threads):
            t = threading.Thread(target=self._loop, name=f"tidings-delivery-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def notify(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        for t in self._workers:
            t.join()
        self._workers.clear()

    def _loop(self) -> None:
        linger = LINGER_SECONDS
        again = False
        while not self._stopping.is_set():
            if not again:
                self._wake.wait(self.poll_seconds)
            # Publishes arriving meanwhile join this pass: a delivery pass
            # costs about the same for one activity as for a batch.
            self._stopping.wait(linger)
            self._wake.clear()
            started = self.monotonic()
            try:
                claimed, _ = self.deliverer.run_pass()
            except Exception:
                # Logged by the deliverer; the row was released and is retried.
                self._stopping.wait(self.poll_seconds)
                linger, again = LINGER_SECONDS, False
                continue
            linger = _linger(claimed, self.monotonic() - started, self.max_linger_seconds)
            # There may be more: this thread looks again after lingering (the
            # others, woken by publishes, are not called to the same rows).
            again = claimed > 0


def _linger(claimed: int, took: float, bound: float = MAX_LINGER_SECONDS) -> float:
    """How long to wait before the next pass, after one that claimed ``claimed``
    rows in ``took`` seconds (at most ``bound``).

    A full claim means a backlog: the next pass at once. A busy runner waits
    about as long as its pass took (bounded): the next pass then carries about
    as many rows for the same fixed cost (claim, followers, commit), and the
    threads publishing in this interpreter get it meanwhile. Lingering between
    passes took the everyday workload on PostgreSQL + Redis from 460 to 640-757
    activities/s end to end; each activity waits at most the bound more. A
    20 ms bound gave ~10% more throughput than 10 ms but a delivery lag p99
    over 100 ms at half the maximum rate (SQLite + Redis). On SQLite alone a
    pass costs more (its commit writes every page it dirtied, one per feed
    touched), and 25 ms rather than 10 took the same workload from
    1,100-1,200 to 1,500-1,600 activities/s on fresh feeds. As the feeds
    grow, each spans pages of its own and a pass dirties a page per feed it
    touches whatever it carries: with 25 ms, uniform publishers fell from
    ~2,000 to 830-1,150 activities/s once the feeds held a few hundred
    entries; 50 ms kept 1,380-1,480 there (100 ms: 1,380-1,620), at a lag p99
    at half the maximum rate of 276 ms against 229 (100 ms: 321).
    """
    if claimed >= CLAIM_ROWS:
        return 0.0
    if not claimed:
        return LINGER_SECONDS
    return min(max(took, LINGER_SECONDS), bound)


class SyncRunner:
    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer

    def start(self) -> None:
        return None

    def notify(self) -> None:
        self.deliverer.run_pending()

    def stop(self) -> None:
        return None


class ManualRunner:
    def start(self) -> None:
        return None

    def notify(self) -> None:
        return None

    def stop(self) -> None:
        return None
