"""Checkpoints of SQLite's write-ahead log, off the writers' path.

In WAL mode a commit appends pages to the log; a checkpoint copies them back
into the database file and syncs it. SQLite runs one inside the commit that
takes the log past ``wal_autocheckpoint`` pages, so every few thousand
commits one publish, delivery or ``follow_many`` call stalls for the whole
copy (40-60 ms at 32 MiB of log on the reference machine, 10% of a
``follow_many`` run). Here a thread of its own checkpoints instead, shortly
after writes, on a connection of its own, while the writers go on: a
``PASSIVE`` checkpoint takes no lock a writer waits for. The writers keep a
far higher ``wal_autocheckpoint`` (:data:`BACKSTOP_PAGES`) in case this
thread falls behind.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence

from tidings import forks

log = logging.getLogger("tidings.canonical.checkpoint")

#: The writers' own ``wal_autocheckpoint``: reached only when this thread
#: falls behind (128 MiB of log at 4 KiB pages).
BACKSTOP_PAGES = 32_768

#: Seconds between checkpoints at most while writes go on: short enough that
#: the log stays far under the backstop, long enough that a page written again
#: and again is copied once for many commits.
INTERVAL_SECONDS = 0.1


class Checkpointer:
    """Checkpoints the database at ``path`` after :meth:`wrote`, at most every
    ``interval`` seconds; ``pragmas`` are the writers' (synchronous: the
    checkpoint syncs as they would)."""

    def __init__(
        self,
        path: str,
        pragmas: Sequence[str],
        *,
        uri: bool = False,
        interval: float = INTERVAL_SECONDS,
    ) -> None:
        self._path, self._uri = path, uri
        self._pragmas = list(pragmas)
        self._interval = interval
        self._written = threading.Event()
        self._closed = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        #: Held while the thread is inside SQLite, and by a fork (see
        #: _before_fork): a child forked mid-call would find SQLite's own
        #: mutexes held by a thread it does not have.
        self._busy = threading.Lock()
        self._thread: threading.Thread | None = None
        forks.register(self)

    def _before_fork(self) -> None:
        self._busy.acquire()

    def _after_fork_in_parent(self) -> None:
        self._busy.release()

    def _after_fork_in_child(self) -> None:
        # The parent's thread is not here, and a lock or event may have been
        # copied mid-use. A write starts a thread anew.
        self._lock, self._busy = threading.Lock(), threading.Lock()
        self._written, self._stop = threading.Event(), threading.Event()
        self._thread = None

    def wrote(self) -> None:
        """A write transaction committed: checkpoint soon."""
        if self._thread is None:
            self._start()
        self._written.set()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._run, name="tidings-checkpoint", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        """Stop the thread after one last checkpoint of what was written."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._stop.set()
        self._written.set()
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        with self._busy:
            conn = sqlite3.connect(
                self._path, isolation_level=None, check_same_thread=False, uri=self._uri
            )
            for pragma in self._pragmas:
                conn.execute(pragma)
        try:
            while True:
                self._written.wait()
                self._written.clear()
                stopping = self._stop.is_set()
                with self._busy:
                    self._checkpoint(conn)
                if stopping:
                    return
                # Commits meanwhile set the event again: the next checkpoint
                # comes an interval after this one, not after every commit.
                self._stop.wait(self._interval)
        finally:
            with self._busy:
                conn.close()

    @staticmethod
    def _checkpoint(conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            # The writers' backstop checkpoints meanwhile; the next write
            # tries again.
            log.exception("checkpoint of the SQLite log failed")
