"""A Celery worker's deliveries in the ``/metrics`` of ``tidings serve``: the
server and ``tidings worker`` write to the deployment's ``metrics_dir``, and a
scrape of the server adds up both. A real worker on a private redis-server
broker, a real server, one SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector

from http_server import tidings_serve
from scrape import samples, total, value
from tidings.http.auth import mint
from waiting import wait_until
from workers import Worker

# A server (~3 s to start) and a worker (~3 s), a few publishes: ~10 s on an
# idle machine.
pytestmark = [pytest.mark.redis, pytest.mark.timeout(240)]

SECRET = "celery-metrics-secret-0123456789abcdef"
PUBLISHES = 6
DONE = "tidings_deliveries_done_total"


def deliveries_by_process(shared: Path) -> dict[int, float]:
    """Each process's own count of outbox rows carried out, from its file."""
    counts = {}
    for path in shared.glob("counter_*.db"):
        families = MultiProcessCollector.merge([str(path)])
        counts[int(path.stem.rpartition("_")[2])] = sum(
            s.value for family in families for s in family.samples if s.name == DONE
        )
    return counts


def test_a_scrape_of_serve_reports_the_celery_workers_deliveries(
    tmp_path: Path, redis_url: str
) -> None:
    shared = tmp_path / "metrics"
    deployment = {
        "task_runner": "celery",
        "broker_url": redis_url,
        "metrics_dir": str(shared),
        "timeline_store": "sql",
        "celery_redispatch_seconds": 5.0,
    }
    env = {f"TIDINGS_{k.upper()}": str(v) for k, v in deployment.items()}
    headers = {"Authorization": f"Bearer {mint(SECRET, '*', server=True)}"}
    # Given a server and a Celery worker sharing the deployment's metrics directory
    with tidings_serve(tmp_path, secret=SECRET, env=env, startup_seconds=90) as server:
        worker = Worker(
            deployment | {"database_url": f"sqlite:///{tmp_path / 'x.db'}"},
            tmp_path / "worker.log",
        )
        try:

            def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
                r = httpx.get(f"{server.url}/metrics")
                assert r.status_code == 200
                return samples(r.text)

            # and three timelines following bob
            for reader in ("a", "b", "c"):
                r = httpx.post(
                    f"{server.url}/v1/feeds/timeline/{reader}/follows",
                    json={"source": "user:bob"},
                    headers=headers,
                )
                assert r.status_code in (200, 201), r.text
            # When bob publishes
            for n in range(PUBLISHES):
                r = httpx.post(
                    f"{server.url}/v1/feeds/user/bob/activities",
                    json={"actor": "bob", "verb": "post", "object": f"note:{n}"},
                    headers=headers,
                )
                assert r.status_code == 201, r.text

            # Then the worker delivers them, and a scrape of the server says so
            def delivered() -> bool:
                table = scrape()
                return value(table, "tidings_deliveries_pending") == 0 and (
                    sum(
                        done
                        for pid, done in deliveries_by_process(shared).items()
                        if pid != server.process.pid
                    )
                    >= PUBLISHES
                )

            wait_until(delivered, 90, "for the worker to deliver every publish")
            page = httpx.get(f"{server.url}/v1/feeds/timeline/c", headers=headers).json()
            assert len(page["results"]) == PUBLISHES
            table = scrape()
            # every row the worker's pool processes completed, in the server's totals
            by_process = deliveries_by_process(shared)
            in_worker = sum(d for pid, d in by_process.items() if pid != server.process.pid)
            assert in_worker == PUBLISHES
            assert value(table, DONE) == sum(by_process.values())
            # and each task attempt, timed
            attempts = total(table, "tidings_delivery_tasks_total", outcome="done")
            assert attempts >= 1
            assert total(table, "tidings_delivery_tasks_total", outcome="failed") == 0
            assert total(table, "tidings_delivery_task_seconds_count") == attempts
        finally:
            worker.stop()
    # The deployment's directory outlives the server (its workers still write there)
    assert any(shared.glob("counter_*.db"))


ATTEMPTS = """
import sys
from tidings.task_runners.metrics import TaskMetrics, TaskName, share

share(sys.argv[1])
metrics = TaskMetrics()
completed = iter([2, 2, 5])  # the deliverer's count after each attempt
with metrics.task(TaskName.BATCH, 0, lambda: next(completed)):
    pass
try:
    with metrics.task(TaskName.PART, 0, lambda: next(completed)):
        raise ConnectionError("the store went away")
except ConnectionError:
    pass
with metrics.task(TaskName.PART, 1, lambda: next(completed)):
    pass
"""


def test_task_attempts_are_counted_by_outcome_with_their_retries(tmp_path: Path) -> None:
    # Given a process (as a worker's pool process) counting three attempts in
    # a shared directory: a batch done, a part failed, then its retry done
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    subprocess.run([sys.executable, "-c", ATTEMPTS, str(tmp_path)], check=True, env=env)
    # When the directory is read, as a scrape of the server would
    registry_samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in MultiProcessCollector.merge(
            [str(p) for p in tmp_path.glob("*.db")], accumulate=True
        )
        for s in family.samples
    }
    # Then each attempt is counted by its outcome, the retry apart, each timed,
    # and the rows completed once
    assert (
        value(registry_samples, "tidings_delivery_tasks_total", task="batch", outcome="done") == 1
    )
    assert (
        value(registry_samples, "tidings_delivery_tasks_total", task="part", outcome="failed") == 1
    )
    assert value(registry_samples, "tidings_delivery_tasks_total", task="part", outcome="done") == 1
    assert value(registry_samples, "tidings_delivery_task_retries_total", task="part") == 1
    assert value(registry_samples, "tidings_delivery_task_retries_total", task="batch") == 0
    assert value(registry_samples, "tidings_delivery_task_seconds_count", task="part") == 2
    assert value(registry_samples, DONE) == 5
