"""The Grafana dashboard in the docs: JSON Grafana imports, asking only for
series ``/metrics`` serves."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from scrape import samples
from tidings.core.results import Stats
from tidings.http.metrics import Metrics, render_outbox

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "guides" / "grafana-dashboard.json"
_SERIES = re.compile(r"\btidings_[a-z_]+")


def served() -> set[str]:
    """The name of every sample a scrape can hold, each labelled series once touched."""
    metrics = Metrics()
    metrics.observe("GET", "/v1/feeds/{group}/{key}", 200, 0.01)
    try:
        sqlite3.connect(":memory:").execute("SELECT * FROM missing")
    except sqlite3.Error as exc:
        metrics.failed(exc)
    metrics.opened("sse")
    text = metrics.render_series() + render_outbox(Stats(delivered=0, pending=0, lag_seconds=0))
    return {name for name, _ in samples(text.decode())}


def test_every_panel_asks_for_series_the_service_serves() -> None:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    # What Grafana's import asks for: a Prometheus data source to bind
    assert [i["pluginId"] for i in dashboard["__inputs"]] == ["prometheus"]
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    asked = {name for expr in exprs for name in _SERIES.findall(expr)}
    assert asked - served() == set()
    # and every series has a panel (a new one is shown, or left out on purpose here)
    families = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in served()}
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
