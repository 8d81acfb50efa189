"""Fan-out of one activity to 100k followers through Celery vs the in-process runner.

Both run in the same process run, interleaved, on the Redis timeline store
(SQLite canonical store): the in-process runner is publish + ``drain()``; the
Celery one is publish with the Celery runner (its dispatcher thread sends the
parts) until the outbox row is complete, carried out by one ``tidings worker``
subprocess of concurrency 2 on the same redis-server (database 1 as broker).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import RedisServer, Row, add_follows, at_most, follower_ids, publish, warm_up
from tidings import Settings, Tidings

TARGET_RATIO = 1.5


def run(server: RedisServer, followers: int, repeats: int) -> list[Row]:
    tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-celery-"))
    server.flush()
    options: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp}/bench.db",
        "timeline_store": "redis",
        "redis_url": server.url,
        "broker_url": server.url.removesuffix("/0") + "/1",
    }
    try:
        with Tidings(Settings(**options), task_runner="manual") as local:
            warm_up(local)
            for i in range(repeats):
                add_follows(local, f"user:local{i}", follower_ids(followers, prefix=f"l{i}-"))
                add_follows(local, f"user:celery{i}", follower_ids(followers, prefix=f"c{i}-"))
            add_follows(local, "user:warmc", follower_ids(20_000, prefix="wc"))
            worker = start_worker(options, tmp / "worker.log")
            try:
                with Tidings(Settings(**options), task_runner="celery") as remote:
                    # Both pool processes import, connect and load scripts first.
                    deliver(remote, "user:warmc", 0)
                    local_s: list[float] = []
                    celery_s: list[float] = []
                    for i in range(repeats):
                        start = time.perf_counter()
                        publish(local, f"user:local{i}", i)
                        local_s.append(time.perf_counter() - start)
                        celery_s.append(deliver(remote, f"user:celery{i}", i))
            finally:
                stop_worker(worker)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    local_t, celery_t = statistics.median(local_s), statistics.median(celery_s)
    ratio = celery_t / local_t
    size = f"{followers:,} followers"
    print(
        f"  in-process: {[round(s, 3) for s in local_s]} s; celery: {[round(s, 3) for s in celery_s]} s"
    )
    target, met = at_most(ratio, TARGET_RATIO, followers >= 100_000)
    return [
        Row("fan-out, in-process runner", "redis", size, followers / local_t, "entries/s"),
        Row(
            "fan-out, Celery (1 worker, concurrency 2)",
            "redis",
            size,
            celery_t and followers / celery_t,
            "entries/s",
        ),
        Row("Celery / in-process time", "redis", size, ratio, "x", target, met),
    ]


def deliver(engine: Tidings, source: str, n: int) -> float:
    """Seconds from publishing to the outbox row's completion."""
    start = time.perf_counter()
    engine.add_activity(source, {"actor": "celeb", "verb": "post", "object": f"post:{n}"})
    deadline = start + 300
    while engine.admin.pending():
        if time.perf_counter() > deadline:
            raise RuntimeError("the Celery delivery did not complete in 300 s")
        time.sleep(0.002)
    return time.perf_counter() - start


def start_worker(options: dict[str, Any], log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env.update({f"TIDINGS_{k.upper()}": str(v) for k, v in options.items()})
    env["TIDINGS_CONFIG"] = str(log.with_name("absent.toml"))
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(Path(sys.executable).with_name("tidings")), "worker", "--concurrency=2"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
