"""The fault scenarios, long, under the Locust load: ``python -m bench --only faults``.

``scripts/faults`` runs each scenario under a steady load of its own, the
load its check of acknowledged writes covers. Here the cluster also carries
the everyday Locust mix (bench/load.py's locustfile: reads of every kind,
publishes, reactions, follows, seen/read) on ``tidings demo``'s graph for
the whole of each scenario, so a fault meets a deployment at work. Each
scenario gives rows: time to recover, acknowledged writes lost or duplicated
(target 0), responses 500 (the scenario's traffic and Locust's; target 0)
and, for ``serve-kill``, the SSE gap (target 0).

Opt-in (about 8 minutes; ``--quick``: about 3): one cluster, started and
stopped here, for every scenario in turn.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from scripts.faults.report import Report
from scripts.faults.scenarios import SCENARIOS, run_scenario

from bench import load
from bench.harness import Row, at_most
from scripts import cluster

STORE = load.STORE


@dataclass(frozen=True)
class Sizes:
    #: Seconds of load per scenario (the fault at a quarter, the repair at three).
    seconds: int
    #: Publishes a second of the scenario's own traffic.
    rate: float
    #: Locust users, and the seeded graph (bench/load.py's sizes).
    graph: load.Sizes


FULL = Sizes(seconds=60, rate=40, graph=replace(load.QUICK, name="faults", users=8))
QUICK = Sizes(seconds=20, rate=20, graph=replace(load.QUICK, name="faults", users=4))


def run(sizes: Sizes) -> list[Row]:
    work = Path(tempfile.mkdtemp(prefix="tidings-bench-faults-"))
    work.chmod(0o755)  # PostgreSQL's user must reach the cluster's directory in it
    state = cluster.up(work / "cluster")
    rows: list[Row] = []
    try:
        print(f"  cluster up: {' '.join(state.serve_urls)}", flush=True)
        load.seed(state, sizes.graph)
        for name, scenario in SCENARIOS.items():
            print(f"  {name}: {scenario.about}", flush=True)
            loadavg = os.getloadavg()
            report, locust = _under_locust(state, name, sizes, work / name)
            print("    " + report.text().replace("\n", "\n    "), flush=True)
            rows += _rows(report, locust, sizes, loadavg)
    except BaseException:
        print(f"  the faults run failed; its files are in {work}", flush=True)
        raise
    finally:
        cluster.down(state.directory)
    shutil.rmtree(work)
    return rows


def _under_locust(
    state: cluster.State, name: str, sizes: Sizes, work: Path
) -> tuple[Report, dict[str, dict[str, int]]]:
    """Run scenario ``name`` with Locust on the cluster meanwhile; its report and
    Locust's responses by request type and status."""
    work.mkdir()
    env = (
        dict(os.environ)
        | state.settings_env()
        | {
            "CLUSTER_SERVE_URLS": " ".join(state.serve_urls),
            "LOAD_USERS": str(sizes.graph.people),
            "LOAD_STATUS_FILE": str(work / "statuses.json"),
        }
    )
    # Locust runs a little longer than the scenario's load, which it brackets.
    graph = replace(sizes.graph, seconds=sizes.seconds + 10)
    failed: list[BaseException] = []

    def locust() -> None:
        try:
            load.run_locust(env, graph, work)
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=locust, name="locust", daemon=True)
    thread.start()
    time.sleep(3)  # Locust's users are hatched
    report = run_scenario(SCENARIOS[name], state, sizes.seconds, sizes.rate, log=_say)
    thread.join(timeout=sizes.seconds + 120)
    if failed:
        raise failed[0]
    statuses: dict[str, dict[str, int]] = json.loads((work / "statuses.json").read_text())
    return report, statuses


def _rows(
    report: Report, locust: dict[str, dict[str, int]], sizes: Sizes, loadavg: tuple[float, ...]
) -> list[Row]:
    name = report.scenario
    size = f"{sizes.seconds} s, {sizes.rate:g} publishes/s + Locust {sizes.graph.users} users"
    locust_500 = sum(c.get("500", 0) for c in locust.values())
    locust_503 = sum(c.get("503", 0) for c in locust.values())
    # Refused by a killed serve and sent to the other (bench/locustfile.py).
    sent_on = sum(c.get("0", 0) for k, c in locust.items() if k.endswith(load.SENT_ON))
    a = report.audit
    lost = a.lost + a.duplicated + a.missing_in_feeds + a.duplicated_in_feeds
    errors = report.count(500) + locust_500
    detail = report.as_dict() | {"locust_statuses": locust, "loadavg_at_start": loadavg}
    rows = [
        Row(f"faults {name}: recovered", STORE, size, report.recovered_s, "s",
            detail=detail),
        Row(f"faults {name}: acknowledged writes lost or duplicated", STORE, size, lost, "",
            *at_most(lost, 0), detail={"acknowledged": a.acknowledged, "feeds": a.feeds}),
        Row(f"faults {name}: responses 500", STORE, size, errors, "", *at_most(errors, 0),
            detail={"http_503": report.count(503) + locust_503,
                    "retry_after": report.retry_after, "other_5xx": report.other_5xx,
                    "locust_refused_sent_on": sent_on}),
    ]  # fmt: skip
    if report.sse is not None:
        gap = report.sse.missing
        rows.append(
            Row(f"faults {name}: SSE gap", STORE, size, gap, "", *at_most(gap, 0),
                detail=vars(report.sse))
        )  # fmt: skip
    return rows


def _say(line: str) -> None:
    print(f"  {line}", flush=True)
