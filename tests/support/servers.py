"""Private, throw-away Redis and PostgreSQL servers for the test suite.

Each server is a child process of the test run, listens on a free loopback
port and keeps its data in its own temporary directory.  Nothing here ever
talks to a server it did not start itself.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import psycopg
from psycopg import sql

__all__ = [
    "PostgresServer",
    "RabbitMQServer",
    "RedisCluster",
    "RedisServer",
    "ServerError",
    "free_port",
]

_BIND_ERRORS = ("Address already in use", "could not bind", "could not create any TCP/IP sockets")


class ServerError(RuntimeError):
    """A test server could not be found, started or stopped."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "<no log>"
    return "\n".join(text.splitlines()[-lines:])


def _stop_process(proc: subprocess.Popen[bytes], sig: int, timeout: float) -> None:
    """Send ``sig`` to ``proc`` and wait; SIGKILL it if it does not exit in time."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class _RunAs:
    """Environment and (when root) the unprivileged identity for a child process."""

    env: dict[str, str] | None = None
    user: int | None = None
    group: int | None = None
    extra_groups: list[int] | None = None


class _Server:
    """Shared plumbing: temp dir, log file, child process, atexit safety net."""

    name = "server"

    def __init__(self) -> None:
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._tmp: Path | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def tmpdir(self) -> Path:
        if self._tmp is None:
            raise ServerError(f"{self.name} is not started")
        return self._tmp

    @property
    def log_path(self) -> Path:
        return self.tmpdir / f"{self.name}.log"

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _spawn(self, argv: list[str], run_as: _RunAs | None = None) -> None:
        run_as = run_as or _RunAs()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap()
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.tmpdir,
            start_new_session=True,  # keep Ctrl-C in the terminal away from the server
            env=run_as.env,
            user=run_as.user,
            group=run_as.group,
            extra_groups=run_as.extra_groups,
        )
        atexit.register(self.stop)

    def _reap(self, sig: int, timeout: float) -> None:
        if self._proc is not None:
            _stop_process(self._proc, sig, timeout)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        atexit.unregister(self.stop)

    def _check_alive(self, what: str) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            self._reap(signal.SIGKILL, 5)
            raise ServerError(
                f"{what} exited with status {code} during startup; log {self.log_path}:\n"
                f"{_tail(self.log_path)}"
            )


# --------------------------------------------------------------------------- Redis


def _resp(*args: str) -> bytes:
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class RedisServer(_Server):
    """A private ``redis-server`` without persistence.

    Use as ``with RedisServer() as srv: ...``; ``srv.url`` is ``redis://127.0.0.1:PORT/0``
    and stays valid across ``srv.restart()``.
    """

    name = "redis"
    startup_timeout = 10.0

    def __init__(
        self, executable: str | None = None, *, extra: Sequence[str] = (), cluster: bool = False
    ) -> None:
        super().__init__()
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
            self._tmp = Path(tempfile.mkdtemp(prefix="tidings-redis-"))
        fixed_port = self.port != 0  # restart(): keep the port the clients know
        for attempt in range(5):
            if not fixed_port:
                self.port = free_port()
            try:
                self._start_once()
                return self
            except ServerError:
                bind_error = any(e in _tail(self.log_path) for e in _BIND_ERRORS)
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
            self.bus_port = free_port()
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
                    f"{self.startup_timeout:.0f}s; log:\n{_tail(self.log_path)}"
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

    def restart(self) -> None:
        """Stop and start again on the same port (all data is lost)."""
        if self.port == 0:
            raise ServerError("redis-server was never started")
        self._reap(signal.SIGTERM, 10)
        self.start()


_SLOTS = 16384


class RedisCluster:
    """A private Redis Cluster of ``masters`` masters, no replicas, no persistence.

    Slots are assigned and nodes introduced by hand (CLUSTER ADDSLOTSRANGE,
    CLUSTER MEET) rather than with ``redis-cli --cluster create``, which waits
    seconds for the nodes to agree. ``url`` is ``redis+cluster://`` on the
    first node, the form :func:`tidings.stores.redis.connect` takes.
    """

    startup_timeout = 20.0

    def __init__(self, masters: int = 3) -> None:
        # nodes.conf lives in each server's own temp dir (its cwd).
        extra = ["--cluster-node-timeout", "5000"]
        self.nodes = [RedisServer(extra=extra, cluster=True) for _ in range(masters)]

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
        share = _SLOTS // len(self.nodes)
        for i, node in enumerate(self.nodes):
            last = _SLOTS - 1 if i == len(self.nodes) - 1 else (i + 1) * share - 1
            self._expect(node, b"+OK", "CLUSTER", "ADDSLOTSRANGE", str(i * share), str(last))
        first = self.nodes[0]
        for node in self.nodes[1:]:
            meet = ("CLUSTER", "MEET", "127.0.0.1", str(node.port), str(node.bus_port))
            self._expect(first, b"+OK", *meet)
        self.wait_ok()

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

    def flushall(self) -> None:
        for node in self.nodes:
            node.flushall()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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


# --------------------------------------------------------------------------- PostgreSQL

_DB_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def find_postgres_bindir() -> Path:
    """Directory holding ``initdb`` and ``postgres``."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True
            ).stdout
            candidates.append(Path(out.strip()))

    def version(path: str) -> tuple[int, ...]:
        ver = Path(path).parent.name
        return tuple(int(p) for p in ver.split(".") if p.isdigit())

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    candidates.extend(Path(d) for d in found)
    for bindir in candidates:
        if (bindir / "postgres").is_file() and (bindir / "initdb").is_file():
            return bindir
    raise ServerError("PostgreSQL server binaries not found: apt-get install postgresql")


def _unprivileged_user() -> pwd.struct_passwd:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ServerError("running as root and neither a 'postgres' nor a 'nobody' user exists")


class PostgresServer(_Server):
    """A private PostgreSQL cluster tuned for speed, not durability.

    When running as root the cluster is owned by and run as the ``postgres``
    system user (or ``nobody``), because postgres refuses to run as root.
    """

    name = "postgres"
    startup_timeout = 30.0
    user = "postgres"  # the database superuser created by initdb

    def __init__(self, bindir: Path | None = None) -> None:
        super().__init__()
        self.bindir = bindir or find_postgres_bindir()
        self._os_user: pwd.struct_passwd | None = (
            _unprivileged_user() if os.geteuid() == 0 else None
        )

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, dbname: str) -> str:
        """SQLAlchemy URL of database ``dbname`` on this server."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def conninfo(self, dbname: str = "postgres") -> str:
        """libpq conninfo string for psycopg."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={dbname}"

    @property
    def datadir(self) -> Path:
        return self.tmpdir / "data"

    def _run_as(self) -> _RunAs:
        """How to run initdb/postgres: as ourselves, or as an unprivileged user when root."""
        env = {**os.environ, "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
        if self._os_user is None:
            return _RunAs(env=env)
        env |= {"HOME": str(self.tmpdir), "USER": self._os_user.pw_name}
        return _RunAs(
            env=env, user=self._os_user.pw_uid, group=self._os_user.pw_gid, extra_groups=[]
        )

    def start(self) -> Self:
        if self.running:
            raise ServerError("postgres is already running")
        try:
            self._tmp = Path(tempfile.mkdtemp(prefix="tidings-pg-"))
            if self._os_user is not None:
                os.chown(self._tmp, self._os_user.pw_uid, self._os_user.pw_gid)
            self._initdb()
            for attempt in range(5):
                self.port = free_port()
                try:
                    self._start_once()
                    return self
                except ServerError:
                    bind_error = any(e in _tail(self.log_path) for e in _BIND_ERRORS)
                    if not bind_error or attempt == 4:
                        raise
            raise AssertionError("unreachable")
        except BaseException:
            self.stop()
            raise

    def _initdb(self) -> None:
        # fmt: off
        argv = [
            str(self.bindir / "initdb"),
            "-D", str(self.datadir),
            "-A", "trust",
            "-U", self.user,
            "--no-sync",
            "--locale=C",
            "--encoding=UTF8",
        ]
        # fmt: on
        run_as = self._run_as()
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=self.tmpdir,
            check=False,
            env=run_as.env,
            user=run_as.user,
            group=run_as.group,
            extra_groups=run_as.extra_groups,
        )
        if proc.returncode != 0:
            raise ServerError(f"initdb failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")

    def _start_once(self) -> None:
        self.log_path.write_bytes(b"")
        if self._os_user is not None:
            os.chown(self.log_path, self._os_user.pw_uid, self._os_user.pw_gid)
        # fmt: off
        argv = [
            str(self.bindir / "postgres"),
            "-D", str(self.datadir),
            "-p", str(self.port),
            "-k", str(self.tmpdir),
            "-c", "listen_addresses=127.0.0.1",
            "-c", "fsync=off",
            "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off",
        ]
        # fmt: on
        self._spawn(argv, self._run_as())
        deadline = time.monotonic() + self.startup_timeout
        while True:
            self._check_alive("postgres")
            try:
                with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                pass
            if time.monotonic() > deadline:
                self._reap(signal.SIGKILL, 5)
                raise ServerError(
                    f"postgres on port {self.port} did not accept connections within "
                    f"{self.startup_timeout:.0f}s; log:\n{_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(statement)

    def new_database(self, name: str) -> str:
        """Create an empty database ``name`` and return its SQLAlchemy URL."""
        if not _DB_NAME.match(name):
            raise ValueError(f"invalid database name {name!r}")
        self._admin(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, disconnecting any clients still using it."""
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def stop(self) -> None:
        self._reap(signal.SIGINT, 30)  # SIGINT = "fast" shutdown
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


# ------------------------------------------------------------------------ RabbitMQ


class RabbitMQServer(_Server):
    """A private RabbitMQ node (Debian's ``rabbitmq-server``), no plugins.

    Everything it owns is private: its AMQP port, its Erlang distribution
    port, and an epmd of its own on a third free port, so it never meets a
    system node. ``url`` is ``amqp://guest:guest@127.0.0.1:PORT//``.
    """

    name = "rabbitmq"
    startup_timeout = 60.0
    executable = "/usr/lib/rabbitmq/bin/rabbitmq-server"

    def __init__(self) -> None:
        super().__init__()
        if not os.path.exists(self.executable):
            raise ServerError("rabbitmq-server not found: apt-get install rabbitmq-server")
        self.epmd_port = 0

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def start(self) -> Self:
        if self.running:
            raise ServerError("rabbitmq-server is already running")
        self._tmp = Path(tempfile.mkdtemp(prefix="tidings-rabbitmq-"))
        self.port, dist, self.epmd_port = free_port(), free_port(), free_port()
        tmp = self.tmpdir
        (tmp / "enabled_plugins").write_text("[].\n")
        (tmp / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),  # the Erlang cookie goes here
            "RABBITMQ_NODENAME": f"tidings{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(dist),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_CONFIG_FILE": str(tmp / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(tmp / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(tmp / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(tmp / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(tmp / "plugins"),
            "RABBITMQ_GENERATED_CONFIG_DIR": str(tmp / "generated"),
            "RABBITMQ_MNESIA_BASE": str(tmp / "mnesia"),
            "RABBITMQ_LOG_BASE": str(tmp / "log"),
            "RABBITMQ_PID_FILE": str(tmp / "rabbitmq.pid"),
            "RABBITMQ_LOGS": "-",
        }
        self._spawn([self.executable], _RunAs(env=env))
        try:
            deadline = time.monotonic() + self.startup_timeout
            while b"Server startup complete" not in self.log_path.read_bytes():
                self._check_alive("rabbitmq-server")
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"rabbitmq-server did not start within {self.startup_timeout:.0f}s; "
                        f"log:\n{_tail(self.log_path)}"
                    )
                time.sleep(0.1)
        except BaseException:
            self.stop()  # the node, its epmd and its directory
            raise
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            # The node and its script share a process group of their own (only
            # while its leader lives is the group id surely still ours).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self._reap(signal.SIGKILL, 10)
        if self.epmd_port:
            self._stop_epmd()
            self.epmd_port = 0
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _stop_epmd(self) -> None:
        """Stop the epmd this node started on its private port (it daemonises,
        so it left the node's process group): asked to stop on that port, the
        way epmd is meant to be stopped, once the node is gone from it."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                answer = subprocess.run(
                    ["epmd", "-port", str(self.epmd_port), "-kill"],
                    capture_output=True,
                    timeout=5,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired):
                return
            text = answer.stdout + answer.stderr
            if b"Killed" in text or b"Cannot connect" in text or b"not running" in text:
                return
            time.sleep(0.1)  # "living nodes": the node's socket is not closed yet
