"""Redis script calls awaited on the event loop, for the HTTP read path.

redis-py's blocking client holds the worker's event loop for a page read's
whole round trip, and no other request is parsed meanwhile. This awaits the
same EVALSHA on ``redis.asyncio`` (replies parsed by hiredis), on the server,
database, credentials and TLS options of the store's blocking client.

It replaced a client of our own on raw non-blocking sockets (286 lines), which
issue 11 kept only if at least 1.5x faster on the HTTP page bench. It was not.
Bench 5's load (1,000 feeds, 2 uvicorn workers on uvloop + httptools, wrk with
32 connections for 10 s; 2 cores shared by the workers, redis-server and wrk),
in rounds alternating the client the workers await the page script on (A B B
A B A A B), from one app factory that swapped only that client
(``python -m bench --only page-client``: ``bench/page_client.py`` at commit
37e4358, removed with the hand-written client). Machine otherwise idle: other
processes used 0% of its CPU in every round (the load average is the bench's
own):

    round  client         load avg  ping req/s  page req/s  p99 ms  worker CPU ms/req
      1    hand-written     0.43      17,865      10,204      7.2       0.125
      2    redis.asyncio    1.46      17,356       8,268      7.7       0.171
      3    redis.asyncio    2.13      17,527       8,352      7.5       0.169
      4    hand-written     2.14      16,947      10,037      8.1       0.125
      5    hand-written     2.18      18,117      10,231      7.9       0.123
      6    redis.asyncio    2.26      17,750       8,241      7.5       0.171
      7    redis.asyncio    2.37      18,506       7,913      8.1       0.178
      8    hand-written     2.66      18,639       9,893      8.1       0.127
    median hand-written 10,120 req/s, p99 8.0 ms; redis.asyncio 8,255 req/s,
    p99 7.6 ms: hand-written / redis.asyncio = 1.23x req/s (1.37x worker CPU).

An earlier run of the same eight rounds, while other jobs took 35-61% of the
CPU, gave medians 3,378 vs 2,784 req/s (1.21x), p99 27.1 vs 34.9 ms, worker
CPU 0.161 vs 0.215 ms per request. redis.asyncio spends ~45 us more worker
CPU per page request; its p99 is no worse on an idle machine.

A ``redis.asyncio`` connection belongs to the event loop that opened it and
can only be closed on that loop, while it runs. So each loop gets a client of
its own, closed as that loop shuts down: a suspended async generator is what
``asyncio.run`` (and uvicorn, and anyio) finalise on the loop before closing
it. A worker process runs one loop; the tests run many, and a worker closes
its engine from a thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError

#: The blocking client's options that mean the same to ``redis.asyncio.Redis``.
_SHARED = (
    "db",
    "username",
    "password",
    "socket_timeout",
    "socket_connect_timeout",
    "socket_keepalive",
    "socket_keepalive_options",
    "client_name",
    "credential_provider",
    "protocol",
)
_TLS = (
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_data",
    "ssl_ca_path",
    "ssl_check_hostname",
    "ssl_min_version",
    "ssl_ciphers",
    "ssl_password",
)


def async_options(client: Any) -> dict[str, Any] | None:
    """``redis.asyncio.Redis`` keyword arguments for the server of a blocking redis-py
    ``Redis`` client; None for what this does not cover (clusters, other clients,
    connection classes of one's own, OCSP checks, which only the blocking client makes)."""
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        return None
    kwargs: dict[str, Any] = pool.connection_kwargs
    options = {name: kwargs[name] for name in _SHARED if name in kwargs}
    kind = pool.connection_class
    if kind is redis.UnixDomainSocketConnection:
        return options | {"unix_socket_path": kwargs["path"]}
    if kind is redis.Connection:
        return options | {"host": kwargs.get("host", "localhost"), "port": kwargs.get("port", 6379)}
    if kind is redis.SSLConnection:
        if kwargs.get("ssl_validate_ocsp") or kwargs.get("ssl_validate_ocsp_stapled"):
            return None
        tls = {name: kwargs[name] for name in _TLS if name in kwargs}
        return options | tls | {"host": kwargs["host"], "port": kwargs["port"], "ssl": True}
    return None


class AsyncScripts:
    """Calls of read-only scripts, on one ``redis.asyncio`` client per event loop."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options | {
            # One retry at once, on a new connection: enough for an idle connection
            # the server closed meanwhile (timeout, CLIENT KILL, restart), and a
            # server that is down fails the read now rather than after backoffs.
            # Safe only because every script sent here only reads.
            "retry": Retry(NoBackoff(), 1),
            "redis_connect_func": self._on_connect,
        }
        self._clients: dict[asyncio.AbstractEventLoop, redis.asyncio.Redis] = {}
        self._closers: dict[asyncio.AbstractEventLoop, AsyncIterator[None]] = {}
        self._lock = threading.Lock()
        #: Connections opened so far; the tests read it.
        self.opened = 0

    async def call(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """``EVALSHA`` of a redis-py ``Script`` (loading it on NOSCRIPT); returns the reply."""
        client = await self._client()
        try:
            return await client.evalsha(script.sha, len(keys), *keys, *args)
        except NoScriptError:
            # The server lost its script cache (restart, SCRIPT FLUSH): load and retry.
            sha = await client.script_load(script.script)
            script.sha = sha.decode() if isinstance(sha, bytes) else sha
            return await client.evalsha(script.sha, len(keys), *keys, *args)

    async def _client(self) -> redis.asyncio.Redis:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is not None:
                return client
            client = self._clients[loop] = redis.asyncio.Redis(**self.options)
            closer = self._closers[loop] = self._close_at_shutdown(loop, client)
        await anext(closer)  # now suspended until the loop's shutdown closes it
        return client

    async def _close_at_shutdown(
        self, loop: asyncio.AbstractEventLoop, client: redis.asyncio.Redis
    ) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with self._lock:
                self._clients.pop(loop, None)
                self._closers.pop(loop, None)
            await client.aclose()

    async def _on_connect(self, connection: Any) -> None:
        self.opened += 1
        await connection.on_connect()

    def close(self) -> None:
        """Close the connections of the loops still running; callable from any thread.

        Those of loops that are not running close when the loop shuts down."""
        with self._lock:
            clients = list(self._clients.items())
        for loop, client in clients:
            if loop.is_running() and not loop.is_closed():
                asyncio.run_coroutine_threadsafe(client.aclose(), loop)
