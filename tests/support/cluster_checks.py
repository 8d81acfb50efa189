"""What a running local cluster (``scripts/cluster.py``) must show: each part
answering, the replicas replicating, a publish delivered by Celery. Shared by
the tests that start one (tests/scripts/)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

from scripts import cluster
from tidings.http.auth import mint

ROOT = Path(__file__).resolve().parents[2]


def run(
    *args: str | Path, module: str = "scripts.cluster", timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``python -m <module> args`` from the repository, as a developer runs it."""
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def wait_for(what: str, done: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(0.1)


def conninfo(url: str) -> str:
    """libpq's form of the cluster's ``postgresql+psycopg://`` URL."""
    return url.replace("postgresql+psycopg://", "postgresql://")


def check_postgres(state: cluster.State) -> None:
    """The replica streams from the primary, and a write reaches it."""
    with psycopg.connect(conninfo(state.database_url), autocommit=True) as primary:
        rows = primary.execute("SELECT state FROM pg_stat_replication").fetchall()
        assert rows == [("streaming",)]
        primary.execute("CREATE TABLE probe (n int)")
        primary.execute("INSERT INTO probe VALUES (7)")
    with psycopg.connect(conninfo(state.replica_url), autocommit=True) as replica:
        wait_for("the row on the replica", lambda: _replica_has_probe(replica))


def _replica_has_probe(replica: psycopg.Connection[tuple[object, ...]]) -> bool:
    try:
        return replica.execute("SELECT n FROM probe").fetchall() == [(7,)]
    except psycopg.errors.UndefinedTable:
        return False


def check_redis_cluster(state: cluster.State) -> None:
    """3 masters holding every slot, each with a replica."""
    node: Any = redis.Redis.from_url(state.redis_url.replace("+cluster", ""))
    try:
        assert b"cluster_state:ok" in node.execute_command("CLUSTER", "INFO")
        nodes = [n.split() for n in node.execute_command("CLUSTER", "NODES").decode().splitlines()]
    finally:
        node.close()
    masters = [n[0] for n in nodes if "master" in n[2]]
    replicated = [n[3] for n in nodes if "slave" in n[2]]  # (the id of its master)
    assert len(masters) == 3
    assert sorted(replicated) == sorted(masters)


def check_serving(state: cluster.State) -> None:
    """Both ports answer; a publish through one is read through the other
    once a Celery worker has delivered it."""
    first, second = state.serve_urls
    for url in state.serve_urls:
        assert httpx.get(f"{url}/healthz").status_code == 200
    headers = {"Authorization": f"Bearer {mint(state.secret, '*', server=True)}"}
    follow = {"source": "user:bob"}
    followed = httpx.post(f"{first}/v1/feeds/timeline/alice/follows", json=follow, headers=headers)
    assert followed.status_code == 201
    post = {"actor": "bob", "verb": "post", "object": "note:1"}
    published = httpx.post(f"{first}/v1/feeds/user/bob/activities", json=post, headers=headers)
    assert published.status_code == 201

    def delivered() -> bool:
        page = httpx.get(f"{second}/v1/feeds/timeline/alice", headers=headers).json()
        return [a["id"] for a in page["results"]] == [published.json()["id"]]

    def by_celery() -> bool:  # (not the serve process's own runner)
        logs = b"".join(p.read_bytes() for p in state.directory.glob("worker-*/*.log"))
        return b"Task tidings.deliver_batch" in logs and b"succeeded" in logs

    def counted() -> bool:  # (by the server sharing that worker's metrics_dir)
        return sum(delivery_tasks(url) for url in state.serve_urls) > 0

    wait_for("the delivery to timeline:alice", delivered)
    wait_for("a Celery worker's log of the delivery", by_celery)
    wait_for("the delivery task in a server's /metrics", counted)


def delivery_tasks(url: str) -> float:
    """The Celery delivery tasks done that ``url``'s ``/metrics`` reports."""
    lines = httpx.get(f"{url}/metrics").text.splitlines()
    done = [line for line in lines if line.startswith("tidings_delivery_tasks_total{")]
    return sum(float(line.split()[-1]) for line in done if 'outcome="done"' in line)
