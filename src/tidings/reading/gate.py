"""Who reads which feed: the reader-state gate every read passes.

A read first asks whether the feed's store can serve it: not while the feed
is being rebuilt after its owner was idle (a first read after idleness sets
that going, and the canonical store serves reads meanwhile). A feed
confirmed active within the tracker's window costs no lookup, and the reads
themselves are recorded in the background, in batches, for the sweep that
sorts readers into delivery tiers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tidings.canonical.recheck import Recheck
from tidings.canonical.store import CanonicalStore
from tidings.core.clock import real_monotonic
from tidings.core.readers import ReaderState, ReadTracker, read_window_ms
from tidings.settings import Settings

log = logging.getLogger("tidings.reading")

#: How often reads noted in memory are written to the canonical store.
READS_FLUSH_SECONDS = 1.0
#: How often a process asks whether any feed is idle or being rebuilt.
UNSETTLED_VIEW_SECONDS = 5.0


class ReaderGate:
    """Reader states as reads see them, and the reads noted for the canonical store.

    ``notify`` tells the runner there is work (feeds woken up, to rebuild).
    """

    def __init__(
        self,
        canonical: CanonicalStore,
        settings: Settings,
        *,
        now_ms: Callable[[], int],
        notify: Callable[[], None],
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        self.canonical = canonical
        self.now_ms = now_ms
        self.notify = notify
        self.reads = ReadTracker(read_window_ms(settings.inactive_days, settings.recent_read_hours))
        # Whether any feed is idle or being rebuilt: with none (inactive_days = 0,
        # or nobody idle yet), a first read needs no state lookup. A feed idled
        # by another process meanwhile is read from its (cleared) store, flat
        # feeds falling back to the canonical store; the read, recorded within
        # a second, wakes it.
        self.unsettled = Recheck(
            self.canonical.readers.any_unsettled, UNSETTLED_VIEW_SECONDS, monotonic
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reading(self, feed: str) -> bool:
        """Note that ``feed`` is read; False while it is being rebuilt after its
        owner was idle (a first read after idleness sets that going).

        A feed confirmed active within the tracker's window costs no lookup;
        the read itself is recorded in the background, in batches.
        """
        known = self.reading_known(feed)
        return known if known is not None else self.reading_looked_up(feed)

    def reading_known(self, feed: str) -> bool | None:
        """:meth:`reading` without blocking: None when the state must be looked up."""
        now = self.now_ms()
        if self.reads.fresh(feed, now):
            return True
        if not self.unsettled():
            self.reads.confirm(feed, now)
            return True
        return None

    def reading_looked_up(self, feed: str) -> bool:
        """:meth:`reading` by asking the canonical store (and waking an idle feed)."""
        now = self.now_ms()
        state = self.canonical.readers.reader_state(feed)
        if state == ReaderState.IDLE:
            woken = self.canonical.readers.record_reads({feed: now}, now)
            if woken:
                self._woken(woken)
                state = self.canonical.readers.reader_state(feed)  # a sync runner rebuilt it
        if state == ReaderState.ACTIVE:
            self.reads.confirm(feed, now)
            return True
        return False

    def _woken(self, feeds: list[str]) -> None:
        self.reads.forget(feeds)
        self.unsettled.expire()
        self.notify()

    def flush(self) -> None:
        """Write the reads noted in memory to the canonical store; wakes idle
        feeds read meanwhile."""
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

    def start(self) -> None:
        """Flush every ``READS_FLUSH_SECONDS`` in a background thread."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._flush_loop, name="tidings-reads", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread, and record the last reads."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.flush()
        except Exception:
            log.exception("recording the last reads failed")

    def _flush_loop(self) -> None:
        while not self._stop.wait(READS_FLUSH_SECONDS):
            try:
                self.flush()
            except Exception:
                log.exception("recording reads failed; will retry")
