"""``python -m scripts.cluster up`` starts every part of the local cluster, and
``down`` stops every process it started (about 30 s: the cluster is started
once, by the command a developer runs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from scripts import cluster
from tidings.http.auth import mint

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(240)]


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scripts.cluster", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def wait_for(what: str, done: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(0.1)


@pytest.fixture
def directory() -> Iterator[Path]:
    # Not tmp_path: PostgreSQL's user must be able to reach it, and pytest's
    # base temporary directory is private to root.
    work = Path(tempfile.mkdtemp(prefix="tidings-test-cluster-"))
    work.chmod(0o755)
    try:
        yield work / "cluster"
    finally:
        if (work / "cluster" / cluster.STATE).exists():
            run("down", "--dir", work / "cluster")
        shutil.rmtree(work, ignore_errors=True)


def conninfo(url: str) -> str:
    """libpq's form of the cluster's ``postgresql+psycopg://`` URL."""
    return url.replace("postgresql+psycopg://", "postgresql://")


def test_up_starts_every_part_and_down_stops_them_all(directory: Path) -> None:
    up = run("up", "--dir", directory)
    assert up.returncode == 0, up.stderr
    state = cluster.State.load(directory)
    for url in state.serve_urls:
        assert url in up.stdout
    processes = {
        pid: cluster.started_at(pid) for p in state.processes for pid in cluster.family(p.pid)
    }
    check_postgres(state)
    check_redis_cluster(state)
    check_serving(state)

    shown = run("status", "--dir", directory)
    assert shown.returncode == 0, shown.stderr
    assert "1 replica(s) streaming to it" in shown.stdout
    assert "WAL receiver streaming" in shown.stdout
    assert shown.stdout.count("cluster_state:ok") == 6
    assert shown.stdout.count("/healthz 200") == 2

    # A second `up` on a running cluster is refused and changes nothing.
    again = run("up", "--dir", directory)
    assert again.returncode == 1
    assert "already runs" in again.stderr
    assert cluster.State.load(directory) == state

    down = run("down", "--dir", directory)
    assert down.returncode == 0, down.stderr
    assert not directory.exists()
    left = [pid for pid, started in processes.items() if cluster.alive(pid, started)]
    assert left == [], f"still running: {left}"


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

    wait_for("the delivery to timeline:alice", delivered)
    wait_for("a Celery worker's log of the delivery", by_celery)


def test_up_refuses_a_directory_that_holds_something_else(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    refused = run("up", "--dir", tmp_path)
    assert refused.returncode == 1
    assert "is not empty and holds no cluster" in refused.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_down_without_a_cluster_says_so(tmp_path: Path) -> None:
    refused = run("down", "--dir", tmp_path)
    assert refused.returncode == 1
    assert f"no cluster recorded in {tmp_path}" in refused.stderr
