"""Redis Cluster fan-out: one activity to N followers on 3 local masters.

The same engine path as ``fanout``: each chunk of follower feeds is grouped
by the node owning each feed's slot and written with one script call per
node, the nodes' calls in flight together. The single-server figure of the
same run sits beside it, since on one small machine the three masters and
the engine share its cores.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import redis

from bench.harness import (
    SOURCE,
    RedisServer,
    Row,
    add_follows,
    at_least,
    engine,
    follower_ids,
    free_port,
    human,
    publish,
    settle,
    timed,
    warm_up,
)

TARGET = 200_000.0  # entries/s at 100k followers
TARGET_SIZE = 100_000
SLOTS = 16384


class BenchCluster:
    """A private 3-master Redis Cluster, no replicas, no persistence, own temp dirs.

    Benches only ever flush these servers, never another one.
    """

    def __init__(self, masters: int = 3) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server not found: apt-get install redis-server")
        self.executable = exe
        self.masters = masters
        self.tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-cluster-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.clients: list[Any] = []

    @property
    def url(self) -> str:
        return (
            f"redis+cluster://127.0.0.1:{self.clients[0].connection_pool.connection_kwargs['port']}"
        )

    def start(self) -> BenchCluster:
        buses = []
        for i in range(self.masters):
            port, bus = free_port(), free_port()
            home = self.tmp / f"node{i}"
            home.mkdir()
            log = open(home / "redis.log", "ab")  # noqa: SIM115 - the child keeps it
            # fmt: off
            argv = [
                self.executable, "--port", str(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(home),
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-port", str(bus),
            ]
            # fmt: on
            self.procs.append(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            log.close()
            self.clients.append(redis.Redis(port=port))
            buses.append(bus)
        self._wait(lambda c: c.ping())
        share = SLOTS // self.masters
        for i, client in enumerate(self.clients):
            last = SLOTS - 1 if i == self.masters - 1 else (i + 1) * share - 1
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        for client, bus in zip(self.clients[1:], buses[1:], strict=True):
            port = client.connection_pool.connection_kwargs["port"]
            self.clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus)
        known = f"cluster_known_nodes:{self.masters}"

        def formed(client: Any) -> bool:
            info = client.execute_command("CLUSTER", "INFO").decode()
            return "cluster_state:ok" in info and known in info

        self._wait(formed)
        return self

    def _wait(self, ready: Any) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.ConnectionError):
                if all(ready(c) for c in self.clients):
                    return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the bench cluster did not come up; logs in {self.tmp}")

    def flush(self) -> None:
        """FLUSHALL every node of this private cluster (and only them)."""
        for client in self.clients:
            client.flushall()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for client in self.clients:
            client.close()
        self.procs, self.clients = [], []
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> BenchCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_one(target: Any, followers: int, activities: int) -> float:
    """entries/s of ``activities`` publishes into empty follower feeds on ``target``."""
    with engine("redis", target) as eng:
        warm_up(eng)
        feeds = follower_ids(followers)
        add_follows(eng, SOURCE, feeds)
        settle()
        seconds = [timed(partial(publish, eng, SOURCE, n)) for n in range(activities)]
        cap = eng.deliverer.cap(feeds[-1].partition(":")[0])
        for feed in (feeds[0], feeds[len(feeds) // 2], feeds[-1]):
            held = eng.timeline.page(feed, limit=activities + 1, before=None, cap=cap)
            if len(held) != activities:
                raise RuntimeError(f"{feed} holds {len(held)} of {activities}")
        return followers * activities / sum(seconds)


def run(server: RedisServer, followers: int, activities: int, repeats: int) -> list[Row]:
    """Best of ``repeats`` on the cluster and on the single server, interleaved."""
    rates: dict[str, list[float]] = {"cluster": [], "single": []}
    with BenchCluster() as cluster:
        for _ in range(repeats):
            rates["cluster"].append(run_one(cluster, followers, activities))
            rates["single"].append(run_one(server, followers, activities))
    rows = []
    for name, got in rates.items():
        top = max(got)
        print(f"  fan-out {name} {human(followers)}: {', '.join(f'{r:,.0f}' for r in got)}")
        goal = name == "cluster"
        target, met = at_least(top, TARGET, followers == TARGET_SIZE) if goal else ("", None)
        store = "redis cluster (3 masters)" if goal else "redis (single server)"
        size = f"{human(followers)} followers x {activities}"
        bench = f"cluster fan-out, empty feeds, best of {repeats}"
        detail = {"rates": got, "entries": followers * activities}
        rows.append(Row(bench, store, size, top, "entries/s", target, met, detail))
    return rows
