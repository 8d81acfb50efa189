"""A publish's Redis writes, sent without waiting for Redis' reply.

After its commit a publish writes its own feed, the activity's cached JSON and
the counts it moved: one round trip to Redis, 100-150 µs alone and 250-300 µs
beside a busy deliverer, a third of what one publishing thread spends. The
activity is already safe (committed, with its outbox row), so the publisher
need not wait: :class:`WriteBehind` sends the writes on a connection of its
own and a thread of its own reads the replies, then says how they went
(``done``), and only then is the runner told of the work.

What is read stays what was written: every other use of the client's
connections (:class:`BehindPool` hands them out) first waits until the writes
sent before it have been answered. So a thread reads its own publishes, and so
does any reader of this process that comes after the publish returned; the
runner of this process, which waits for a publish's writes under way before
it decides whether to make them itself (``DirectWrites.take``); and the HTTP
service, whose publish routes answer only after the writes (``GroupCommit``'s
``settle``, ``Tidings.settle``) and whose reads on their own client wait too. Another process
that reads Redis sees a publish one round trip after the call returned.

When a write fails (Redis gone, out of memory, a script flushed and not
loaded again), ``done`` gets the error: the caller leaves the feed to its
runner (the outbox row is there) and retries the rest alone.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from tidings import forks
from tidings.stores.base import send_now

log = logging.getLogger("tidings.stores.redis.behind")

#: Seconds a reply may take before the writers' connection is taken for dead
#: (a half-open TCP connection): its writes fail, and are made again.
REPLY_SECONDS = 30.0

#: Told how the writes went: None, or the error.
Done = Callable[[BaseException | None], None]


@dataclass
class _Sent:
    #: The connection it went on (set once sent).
    conn: Any
    #: Prepared calls (``transport.Prepared``): their commands' replies are read.
    calls: Sequence[Any]
    #: Calls of no server, made after the writes succeed (live events).
    after: Sequence[Callable[[], Any]]
    done: Done


class WriteBehind:
    """Writes sent on a connection of their own; a thread reads the replies."""

    def __init__(self, pool: BehindPool) -> None:
        self._pool = pool
        forks.register(self)
        self._reset()

    def _reset(self) -> None:
        self._conn: Any = None
        self._send_lock = threading.Lock()
        self._ready = threading.Condition()
        self._queue: deque[_Sent] = deque()
        #: Batches sent, their replies read, and ``done`` told, so far.
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
        made here. ``done`` is told exactly once, on the reading thread or
        before this returns; a send that fails raises here instead."""
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
            with self._send_lock:
                if not self._closed:
                    self._send(packed, _Sent(None, servers, after, done))
                    return
        send_now(calls, done)

    def _send(self, packed: bytes, sent: _Sent) -> None:
        """Send ``packed`` and queue ``sent`` for the reader (under the send lock)."""
        if self._thread is None or not self._thread.is_alive():
            thread = threading.Thread(target=self._read, name="tidings-write-behind", daemon=True)
            thread.start()  # (before anything is queued: a thread that cannot start queues nothing)
            self._thread = thread
        conn = self._connection()
        try:
            # No health check: its PING's reply would be read here, not by the reader.
            conn.send_packed_command([packed], check_health=False)
        except BaseException:
            # Replies of earlier sends on it fail too: the reader finds it closed.
            self._conn = None
            conn.disconnect()
            raise
        sent.conn = conn
        with self._ready:
            self._queue.append(sent)
            self._sent += 1
            self._ready.notify_all()

    def _connection(self) -> Any:
        """The writers' connection, made anew when the server closed it while
        idle (its ``timeout``, a proxy's): a pooled connection is checked so
        when it is handed out."""
        conn = self._conn
        if conn is None:
            # Not one of the pool's (nor counted by it: its max_connections
            # is the app's): the pool's settings, and a bound on a reply's wait.
            kwargs = dict(self._pool.connection_kwargs)
            given = kwargs.get("socket_timeout")
            kwargs["socket_timeout"] = REPLY_SECONDS if given is None else min(given, REPLY_SECONDS)
            conn = self._conn = self._pool.connection_class(**kwargs)
        elif self._replied == self._sent:
            try:
                stale = conn.can_read(timeout=0)
            except (redis.ConnectionError, OSError):
                stale = True
            if stale:
                conn.disconnect()  # (send_packed_command connects again)
        return conn

    def wait_replies(self) -> None:
        """Wait until the replies of every write sent so far are read: what
        they wrote is in Redis (a no-op on the reading thread)."""
        if self._replied == self._sent or threading.current_thread() is self._thread:
            return
        with self._ready:
            target = self._sent
            while self._replied < target:
                self._ready.wait()

    def settle(self) -> None:
        """Wait until every write sent so far is answered: its replies read
        and ``done`` told (a no-op on the reading thread)."""
        if self._answered == self._sent or threading.current_thread() is self._thread:
            return
        with self._ready:
            target = self._sent
            while self._answered < target:
                self._ready.wait()

    def pending(self) -> bool:
        """Whether writes sent are still unanswered."""
        return self._answered != self._sent

    def close(self) -> None:
        """Wait for the writes sent, then stop the thread and the connection;
        later submits are made at once."""
        with self._send_lock:
            self._closed = True
        self.settle()
        with self._ready:
            self._ready.notify_all()
            thread, conn, self._conn = self._thread, self._conn, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if conn is not None:
            conn.disconnect()

    def _read(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                sent = self._queue[0]
            error = self._replies(sent)
            with self._ready:
                self._replied += 1
                self._ready.notify_all()
            if error is None:
                try:
                    for call in sent.after:
                        call()
                except Exception:
                    log.exception("a call after the writes of a publish failed")
            try:
                sent.done(error)
            except Exception:
                log.exception("handling the replies of a publish's writes failed")
            with self._ready:
                self._queue.popleft()
                self._answered += 1
                self._ready.notify_all()

    def _replies(self, sent: _Sent) -> BaseException | None:
        """Read ``sent``'s replies; the first error (the rest are read all the
        same, so the connection stays in step), or the connection's. A script
        the server lost (a restart, SCRIPT FLUSH, or never loaded: redis-py
        loads a script at its first call) is loaded and its command sent again."""
        first: BaseException | None = None
        lost: list[tuple[Any, tuple[Any, ...]]] = []
        try:
            for call in sent.calls:
                for command in call.commands:
                    try:
                        sent.conn.read_response()
                    except redis.exceptions.NoScriptError:
                        lost.append((call, command))
                    except redis.ResponseError as exc:
                        first = first or exc
        except BaseException as exc:
            with self._send_lock:
                if self._conn is sent.conn:
                    self._conn = None
            sent.conn.disconnect()
            return exc
        for call, command in lost:
            # (As ServerScripts.send; on this thread the pool does not wait.)
            try:
                client = call.server.client
                call.script.sha = client.script_load(call.script.script)
                client.execute_command("EVALSHA", call.script.sha, *command[2:])
            except Exception as exc:
                first = first or exc
        return first


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
