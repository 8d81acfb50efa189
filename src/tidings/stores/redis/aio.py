"""Redis script calls awaited on the event loop, for the HTTP read path.

redis-py's client blocks: a page read on it from an ``async`` route holds the
worker's event loop for the whole round trip, and no other request is parsed
meanwhile. This sends the same pre-packed EVALSHA over a few plain
non-blocking sockets owned by this module and awaits the reply with the
loop's ``sock_*`` calls, parsed by hiredis.

Plain sockets with a reader callback rather than asyncio transports: a pool
may outlive its event loop (tests run several; a worker closes its engine
from a thread), and a socket is closed cleanly once its loop is gone, where
an unclosed transport of a closed loop warns and cannot be closed.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Sequence
from typing import Any

import hiredis

#: Idle connections kept per pool. A worker has at most one page read in
#: flight per client connection it serves; beyond this many at once, extra
#: connections are opened and closed after use instead of kept.
MAX_IDLE = 32
#: Bytes asked of the kernel per read: a page of 100 activities of ~1 KB fits.
_READ_SIZE = 1 << 17


class AsyncScriptError(Exception):
    """Redis answered a script call with an error."""


class Address:
    """Where and how to connect, as read from a redis-py client's pool."""

    def __init__(
        self,
        *,
        host: str | None = None,
        port: int = 6379,
        path: str | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        self.host, self.port, self.path = host, port, path
        self.db, self.username, self.password = db, username, password
        self.timeout = timeout

    @classmethod
    def of(cls, client: Any) -> Address | None:
        """The address of a plain redis-py ``Redis`` client; None for anything this
        module cannot speak (TLS, credential providers, clusters, other clients)."""
        import redis

        pool = getattr(client, "connection_pool", None)
        if pool is None:
            return None
        kwargs: dict[str, Any] = pool.connection_kwargs
        if kwargs.get("credential_provider") is not None or kwargs.get("protocol") == 3:
            return None
        common: dict[str, Any] = {
            "db": int(kwargs.get("db") or 0),
            "username": kwargs.get("username"),
            "password": kwargs.get("password"),
            "timeout": kwargs.get("socket_timeout") or 5.0,
        }
        kind = pool.connection_class
        if kind is redis.Connection:
            return cls(
                host=kwargs.get("host", "localhost"), port=int(kwargs.get("port", 6379)), **common
            )
        if kind is redis.UnixDomainSocketConnection:
            return cls(path=kwargs["path"], **common)
        return None


def _pack(*parts: Any) -> bytes:
    packed: bytes = hiredis.pack_command(parts)
    return packed


class _Connection:
    """One socket, one call at a time, its reader registered with the loop for its life.

    Registering once instead of per call (as ``loop.sock_recv`` does) halves
    the CPU of a round trip: a call is one ``send`` and one ``recv``.
    """

    __slots__ = ("closed", "loop", "reader", "sock", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self.loop, self.sock = loop, sock
        self.reader = hiredis.Reader()
        self.waiter: asyncio.Future[Any] | None = None
        self.closed = False
        loop.add_reader(sock, self._readable)

    def _readable(self) -> None:
        waiter = self.waiter
        try:
            data = self.sock.recv(_READ_SIZE)
            if not data:
                raise ConnectionError("Redis closed the connection")
            self.reader.feed(data)
            reply = self.reader.gets()
        except (BlockingIOError, InterruptedError):
            return
        except Exception as exc:  # the socket or the reply stream is broken
            self.drop()
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            return
        if reply is False:  # part of a reply so far
            return
        self.waiter = None
        if waiter is None or waiter.done():
            self.drop()  # a reply nobody asked for: this stream is out of step
        else:
            waiter.set_result(reply)

    async def call(self, packed: bytes) -> Any:
        if self.closed:
            raise ConnectionError("connection closed")
        waiter = self.waiter = self.loop.create_future()
        try:
            sent = self.sock.send(packed)
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent < len(packed):  # only with a full socket buffer: never for a page read
            await self.loop.sock_sendall(self.sock, memoryview(packed)[sent:])
        return await waiter

    def drop(self) -> None:
        """Close, on the loop's thread (or with the loop closed)."""
        if self.closed:
            return
        self.closed = True
        if not self.loop.is_closed():
            self.loop.remove_reader(self.sock)
        self.sock.close()

    def close(self) -> None:
        """Close from any thread: the reader is removed by the loop that registered it."""
        loop = self.loop
        if loop.is_running() and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                loop.call_soon_threadsafe(self.drop)
                return
        self.drop()


class AsyncScripts:
    """Calls of read-only scripts on a small pool of connections bound to one event loop.

    A worker process runs one loop; when the pool is used from another one
    (a test's second server, say) the idle connections of the old loop are
    closed and new ones opened. A connection whose call failed or was
    cancelled half-way may hold part of a reply, so it is closed, never
    reused.
    """

    def __init__(self, address: Address) -> None:
        self.address = address
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        #: Connections opened so far; the tests read it.
        self.opened = 0

    async def call(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """``EVALSHA`` of a redis-py ``Script`` (loading it on NOSCRIPT); returns the reply."""
        packed = _pack("EVALSHA", script.sha, len(keys), *keys, *args)
        reply = await self._send(packed)
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("NOSCRIPT"):
            # The server lost its script cache (restart, SCRIPT FLUSH): load and retry.
            loaded = await self._send(_pack("SCRIPT", "LOAD", script.script))
            if isinstance(loaded, hiredis.ReplyError):
                raise AsyncScriptError(str(loaded))
            script.sha = loaded.decode()
            packed = _pack("EVALSHA", script.sha, len(keys), *keys, *args)
            reply = await self._send(packed)
        if isinstance(reply, hiredis.ReplyError):
            raise AsyncScriptError(str(reply))
        return reply

    async def _send(self, packed: bytes) -> Any:
        loop = asyncio.get_running_loop()
        conn = self._take(loop)
        if conn is not None:
            try:
                reply = await conn.call(packed)
            except (ConnectionError, OSError):
                # An idle connection the server closed meanwhile (timeout, CLIENT KILL,
                # restart): dropped, and the call made again on a new one. Safe only
                # because every script sent here only reads.
                conn.drop()
            except BaseException:
                conn.drop()
                raise
            else:
                self._give(loop, conn)
                return reply
        conn = await self._connect(loop)
        try:
            reply = await conn.call(packed)
        except BaseException:
            # It may hold part of a reply, which would poison the next call on it.
            conn.drop()
            raise
        self._give(loop, conn)
        return reply

    def _take(self, loop: asyncio.AbstractEventLoop) -> _Connection | None:
        with self._lock:
            if loop is not self._loop:
                stale, self._idle, self._loop = self._idle, [], loop
                for conn in stale:
                    conn.close()
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:  # else the server closed it while idle
                    return conn
            return None

    def _give(self, loop: asyncio.AbstractEventLoop, conn: _Connection) -> None:
        with self._lock:
            if not self._closed and loop is self._loop and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.drop()

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        a = self.address
        if a.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: Any = a.path
        else:
            host = a.host or "localhost"
            infos = await loop.getaddrinfo(host, a.port, type=socket.SOCK_STREAM)
            family, kind, proto, _, target = infos[0]
            sock = socket.socket(family, kind, proto)
        conn: _Connection | None = None
        try:
            sock.setblocking(False)
            if sock.family != socket.AF_UNIX:
                # Small request, small reply, nothing to coalesce.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await asyncio.wait_for(loop.sock_connect(sock, target), a.timeout)
            conn = _Connection(loop, sock)
            setup: list[tuple[Any, ...]] = []
            if a.password is not None:
                auth = ("AUTH", a.username, a.password) if a.username else ("AUTH", a.password)
                setup.append(auth)
            if a.db:
                setup.append(("SELECT", a.db))
            for command in setup:
                reply = await conn.call(_pack(*command))
                if isinstance(reply, hiredis.ReplyError):
                    raise ConnectionError(f"Redis refused {command[0]}: {reply}")
        except BaseException:
            if conn is not None:
                conn.drop()
            sock.close()
            raise
        self.opened += 1
        return conn

    def close(self) -> None:
        """Close the idle connections; callable from any thread. Calls still in
        flight close theirs when they finish."""
        with self._lock:
            self._closed = True
            stale, self._idle = self._idle, []
        for conn in stale:
            conn.close()
