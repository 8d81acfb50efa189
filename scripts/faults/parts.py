"""The faults themselves, and the repairs after them, on a cluster that
``scripts.cluster up`` started: each acts on a process recorded in its
``state.json``, by pid, and records the process that replaces it.

Nothing here touches a process the cluster did not start.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from scripts import cluster, procs
from scripts.cluster import ClusterError, Process, State
from servers import CommandServer, PostgresServer, RedisServer, cluster_node_options

#: How long a repair waits for what it repairs to answer again.
REPAIR_TIMEOUT = 60.0


def wait_until(what: str, done: Callable[[], bool], timeout: float = REPAIR_TIMEOUT) -> float:
    """Wait until ``done()``; the seconds it took. Raises :class:`ClusterError`
    after ``timeout``."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > timeout:
            raise ClusterError(f"gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - started


def process(state: State, name: str) -> Process:
    for found in state.processes:
        if found.name == name:
            return found
    raise ClusterError(f"no process {name!r} recorded in {state.directory}")


def kill(state: State, name: str) -> Process:
    """SIGKILL the process ``name`` (its whole group, for the tidings
    processes: uvicorn's and Celery's children die with it), and wait until
    every one of them is gone."""
    victim = process(state, name)
    if not procs.alive(victim.pid, victim.started):
        raise ClusterError(f"{name} (pid {victim.pid}) is not running")
    with contextlib.suppress(ProcessLookupError):
        if victim.group:
            os.killpg(victim.pid, signal.SIGKILL)
        else:
            os.kill(victim.pid, signal.SIGKILL)
    wait_until(f"{name} to die", lambda: not procs.group_members(victim.pid), timeout=30)
    return victim


# -- tidings serve and tidings worker -------------------------------------------------


def command_line(state: State, name: str) -> list[str]:
    """The argv the running process ``name`` was started with (read before a kill)."""
    pid = process(state, name).pid
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]


def restart_command(state: State, name: str, argv: list[str]) -> float:
    """Start ``name`` (a ``serve-N`` or ``worker-N``) again with ``argv``, on the
    same port, and record it; the seconds until it answered."""
    old = process(state, name)
    ready = cluster.answers if name.startswith("serve-") else cluster.worker_ready
    server = CommandServer(
        name,
        argv,
        home=state.directory / name,
        env=cluster.tidings_env(state, name),
        port=old.port,
        ready=ready,
    )
    started = time.monotonic()
    server.start()
    server.detach()
    state.replace(cluster.record(name, server, old.stop_signal, group=True))
    return time.monotonic() - started


_TASK = re.compile(rb"Task [\w.]+\[([0-9a-f-]+)\] (received|succeeded|retry|raised)")


def in_flight(log: Path) -> set[str]:
    """The Celery tasks a worker's log shows received and not yet ended."""
    running: set[str] = set()
    for task, what in _TASK.findall(log.read_bytes()):
        if what == b"received":
            running.add(task.decode())
        else:
            running.discard(task.decode())
    return running


def when_busy(log: Path, timeout: float) -> set[str]:
    """Wait (up to ``timeout``) until the worker logging to ``log`` runs a
    task; the tasks in flight then (none if it never did)."""
    deadline = time.monotonic() + timeout
    while not (running := in_flight(log)) and time.monotonic() < deadline:
        time.sleep(0.002)
    return running


# -- PostgreSQL -----------------------------------------------------------------------


def halt_postgres(state: State) -> None:
    """Stop the primary as ``pg_ctl stop -m fast`` does (SIGINT: sessions
    ended, a checkpoint, the postmaster gone), keeping its data."""
    primary = process(state, "pg-primary")
    with contextlib.suppress(ProcessLookupError):
        os.kill(primary.pid, signal.SIGINT)
    wait_until("PostgreSQL to stop", lambda: not procs.family(primary.pid), timeout=60)


def resume_postgres(state: State) -> float:
    """Start the primary again on its port, with its data; record it; the
    seconds until it accepted connections."""
    old = process(state, "pg-primary")
    server = PostgresServer(home=state.directory / "pg-primary")
    started = time.monotonic()
    server.resume(old.port)
    server.detach()
    state.replace(cluster.record("pg-primary", server, old.stop_signal))
    return time.monotonic() - started


# -- Redis Cluster --------------------------------------------------------------------


def _node(port: int) -> Any:
    return redis.Redis(port=port, socket_timeout=2, decode_responses=True)


def redis_nodes(state: State) -> list[Process]:
    return [p for p in state.processes if p.name.startswith("redis-")]


def role(port: int) -> str:
    """``master`` or ``slave`` (Redis's word), or ``down``."""
    try:
        with contextlib.closing(_node(port)) as client:
            return str(client.info("replication")["role"])
    except (redis.RedisError, OSError):
        return "down"


def a_master(state: State) -> Process:
    """A master of the cluster that has a replica linked (the one to kill)."""
    for node in redis_nodes(state):
        with contextlib.closing(_node(node.port)) as client:
            info = client.info("replication")
        if info["role"] == "master" and int(info.get("connected_slaves", 0)) > 0:
            return node
    raise ClusterError("no Redis master with a replica linked")


def replica_of(state: State, master: Process) -> Process:
    for node in redis_nodes(state):
        if node is master or role(node.port) != "slave":
            continue
        with contextlib.closing(_node(node.port)) as client:
            info = client.info("replication")
        if int(info.get("master_port", 0)) == master.port:
            return node
    raise ClusterError(f"no replica of the Redis master {master.name}")


def cluster_ok(state: State, *, skip: Process | None = None) -> bool:
    """Every node (``skip`` aside) says ``cluster_state:ok``."""
    for node in redis_nodes(state):
        if node is skip:
            continue
        try:
            with contextlib.closing(_node(node.port)) as client:
                info = client.execute_command("CLUSTER", "INFO")
        except (redis.RedisError, OSError):
            return False
        if "cluster_state:ok" not in info:
            return False
    return True


def _bus_port(home: Path) -> int:
    """The cluster bus port the node in ``home`` was known by (its nodes.conf)."""
    for line in (home / "nodes.conf").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and "myself" in fields[2]:
            return int(fields[1].split("@")[1].split(",")[0])
    raise ClusterError(f"no 'myself' line in {home / 'nodes.conf'}")


def restart_redis_node(state: State, name: str) -> float:
    """Start the Redis node ``name`` again on its ports, from its nodes.conf
    (it rejoins as a replica of whichever node took its slots), record it,
    and wait until it replicates and the cluster is ok; the seconds taken."""
    old = process(state, name)
    index = int(name.rpartition("-")[2]) - 1
    home = state.directory / "redis-cluster" / f"redis-{index}"
    options = cluster_node_options(state.redis_node_timeout_ms)
    server = RedisServer(extra=options, cluster=True, home=home)
    server.port, server.bus_port = old.port, _bus_port(home)
    started = time.monotonic()
    server.start()
    server.detach()
    state.replace(cluster.record(name, server, old.stop_signal))

    def replicating() -> bool:
        try:
            with contextlib.closing(_node(old.port)) as client:
                info = client.info("replication")
        except (redis.RedisError, OSError):
            return False
        return bool(info["role"] == "slave" and info.get("master_link_status") == "up")

    wait_until(f"{name} to replicate again", replicating)
    wait_until("cluster_state:ok on every node", lambda: cluster_ok(state))
    return time.monotonic() - started


def pause(state: State, name: str) -> None:
    """SIGSTOP the process ``name``: it holds its sockets and reads nothing."""
    os.kill(process(state, name).pid, signal.SIGSTOP)


def unpause(state: State, name: str) -> None:
    os.kill(process(state, name).pid, signal.SIGCONT)


def cut_replicas(port: int) -> int:
    """Close the master's links to its replicas (CLIENT KILL TYPE replica):
    what it writes from now on reaches none that cannot reconnect; its
    replication offset then."""
    with contextlib.closing(_node(port)) as client:
        client.execute_command("CLIENT", "KILL", "TYPE", "replica")
        return int(client.info("replication")["master_repl_offset"])


def repl_offset(port: int) -> int:
    """Bytes of writes the master has had to replicate since it started."""
    with contextlib.closing(_node(port)) as client:
        return int(client.info("replication")["master_repl_offset"])


def masters(state: State) -> list[Process]:
    return [node for node in redis_nodes(state) if role(node.port) == "master"]


def config_get(port: int, name: str) -> str:
    with contextlib.closing(_node(port)) as client:
        return str(client.config_get(name)[name])


def config_set(port: int, name: str, value: str | int) -> None:
    with contextlib.closing(_node(port)) as client:
        client.config_set(name, value)


def used_memory(port: int) -> int:
    with contextlib.closing(_node(port)) as client:
        return int(client.info("memory")["used_memory"])


def oom_errors(port: int) -> int:
    """Commands the node refused for its memory limit (INFO errorstats)."""
    with contextlib.closing(_node(port)) as client:
        stats = client.info("errorstats")
    return int(stats.get("errorstat_OOM", {}).get("count", 0))
