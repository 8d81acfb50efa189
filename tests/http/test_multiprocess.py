"""The directory ``tidings serve`` shares its workers' metrics through, and
the files of workers gone; with real processes writing real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from scrape import samples, value
from tidings.http.multiprocess import forget_dead, shared_metrics
from tidings.task_runners.metrics import ENV

# Two short Python processes (~0.3 s each).

WORKER = """
import sys
from prometheus_client import Counter, Gauge
Counter("done", "work done").inc(3)
Gauge("open", "open now", multiprocess_mode="livesum").inc(2)
print("ready", flush=True)
sys.stdin.read()  # until the test closes it (or at once: stdin is empty)
"""


def start_worker(shared: Path, *, stay: bool) -> subprocess.Popen[str]:
    env = {**os.environ, ENV: str(shared)}
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER],
        env=env,
        stdin=subprocess.PIPE if stay else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline() == "ready\n"
    return worker


def scrape(shared: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(shared))
    return samples(generate_latest(registry).decode())


def test_a_dead_workers_live_gauges_go_and_its_counts_stay(tmp_path: Path) -> None:
    # Given two workers that counted, one still running, one gone (killed:
    # it never said it was going)
    with start_worker(tmp_path, stay=True), start_worker(tmp_path, stay=False) as gone:
        gone.wait()
        assert value(scrape(tmp_path), "open") == 4
        # When the files of processes no longer running are dropped
        assert forget_dead(str(tmp_path)) == [gone.pid]
        # Then the open connections are the running worker's, and the work
        # done is still both workers'
        table = scrape(tmp_path)
        assert value(table, "open") == 2
        assert value(table, "done_total") == 6
        assert forget_dead(str(tmp_path)) == []  # (nothing more to drop)
        # (leaving the with closes the running one's stdin: it ends)


def test_the_shared_directory_lives_as_long_as_the_server() -> None:
    before = os.environ.get(ENV)
    with shared_metrics() as path:
        # (the processes started within inherit it)
        assert os.environ[ENV] == path
        assert Path(path).is_dir()
        (Path(path) / "counter_1.db").write_bytes(b"")
    assert not Path(path).exists()
    assert os.environ.get(ENV) == before
