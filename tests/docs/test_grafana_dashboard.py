"""The Grafana dashboard in the docs: JSON Grafana imports, asking only for
series ``/metrics`` serves."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from prometheus_client.multiprocess import MultiProcessCollector

from scrape import samples
from tidings.core.results import Stats
from tidings.http.metrics import Metrics, render_outbox
from tidings.task_runners.metrics import ENV

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "guides" / "grafana-dashboard.json"
_SERIES = re.compile(r"\btidings_[a-z_]+")


#: A Celery worker's pool process counting one delivery task in a shared
#: metrics directory (``metrics_dir``), as ``tidings worker`` does.
WORKER = """
import sys
from tidings.task_runners.metrics import TaskMetrics, TaskName, share

share(sys.argv[1])
with TaskMetrics().task(TaskName.BATCH, 1, lambda: 1):
    pass
"""


def served_from_workers(directory: Path) -> set[str]:
    """The samples a scrape of ``tidings serve`` adds from the Celery workers
    sharing its metrics directory (counted in a process of their own: the
    shared files are chosen when a process first counts)."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    subprocess.run([sys.executable, "-c", WORKER, str(directory)], check=True, env=env)
    files = [str(p) for p in directory.glob("*.db")]
    return {s.name for family in MultiProcessCollector.merge(files) for s in family.samples}


def served() -> set[str]:
    """The name of every sample a scrape of the server itself can hold, each
    labelled series once touched."""
    metrics = Metrics()
    metrics.observe("GET", "/v1/feeds/{group}/{key}", 200, 0.01)
    try:
        sqlite3.connect(":memory:").execute("SELECT * FROM missing")
    except sqlite3.Error as exc:
        metrics.failed(exc)
    metrics.opened("sse")
    text = metrics.render_series() + render_outbox(Stats(delivered=0, pending=0, lag_seconds=0))
    return {name for name, _ in samples(text.decode())}


def test_every_panel_asks_for_series_the_service_serves(tmp_path: Path) -> None:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    scraped = served() | served_from_workers(tmp_path)
    # What Grafana's import asks for: a Prometheus data source to bind
    assert [i["pluginId"] for i in dashboard["__inputs"]] == ["prometheus"]
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    asked = {name for expr in exprs for name in _SERIES.findall(expr)}
    assert asked - scraped == set()
    # and every series has a panel (a new one is shown, or left out on purpose here)
    families = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in scraped}
    shown = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in asked}
    assert families - shown == set()
    # Panels do not overlap on Grafana's 24-column grid
    taken: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        box = panel["gridPos"]
        cells = {
            (x, y)
            for x in range(box["x"], box["x"] + box["w"])
            for y in range(box["y"], box["y"] + box["h"])
        }
        assert box["x"] + box["w"] <= 24, panel["title"]
        assert not cells & taken, panel["title"]
        taken |= cells
