"""Private, throw-away servers for the test suite, all imported from here:
Redis (this module), PostgreSQL (:mod:`postgres_server`), RabbitMQ
(:mod:`rabbitmq_server`) and any command run as a server
(:class:`server_base.CommandServer`).

Each server is a child process of the test run, listens on a free loopback
port and keeps its data in its own temporary directory.  Nothing here ever
talks to a server it did not start itself.

The local cluster (``scripts/cluster.py``) starts its servers with the same
classes, each in a directory it names (``home``), and then *detaches* them:
they outlive the process that started them and are stopped by pid.
"""

from __future__ import annotations

import shutil
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from postgres_server import PostgresServer, find_postgres_bindir
from rabbitmq_server import RabbitMQServer
from server_base import BIND_ERRORS, CommandServer, Server, ServerError, free_port, tail

__all__ = [
    "CLUSTER_NODE_OPTIONS",
    "CommandServer",
    "PostgresServer",
    "RabbitMQServer",
    "RedisCluster",
    "RedisServer",
    "ServerError",
    "cluster_node_options",
    "find_postgres_bindir",
    "free_port",
    "node_id",
]


# --------------------------------------------------------------------------- Redis


def _resp(*args: str) -> bytes:
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class RedisServer(Server):
    """A private ``redis-server`` without persistence.

    Use as ``with RedisServer() as srv: ...``; ``srv.url`` is ``redis://127.0.0.1:PORT/0``
    and stays valid across ``srv.restart()``.
    """

    name = "redis"
    startup_timeout = 10.0

    def __init__(
        self,
        executable: str | None = None,
        *,
        extra: Sequence[str] = (),
        cluster: bool = False,
        home: Path | None = None,
    ) -> None:
        super().__init__(home)
        found = executable or shutil.which("redis-server")
        if found is None:
            raise ServerError("redis-server not found: apt-get install redis-server")
        self.executable = found
        #: More ``--option value`` arguments for redis-server.
        self.extra = list(extra)
        #: A Redis Cluster node: its bus gets a free port of its own, because
        #: the default (port + 10000) is out of range for most free ports.
        self.cluster = cluster
        self.bus_port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Self:
        if self.running:
            raise ServerError("redis-server is already running")
        if self._tmp is None:
            self._tmp = self._workdir("tidings-redis-")
        # restart(): keep the port the clients know (and a cluster node's bus
        # port, which the other nodes know it by).
        fixed_port = self.port != 0
        for attempt in range(5):
            if not fixed_port:
                self.port = free_port()
                self.bus_port = 0
            try:
                self._start_once()
                return self
            except ServerError:
                bind_error = any(e in tail(self.log_path) for e in BIND_ERRORS)
                if fixed_port or not bind_error or attempt == 4:
                    self.stop()
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> None:
        self.log_path.write_bytes(b"")
        # fmt: off
        argv = [
            self.executable,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.tmpdir),
            "--daemonize", "no",
            *self.extra,
        ]
        if self.cluster:
            self.bus_port = self.bus_port or free_port()
            argv += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-port", str(self.bus_port)]
        # fmt: on
        self._spawn(argv)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            self._check_alive("redis-server")
            try:
                if self.command("PING", timeout=1.0).startswith(b"+PONG"):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self._reap(signal.SIGKILL, 5)
                raise ServerError(
                    f"redis-server on port {self.port} did not answer PING within "
                    f"{self.startup_timeout:.0f}s; log:\n{tail(self.log_path)}"
                )
            time.sleep(0.05)

    def command(self, *args: str, timeout: float = 5.0) -> bytes:
        """Send one command to *this* server and return the raw RESP reply line."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(_resp(*args))
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        return reply

    def flushall(self) -> None:
        """Empty every database of this private server."""
        reply = self.command("FLUSHALL")
        if not reply.startswith(b"+OK"):
            raise ServerError(f"FLUSHALL failed: {reply!r}")

    def stop(self) -> None:
        self._reap(signal.SIGTERM, 10)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def halt(self) -> None:
        """Stop the server, keeping its port and directory: :meth:`start` starts
        it again there (empty: nothing is persisted)."""
        self._reap(signal.SIGTERM, 10)

    def restart(self) -> None:
        """Stop and start again on the same port (all data is lost)."""
        if self.port == 0:
            raise ServerError("redis-server was never started")
        self._reap(signal.SIGTERM, 10)
        self.start()


_SLOTS = 16384


#: Options of every node of a :class:`RedisCluster` (nodes.conf lives in each
#: server's own directory, its cwd). A replica's first sync would otherwise
#: wait 5 s for more replicas to share the master's snapshot.
def cluster_node_options(node_timeout_ms: int = 5000) -> tuple[str, ...]:
    """:data:`CLUSTER_NODE_OPTIONS` with another ``cluster-node-timeout``: how
    long a node goes unanswered before it is failed (and its replica
    promoted, for a master)."""
    return ("--cluster-node-timeout", str(node_timeout_ms), "--repl-diskless-sync-delay", "0")


CLUSTER_NODE_OPTIONS = cluster_node_options()


class RedisCluster:
    """A private Redis Cluster of ``masters`` masters with ``replicas`` replicas
    each (none by default), no persistence.

    Slots are assigned and nodes introduced by hand (CLUSTER ADDSLOTSRANGE,
    CLUSTER MEET, CLUSTER REPLICATE) rather than with ``redis-cli --cluster
    create``, which waits seconds for the nodes to agree. ``url`` is
    ``redis+cluster://`` on the first node, the form
    :func:`tidings.stores.redis.connect` takes. With ``home``, node ``i`` keeps
    its files in ``home/redis-<i>``.
    """

    startup_timeout = 20.0

    def __init__(
        self,
        masters: int = 3,
        *,
        replicas: int = 0,
        home: Path | None = None,
        node_timeout_ms: int = 5000,
    ) -> None:
        options = cluster_node_options(node_timeout_ms)
        self.nodes = [
            RedisServer(extra=options, cluster=True, home=home and home / f"redis-{i}")
            for i in range(masters * (1 + replicas))
        ]
        #: The first ``masters`` nodes hold the slots; the rest replicate them in turn.
        self.masters = self.nodes[:masters]
        self.replicas = self.nodes[masters:]

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    def start(self) -> Self:
        try:
            for node in self.nodes:
                node.start()
            self._form()
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self) -> None:
        share = _SLOTS // len(self.masters)
        for i, node in enumerate(self.masters):
            last = _SLOTS - 1 if i == len(self.masters) - 1 else (i + 1) * share - 1
            self._expect(node, b"+OK", "CLUSTER", "ADDSLOTSRANGE", str(i * share), str(last))
        first = self.nodes[0]
        for node in self.nodes[1:]:
            meet = ("CLUSTER", "MEET", "127.0.0.1", str(node.port), str(node.bus_port))
            self._expect(first, b"+OK", *meet)
        self.wait_ok()
        if self.replicas:
            # Every node knows every other now (wait_ok), so each replica can
            # be told its master by id.
            for i, node in enumerate(self.replicas):
                master = self.masters[i % len(self.masters)]
                self._expect(node, b"+OK", "CLUSTER", "REPLICATE", node_id(master))
            self.wait_replicating()

    @staticmethod
    def _expect(node: RedisServer, ok: bytes, *args: str) -> None:
        reply = node.command(*args)
        if not reply.startswith(ok):
            raise ServerError(f"{' '.join(args)} on port {node.port}: {reply!r}")

    def wait_ok(self) -> None:
        """Wait until every node reports cluster_state:ok and knows every node."""
        deadline = time.monotonic() + self.startup_timeout
        want = f"cluster_known_nodes:{len(self.nodes)}".encode()
        while True:
            infos = [_bulk(node, "CLUSTER", "INFO") for node in self.nodes]
            if all(b"cluster_state:ok" in info and want in info for info in infos):
                return
            if time.monotonic() > deadline:
                raise ServerError(f"the cluster did not reach cluster_state:ok: {infos!r}")
            time.sleep(0.05)

    def wait_replicating(self) -> None:
        """Wait until every replica's link to its master is up (its first sync done)."""
        deadline = time.monotonic() + self.startup_timeout
        while True:
            infos = [_bulk(node, "INFO", "replication") for node in self.replicas]
            if all(b"master_link_status:up" in info for info in infos):
                self.wait_ok()  # and the masters have heard of it
                return
            if time.monotonic() > deadline:
                raise ServerError(f"the replicas did not start replicating: {infos!r}")
            time.sleep(0.05)

    def flushall(self) -> None:
        for node in self.masters:
            node.flushall()  # (replicas refuse writes; they follow their master)

    def detach(self) -> list[int]:
        """Detach every node (see :meth:`RedisServer.detach`); their pids."""
        return [node.detach() for node in self.nodes]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def node_id(node: RedisServer) -> str:
    """The cluster node id of ``node`` (CLUSTER MYID)."""
    reply = _bulk(node, "CLUSTER", "MYID")
    head, _, body = reply.partition(b"\r\n")
    if not head.startswith(b"$"):
        raise ServerError(f"CLUSTER MYID on port {node.port}: {reply!r}")
    return body[: int(head[1:])].decode()


def _bulk(node: RedisServer, *args: str) -> bytes:
    """A bulk-string reply in full (``command`` stops at its first line)."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=5.0) as sock:
        sock.sendall(_resp(*args))
        reply = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
            head, _, body = reply.partition(b"\r\n")
            if head.startswith(b"$") and len(body) >= int(head[1:]) + 2:
                break
            if not head.startswith(b"$") and _:
                break
    return reply
