"""A local deployment of tidings on 127.0.0.1, started by one command, no Docker.

    python -m scripts.cluster up        # make cluster
    python -m scripts.cluster status
    python -m scripts.cluster down      # make cluster-down

``up`` starts, each a plain process on a free loopback port:

- PostgreSQL, a primary and a streaming replica of it (``pg_basebackup -R``);
- a Redis Cluster of 3 masters with a replica each (the timeline store);
- a plain ``redis-server``, the Celery broker (Celery's Redis transport
  cannot use a cluster);
- 2 ``tidings serve --workers 2`` on two ports, publishing with
  ``task_runner=celery``;
- 2 ``tidings worker`` (Celery) that carry out the deliveries.

``serve-i`` and ``worker-i`` share a ``metrics_dir`` (``metrics-<i>``), as
the server and Celery workers of one host do, so each server's
``/metrics`` reports its worker's delivery tasks.

It returns once every part answers (PostgreSQL connections, the replica
streaming, ``cluster_state:ok`` with every replica linked, the broker's PING,
``/healthz`` on both ports, each worker's "ready"), prints the URLs and
leaves everything running. The state directory (``--dir``, default
``.cluster``) holds each server's files and log, ``state.json`` (pids and
URLs) and ``cluster.env`` (``source`` it to point ``tidings`` at the
cluster). ``down`` stops every process it recorded, by pid, and removes the
directory; ``status`` shows what runs.

It lives in the repository, not in the package: tidings must not depend on
server binaries. It starts the servers with the test suite's own code
(``tests/support/servers.py``), the one place that knows how to run them
privately (PostgreSQL as the ``postgres`` user when root, free ports).
PostgreSQL runs with ``fsync=off`` there: a machine for measuring, not for
keeping data.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
# The test suite's server code (see the docstring); pytest has it on its path.
sys.path.insert(0, str(ROOT / "tests" / "support"))
from scripts.procs import Usage, alive, family, group_members, started_at, usage_of  # noqa: E402
from servers import (  # noqa: E402
    CommandServer,
    PostgresServer,
    RedisCluster,
    RedisServer,
    ServerError,
    free_port,
)

TIDINGS = str(Path(sys.executable).with_name("tidings"))
DEFAULT_DIR = Path(".cluster")
STATE = "state.json"
ENV_FILE = "cluster.env"
DATABASE = "tidings"
#: Seconds ``down`` waits for a process group to end before SIGKILL.
STOP_TIMEOUT = 30.0
#: How long a delivery dispatched to Celery stays leased before any
#: dispatcher sends it again (``TIDINGS_CELERY_REDISPATCH_SECONDS``; 300 by
#: default): a batch a SIGKILLed worker held is finished this soon after by
#: another (``python -m scripts.faults celery-kill``). Well above what a
#: batch waits in the queue and runs under the load bench.
REDISPATCH_SECONDS = 20.0
#: The Redis Cluster nodes' ``cluster-node-timeout`` (15 s by default): a
#: master SIGKILLed is replaced by its replica a second or two after this.
REDIS_NODE_TIMEOUT_MS = 5000


class ClusterError(RuntimeError):
    """The cluster could not be started, found or stopped."""


@dataclass(frozen=True)
class Layout:
    """How many of each part ``up`` starts."""

    serve: int = 2
    serve_workers: int = 2
    workers: int = 2
    worker_concurrency: int = 2
    redis_masters: int = 3
    redis_replicas: int = 1
    #: ``TIDINGS_CELERY_REDISPATCH_SECONDS``, and the Redis nodes'
    #: ``cluster-node-timeout``: how soon a lost batch is sent again and a
    #: dead master replaced. Shorter for a quick run of the fault scenarios
    #: (``up --redispatch-seconds 5 --redis-node-timeout 2000``).
    redispatch_seconds: float = REDISPATCH_SECONDS
    redis_node_timeout_ms: int = REDIS_NODE_TIMEOUT_MS


@dataclass(frozen=True)
class Process:
    """A process ``up`` started: the leader of a process group of its own."""

    name: str
    pid: int
    #: Clock ticks after boot when it started (/proc/PID/stat): with the pid,
    #: it tells this process from a later one that reuses the pid.
    started: int
    #: How ``down`` asks it to stop, and whether its whole group is told.
    stop_signal: str
    group: bool
    port: int = 0


@dataclass
class State:
    """What ``up`` recorded in ``state.json``."""

    directory: Path
    secret: str
    database_url: str
    replica_url: str
    redis_url: str
    broker_url: str
    serve_urls: list[str]
    processes: list[Process] = field(default_factory=list)
    redispatch_seconds: float = REDISPATCH_SECONDS
    redis_node_timeout_ms: int = REDIS_NODE_TIMEOUT_MS

    def settings_env(self) -> dict[str, str]:
        """The ``TIDINGS_*`` variables every tidings process of the cluster runs with."""
        return {
            "TIDINGS_DATABASE_URL": self.database_url,
            "TIDINGS_REDIS_URL": self.redis_url,
            "TIDINGS_BROKER_URL": self.broker_url,
            "TIDINGS_TASK_RUNNER": "celery",
            "TIDINGS_CELERY_REDISPATCH_SECONDS": f"{self.redispatch_seconds:g}",
            "TIDINGS_SECRET": self.secret,
            # Only these settings: no developer's tidings.toml leaks in.
            "TIDINGS_CONFIG": str(self.directory / "no-tidings.toml"),
        }

    def replace(self, process: Process) -> None:
        """Record ``process`` in place of the one of its name (restarted by
        ``scripts.faults``), and save."""
        self.processes = [process if p.name == process.name else p for p in self.processes]
        self.save()

    def save(self) -> None:
        data = asdict(self) | {"directory": str(self.directory)}
        path = self.directory / STATE
        path.write_text(json.dumps(data, indent=2) + "\n")
        path.chmod(0o600)  # it holds the secret
        lines = [f"export {k}={v}" for k, v in self.settings_env().items()]
        lines += [
            f'export CLUSTER_SERVE_URLS="{" ".join(self.serve_urls)}"',
            f"export CLUSTER_PG_REPLICA_URL={self.replica_url}",
        ]
        env = self.directory / ENV_FILE
        env.write_text(
            "# The local cluster (scripts/cluster.py); `source` it to point tidings at it.\n"
            + "\n".join(lines)
            + "\n"
        )
        env.chmod(0o600)

    @classmethod
    def load(cls, directory: Path) -> State:
        path = directory / STATE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(f"no cluster recorded in {directory} (no {STATE})") from None
        data["directory"] = Path(data["directory"])
        data["processes"] = [Process(**p) for p in data["processes"]]
        return cls(**data)


# -- processes ---------------------------------------------------------------------------


def usage(state: State) -> dict[str, list[Usage]]:
    """The usage of each recorded process and all its children (PostgreSQL's
    backends, uvicorn's and Celery's workers), by process name."""
    return {p.name: [usage_of(pid) for pid in family(p.pid)] for p in state.processes}


def _is_ours(process: Process) -> bool:
    """Whether the group ``process`` led may still be signalled as ours: its
    leader is the very process started, or gone with members left behind
    (a group's id is not given to a new process while any member lives)."""
    if started_at(process.pid) == process.started:
        return True
    return started_at(process.pid) is None and bool(group_members(process.pid))


def _stop(process: Process) -> None:
    if not _is_ours(process):
        return
    sig = signal.Signals[process.stop_signal]
    with contextlib.suppress(ProcessLookupError):
        if process.group:
            os.killpg(process.pid, sig)
        else:
            os.kill(process.pid, sig)
    if _wait_gone(process.pid, STOP_TIMEOUT):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    if not _wait_gone(process.pid, 10):
        raise ClusterError(f"{process.name} (pid {process.pid}) survived SIGKILL")


def _wait_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while group_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# -- up ---------------------------------------------------------------------------------


def up(directory: Path, layout: Layout = Layout()) -> State:
    """Start the cluster in ``directory`` and return what was recorded."""
    directory = directory.resolve()
    _claim(directory)
    started: list[Any] = []
    try:
        state = _start_all(directory, layout, started)
    except BaseException:
        for server in reversed(started):
            server.stop()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    for server in started:
        server.detach()
    state.save()
    return state


def _claim(directory: Path) -> None:
    """Make ``directory``, refusing one that holds a running cluster, or
    anything else; a directory left by a cluster whose processes are all
    gone is cleared."""
    if directory.exists() and not (directory / STATE).exists() and any(directory.iterdir()):
        raise ClusterError(f"{directory} is not empty and holds no cluster: choose another --dir")
    if (directory / STATE).exists():
        state = State.load(directory)
        running = [p.name for p in state.processes if _is_ours(p)]
        if running:
            raise ClusterError(
                f"a cluster already runs from {directory} ({', '.join(running)}): "
                "stop it first (make cluster-down)"
            )
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    directory.chmod(0o755)  # PostgreSQL's user must reach its directories below
    if os.geteuid() == 0:  # (then PostgreSQL runs as the postgres user)
        closed = [p for p in directory.parents if not p.stat().st_mode & stat.S_IXOTH]
        if closed:
            directory.rmdir()
            raise ClusterError(
                f"PostgreSQL runs as the postgres user, which cannot reach {directory}: "
                f"{closed[0]} is not searchable by others (chmod o+x it, or choose another --dir)"
            )


def _start_all(directory: Path, layout: Layout, started: list[Any]) -> State:
    primary = PostgresServer(home=directory / "pg-primary")
    started.append(primary.start())
    database_url = primary.new_database(DATABASE)
    with ThreadPoolExecutor(1) as pool:
        # The schema (seconds of imports, then SQL) while the rest starts.
        migrated = pool.submit(_migrate, database_url, directory)
        replica = PostgresServer(home=directory / "pg-replica")
        started.append(replica.start_replica(primary))
        _wait_for("the PostgreSQL replica to stream", replica.streaming)
        cluster = RedisCluster(
            layout.redis_masters,
            replicas=layout.redis_replicas,
            home=directory / "redis-cluster",
            node_timeout_ms=layout.redis_node_timeout_ms,
        )
        cluster.start()
        started.extend(cluster.nodes)
        broker = RedisServer(home=directory / "broker")
        started.append(broker.start())
        migrated.result()
    state = State(
        directory=directory,
        secret=secrets.token_urlsafe(48),
        database_url=database_url,
        replica_url=replica.url_for(DATABASE),
        redis_url=cluster.url,
        broker_url=broker.url,
        serve_urls=[],
        redispatch_seconds=layout.redispatch_seconds,
        redis_node_timeout_ms=layout.redis_node_timeout_ms,
    )
    env = tidings_env(state)
    commands = [
        _serve(directory, i, layout, env | metrics_env(directory, f"serve-{i}", layout.serve))
        for i in range(1, layout.serve + 1)
    ]
    commands += [
        _worker(directory, i, layout, env | metrics_env(directory, f"worker-{i}", layout.serve))
        for i in range(1, layout.workers + 1)
    ]
    started.extend(_start_together(commands))
    state.serve_urls = [f"http://127.0.0.1:{c.port}" for c in commands if c.port]
    state.processes = [
        record("pg-primary", primary, "SIGINT"),  # PostgreSQL's fast shutdown
        record("pg-replica", replica, "SIGINT"),
        *(record(f"redis-{i}", n, "SIGTERM") for i, n in enumerate(cluster.nodes, 1)),
        record("broker", broker, "SIGTERM"),
        *(record(c.name, c, "SIGTERM", group=True) for c in commands),
    ]
    return state


def record(name: str, server: Any, stop_signal: str, *, group: bool = False) -> Process:
    started = started_at(server.pid)
    if started is None:
        raise ClusterError(f"{name} exited; log in {server.log_path}")
    return Process(name, server.pid, started, stop_signal, group, server.port)


def _wait_for(what: str, ready: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise ClusterError(f"gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(0.1)


def tidings_env(state: State, name: str = "") -> dict[str, str]:
    """The environment of a tidings process of the cluster (``name``: that
    ``serve-N`` or ``worker-N``, given its metrics directory)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env |= state.settings_env() | {"PYTHONUNBUFFERED": "1"}
    if name:
        env |= metrics_env(state.directory, name, len(state.serve_urls))
    return env


def metrics_env(directory: Path, name: str, serves: int) -> dict[str, str]:
    """``metrics_dir`` of ``serve-N`` or ``worker-N``: ``serve-i`` and
    ``worker-i`` (further workers dealt round) share ``metrics-<i>``, as a
    server and the Celery workers of one host do: a scrape of a server's
    ``/metrics`` reports its workers' delivery tasks too (one directory per
    server, else each would report the other's requests)."""
    host = (int(name.rpartition("-")[2]) - 1) % serves + 1
    return {"TIDINGS_METRICS_DIR": str(directory / f"metrics-{host}")}


def _migrate(database_url: str, directory: Path) -> None:
    """Once, before any process serves (as docs/guides/operations.md asks)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env |= {
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_CONFIG": str(directory / "no-tidings.toml"),
    }
    done = subprocess.run(
        [TIDINGS, "migrate"], env=env, cwd=directory, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise ClusterError(f"tidings migrate failed:\n{done.stdout}{done.stderr}")


def _serve(directory: Path, i: int, layout: Layout, env: dict[str, str]) -> CommandServer:
    port = free_port()
    argv = [TIDINGS, "serve", "--port", str(port), "--workers", str(layout.serve_workers)]
    return CommandServer(
        f"serve-{i}", argv, home=directory / f"serve-{i}", env=env, port=port, ready=answers
    )


def _worker(directory: Path, i: int, layout: Layout, env: dict[str, str]) -> CommandServer:
    argv = [TIDINGS, "worker", "--concurrency", str(layout.worker_concurrency)]
    return CommandServer(
        f"worker-{i}", argv, home=directory / f"worker-{i}", env=env, ready=worker_ready
    )


def answers(server: CommandServer) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def worker_ready(server: CommandServer) -> bool:
    # Celery logs "<name> ready." once its consumer listens on the queues.
    return b" ready." in server.log_path.read_bytes()


def _start_together(commands: Sequence[CommandServer]) -> list[CommandServer]:
    """Start ``commands`` at once (each takes seconds to import and connect);
    a ``serve`` whose port was taken meanwhile tries another."""

    def start(command: CommandServer) -> CommandServer:
        for attempt in range(3):
            try:
                return command.start()
            except ServerError as exc:
                if not command.port or "address already in use" not in str(exc).lower():
                    raise
                if attempt == 2:
                    raise
                command.port = free_port()
                command.argv[command.argv.index("--port") + 1] = str(command.port)
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(len(commands)) as pool:
        futures = [pool.submit(start, c) for c in commands]
        errors = [f.exception() for f in futures]
    failed = [e for e in errors if e is not None]
    if failed:
        for command in commands:
            command.stop()
        raise failed[0]
    return list(commands)


# -- down and status ----------------------------------------------------------------------


def down(directory: Path) -> list[str]:
    """Stop every process of the cluster in ``directory`` and remove the
    directory; the names of those that were running."""
    directory = directory.resolve()
    state = State.load(directory)
    running = [p for p in state.processes if _is_ours(p)]
    everyone = {pid: started_at(pid) for p in running for pid in family(p.pid)}
    # The tidings processes first, all at once, then the servers they use.
    for batch in ([p for p in running if p.group], [p for p in running if not p.group]):
        if batch:
            with ThreadPoolExecutor(len(batch)) as pool:
                list(pool.map(_stop, batch))
    left = [pid for pid, started in everyone.items() if alive(pid, started)]
    if left:
        raise ClusterError(f"processes left behind: {left}")
    shutil.rmtree(directory)
    return [p.name for p in running]


def status(state: State) -> list[tuple[str, str, str]]:
    """``(name, pids, what it answers)`` of every recorded process."""
    rows = []
    for process in state.processes:
        pids = family(process.pid) if _is_ours(process) else []
        answer = _probe(state, process) if pids else "not running"
        running = f"pid {process.pid}, {len(pids)} process{'es' if len(pids) > 1 else ''}"
        rows.append((process.name, running if pids else "-", answer))
    return rows


def _probe(state: State, process: Process) -> str:
    name, port = process.name, process.port
    try:
        if name == "pg-primary":
            replicas = _sql(
                port, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
            )
            return f"primary, {replicas} replica(s) streaming to it"
        if name == "pg-replica":
            return f"replica, WAL receiver {_sql(port, 'SELECT status FROM pg_stat_wal_receiver')}"
        if name.startswith("redis-"):
            return _redis_node(port)
        if name == "broker":
            client = redis.Redis(port=port, socket_timeout=2)
            with contextlib.closing(client):
                return f"redis://127.0.0.1:{port} PING {client.ping()}"
        if name.startswith("serve-"):
            got = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return f"http://127.0.0.1:{port} /healthz {got.status_code}"
    except (OSError, psycopg.Error, redis.RedisError, httpx.HTTPError) as exc:
        return f"no answer ({type(exc).__name__}: {exc})"
    return "running"


def _sql(port: int, query: str) -> object:
    conninfo = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    with psycopg.connect(conninfo, connect_timeout=2) as conn:
        row = conn.execute(query).fetchone()
    return None if row is None else row[0]


def _redis_node(port: int) -> str:
    client: Any = redis.Redis(port=port, socket_timeout=2, decode_responses=True)
    with contextlib.closing(client):
        role = client.info("replication")["role"]
        info = client.execute_command("CLUSTER", "INFO")
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return f"127.0.0.1:{port} {role}, cluster_state:{fields.get('cluster_state', '?')}"


# -- command line -------------------------------------------------------------------------


def _print_up(state: State) -> None:
    print(f"cluster up in {state.directory}")
    print(f"  PostgreSQL primary  {state.database_url}")
    print(f"  PostgreSQL replica  {state.replica_url}")
    print(f"  Redis Cluster       {state.redis_url}")
    print(f"  Celery broker       {state.broker_url}")
    for url in state.serve_urls:
        print(f"  tidings serve       {url}")
    print(f"source {state.directory / ENV_FILE} to point tidings at it; stop it with")
    print("make cluster-down (python -m scripts.cluster down)")


@contextlib.contextmanager
def _reported() -> Iterator[None]:
    try:
        yield
    except (ClusterError, ServerError) as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the state directory")
    parser.add_argument(
        "--redispatch-seconds",
        type=float,
        default=REDISPATCH_SECONDS,
        help="up: how long a batch sent to Celery is leased before it is sent again "
        "(a killed worker's; 0.1 to 3600)",
    )
    parser.add_argument(
        "--redis-node-timeout",
        type=int,
        default=REDIS_NODE_TIMEOUT_MS,
        metavar="MS",
        help="up: the Redis nodes' cluster-node-timeout in ms (1000 to 60000)",
    )
    args = parser.parse_args(argv)
    if not 0.1 <= args.redispatch_seconds <= 3600:
        parser.error(f"--redispatch-seconds must be 0.1 to 3600, not {args.redispatch_seconds:g}")
    if not 1000 <= args.redis_node_timeout <= 60_000:
        parser.error(
            f"--redis-node-timeout must be 1000 to 60000 ms, not {args.redis_node_timeout}"
        )
    layout = Layout(
        redispatch_seconds=args.redispatch_seconds, redis_node_timeout_ms=args.redis_node_timeout
    )
    with _reported():
        if args.command == "up":
            _print_up(up(args.dir, layout))
        elif args.command == "down":
            stopped = down(args.dir)
            print(f"cluster down: stopped {len(stopped)} processes; removed {args.dir}")
        else:
            for name, pids, answer in status(State.load(args.dir.resolve())):
                print(f"{name:<10} {pids:<24} {answer}")


if __name__ == "__main__":
    main()
