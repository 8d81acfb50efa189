"""A publish's Redis writes, made without the publisher waiting for Redis.

After its commit a publish writes its own feed, the activity's cached JSON and
the counts it moved: one round trip to Redis, 100-150 µs alone and 250-300 µs
beside a busy deliverer, a third of what one publishing thread spent. The
activity is already safe (committed, with its outbox row), so the publisher
need not wait: it queues the writes (:class:`WriteBehind`), and a thread of
their own sends those queued meanwhile in one packet, on a connection of its
own, reads the replies, then says how each publish's went (``done``); only
then is the runner told of the work.

What is read stays what was written: every other use of the client's
connections (:class:`BehindPool` hands them out) first waits until the writes
queued before it have been answered. So a thread reads its own publishes, and
so does any reader of this process that comes after the publish returned; the
runner of this process waits for a publish's writes under way before it
decides whether to make them itself (``DirectWrites.take``); the HTTP
service's publish routes answer only after the writes (``GroupCommit``'s
``settle``, ``Tidings.settle``), and its reads on their own client wait too.
Another process that reads Redis sees a publish a round trip or two after
the call returned.

When a write fails (Redis gone, out of memory, no reply within
:data:`REPLY_SECONDS`), ``done`` gets the error: the caller leaves the feed
to its runner (the outbox row is there) and retries the rest alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from tidings import forks
from tidings.core.clock import real_monotonic
from tidings.stores.base import send_now

log = logging.getLogger("tidings.stores.redis.behind")

#: Seconds a reply may take before the writers' connection is taken for dead
#: (a half-open TCP connection): its writes fail, and are made again.
REPLY_SECONDS = 30.0

#: Seconds idle after which the connection is checked before use (a server
#: closes idle clients after ``timeout`` seconds, 1 at least); a busy one is not.
IDLE_CHECK_SECONDS = 0.5

#: Publishes' writes sent in one packet at most (after a stall, the backlog
#: goes in several: one failure fails no more than these).
GROUP_MOST = 256

#: Told how the writes went: None, or the error.
Done = Callable[[BaseException | None], None]


@dataclass
class _Sent:
    #: The commands, packed.
    packed: bytes
    #: Prepared calls (``transport.Prepared``): their commands' replies are read.
    calls: Sequence[Any]
    #: Calls of no server, made after the writes succeed (live events).
    after: Sequence[Callable[[], Any]]
    done: Done


class WriteBehind:
    """Writes queued by publishers; a thread of its own sends those queued
    meanwhile together, on a connection of its own, and reads their replies.

    The publishing thread only queues: the send (a system call, and the
    wait for the interpreter's lock after it) is the thread's, and the
    writes of several publishes go in one packet while the replies of the
    last ones are read.
    """

    def __init__(self, pool: BehindPool) -> None:
        self._pool = pool
        #: Tells how long the connection was idle. Made with the client (by
        #: ``connect``, outside any engine), so the real clock; replaceable.
        self.monotonic: Callable[[], float] = real_monotonic
        forks.register(self)
        self._reset()

    def _reset(self) -> None:
        self._conn: Any = None
        #: When the connection was last used (monotonic seconds).
        self._used = 0.0
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        #: Queued, not sent yet.
        self._queue: list[_Sent] = []
        #: Writes queued, their replies read, and ``done`` told, so far.
        self._sent = self._replied = self._answered = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def _after_fork_in_child(self) -> None:
        # The parent's writes are the parent's; its thread is not here.
        self._reset()

    def submit(self, calls: Sequence[Callable[[], Any]], done: Done) -> None:
        """Make ``calls`` as :func:`tidings.stores.base.send_together` would,
        without waiting for Redis where it can: when every call that goes to
        a server goes to this pool's, and the calls of no server come after
        them (they are made once the writes succeed). Otherwise they are
        made here. ``done`` is told exactly once: on the thread, or before
        this returns."""
        servers = [c for c in calls if getattr(c, "server", None) is not None]
        after = list(calls[len(servers) :])
        behind = (
            bool(servers)
            and all(getattr(c.server, "client", None) is not None for c in servers)  # type: ignore[attr-defined]
            and all(c.server.client.connection_pool is self._pool for c in servers)  # type: ignore[attr-defined]
            and all(getattr(c, "server", None) is None for c in after)
        )
        if behind:
            packed = b"".join(c.packed for c in servers)  # type: ignore[attr-defined]
            with self._ready:
                if not self._closed:
                    self._start()
                    self._queue.append(_Sent(packed, servers, after, done))
                    self._sent += 1
                    self._ready.notify_all()
                    return
        send_now(calls, done)

    def _start(self) -> None:
        # (Under the lock, before anything is queued: a thread that cannot
        # start raises here, and nothing waits for it.)
        if self._thread is None or not self._thread.is_alive():
            thread = threading.Thread(target=self._run, name="tidings-write-behind", daemon=True)
            thread.start()
            self._thread = thread

    def wait_replies(self) -> None:
        """Wait until the replies of every write queued so far are read: what
        they wrote is in Redis (a no-op on the writes' thread)."""
        self._wait_for(lambda: self._replied)

    def settle(self) -> None:
        """Wait until every write queued so far is answered: its replies read
        and ``done`` told (a no-op on the writes' thread)."""
        self._wait_for(lambda: self._answered)

    def _wait_for(self, count: Callable[[], int]) -> None:
        """Until ``count`` (a counter that follows ``_sent``) reaches ``_sent``
        as it is now. (Read before ``_sent``: both only grow.)"""
        if count() == self._sent or threading.current_thread() is self._thread:
            return
        with self._ready:
            target = self._sent
            while count() < target:
                self._ready.wait()

    def pending(self) -> bool:
        """Whether writes queued are still unanswered."""
        return self._answered != self._sent

    def close(self) -> None:
        """Wait for the writes queued, then stop the thread and the
        connection; later submits are made at once."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.disconnect()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                group = self._queue[:GROUP_MOST]
                del self._queue[:GROUP_MOST]
            self._answer(group)

    def _answer(self, group: Sequence[_Sent]) -> None:
        """Send ``group``, read its replies, tell each ``done``; whatever goes
        wrong, the counters move past it (or every settle would wait for good)."""
        told = 0
        try:
            try:
                errors = self._send_and_read(group)
            finally:
                with self._ready:
                    self._replied += len(group)
                    self._ready.notify_all()
            for sent, error in zip(group, errors, strict=True):
                if error is None:
                    try:
                        for call in sent.after:
                            call()
                    except Exception:
                        log.exception("a call after the writes of a publish failed")
                told += 1
                try:
                    sent.done(error)
                except Exception:
                    log.exception("handling the replies of a publish's writes failed")
        except BaseException as exc:
            for sent in group[told:]:
                try:
                    sent.done(exc)
                except Exception:
                    log.exception("handling the replies of a publish's writes failed")
            if not isinstance(exc, Exception):
                raise
            log.exception("writes of %d publishes failed", len(group) - told)
        finally:
            with self._ready:
                self._answered += len(group)
                self._ready.notify_all()

    def _send_and_read(self, group: Sequence[_Sent]) -> list[BaseException | None]:
        """Send ``group``'s writes in one packet and read their replies; each
        one's first error (the rest are read all the same, so the connection
        stays in step), or the connection's for all. A script the server lost
        (a restart, SCRIPT FLUSH, or never loaded: redis-py loads a script at
        its first call) is loaded and its command sent again."""
        errors: list[BaseException | None] = [None] * len(group)
        lost: list[tuple[int, Any, tuple[Any, ...]]] = []
        conn: Any = None
        try:
            conn = self._connection()
            # No health check: its PING's reply would be read before ours.
            conn.send_packed_command([b"".join(s.packed for s in group)], check_health=False)
            for i, sent in enumerate(group):
                for call in sent.calls:
                    for command in call.commands:
                        try:
                            conn.read_response()
                        except redis.exceptions.NoScriptError:
                            lost.append((i, call, command))
                        except redis.ResponseError as exc:
                            errors[i] = errors[i] or exc
        except BaseException as exc:
            # Sent in part, or replies missing: none is taken as made.
            self._conn = None
            if conn is not None:
                conn.disconnect()
            return [exc] * len(group)
        for i, call, command in lost:
            # (As ServerScripts.send; on this thread the pool does not wait.)
            try:
                client = call.server.client
                call.script.sha = client.script_load(call.script.script)
                client.execute_command("EVALSHA", call.script.sha, *command[2:])
            except Exception as exc:
                errors[i] = errors[i] or exc
        return errors

    def _connection(self) -> Any:
        """The writes' connection (every reply read), made anew when the
        server closed it while idle (its ``timeout``, a proxy's), as the pool
        checks a connection it hands out."""
        conn = self._conn
        if conn is None:
            # Not one of the pool's (nor counted by it: its max_connections
            # is the app's): the pool's settings, and a bound on a reply's wait.
            kwargs = dict(self._pool.connection_kwargs)
            if "socket_timeout" in kwargs:  # (else redis-py's default, shorter)
                given = kwargs["socket_timeout"]
                kwargs["socket_timeout"] = (
                    REPLY_SECONDS if given is None else min(given, REPLY_SECONDS)
                )
            conn = self._conn = self._pool.connection_class(**kwargs)
        elif self.monotonic() - self._used > IDLE_CHECK_SECONDS:
            try:
                stale = conn.can_read(timeout=0)
            except (redis.ConnectionError, OSError):
                stale = True
            if stale:
                conn.disconnect()  # (send_packed_command connects again)
        self._used = self.monotonic()
        return conn


class BehindPool(redis.ConnectionPool):
    """A client's connections; every one handed out first waits for the
    writes sent behind (:attr:`behind`) to be answered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.behind = WriteBehind(self)

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        self.behind.wait_replies()
        return super().get_connection(*args, **kwargs)

    def close(self) -> None:
        self.behind.close()
        super().close()
