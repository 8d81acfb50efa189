"""The local cluster under Locust: the everyday mix, open SSE subscribers, memory.

``python -m bench --only load`` (2 minutes; ``--quick``: 30 s on a small
graph) or ``--only soak`` (10 minutes), or with sizes of one's own::

    python -m bench.load --seconds 120 --users 32 --subscribers 500

Steps: ``scripts/cluster.py up`` in a temporary directory (PostgreSQL and a
streaming replica, a Redis Cluster of 3 masters and 3 replicas, 2 ``tidings
serve --workers 2``, 2 Celery workers); the ``tidings demo`` graph seeded
into it through the library (a manual engine on the cluster's stores);
``--subscribers`` SSE streams held open by ``bench/sse_watch.py``; Locust
headless with ``bench/locustfile.py`` for ``--seconds`` (closed loop:
``--users`` users, each sending its next request when the last is answered);
then the outbox drained, and the cluster brought down.

Reported: requests/s in all and per request type with p50/p99 (Locust's
figures), every 5xx and the 500s among them (counted per status by the
locustfile), every acknowledged publish looked for in the canonical store
and its author's feed (``bench/acked.py``: lost or duplicated, 0 expected),
delivery lag p50/p99 (publish sent → event read by an SSE subscriber), and
the RSS of every process of the cluster (each with its children: PostgreSQL
backends, uvicorn and Celery workers) just before the load and at its end.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from scripts.faults.audit import Audit

from bench import acked
from bench.harness import Row, at_most, isolate_settings, percentile, table
from scripts import cluster, procs
from tidings import Settings, Tidings
from tidings.cli import demo

STORE = "postgres + redis cluster + celery"
LOCUSTFILE = Path(__file__).with_name("locustfile.py")
#: The locustfile's ``SENT_ON``: how a request a port refused, then sent to
#: the other, is named (not imported: that would load Locust and gevent here).
SENT_ON = "(refused: sent to the other serve)"
LOCUST = str(Path(sys.executable).with_name("locust"))
Usages = dict[str, list[procs.Usage]]


@dataclass(frozen=True)
class Sizes:
    #: What the rows are called: ``load`` or ``soak``.
    name: str
    seconds: int
    users: int
    subscribers: int
    people: int
    activities: int
    fans: int


FULL = Sizes(
    name="load", seconds=120, users=32, subscribers=500, people=1000, activities=5000, fans=2000
)
QUICK = Sizes(
    name="load", seconds=30, users=16, subscribers=100, people=200, activities=1000, fans=0
)
QUICK_SOAK = replace(QUICK, name="soak")
SOAK = Sizes(
    name="soak", seconds=600, users=32, subscribers=500, people=1000, activities=5000, fans=2000
)


def run(sizes: Sizes) -> list[Row]:
    work = Path(tempfile.mkdtemp(prefix="tidings-bench-load-"))
    work.chmod(0o755)  # PostgreSQL's user must reach the cluster's directory in it
    state = cluster.up(work / "cluster")
    try:
        print(f"  cluster up: {' '.join(state.serve_urls)}", flush=True)
        seed(state, sizes)
        env = (
            os.environ
            | state.settings_env()
            | {
                "CLUSTER_SERVE_URLS": " ".join(state.serve_urls),
                "LOAD_USERS": str(sizes.people),
                "LOAD_STATUS_FILE": str(work / "statuses.json"),
                "LOAD_ACKED_FILE": str(work / "acked.json"),
            }
        )
        watcher = _start_watcher(env, sizes.subscribers, work / "sse.json")
        try:
            before = cluster.usage(state)
            load = os.getloadavg()
            generator = {"locust": run_locust(env, sizes, work)}
            after = cluster.usage(state)
            generator["sse_watch"] = procs.usage_of(watcher.pid).cpu_seconds
            _drain(state)
            audit = acked.check(state, work / "acked.json")
        finally:
            watcher.send_signal(signal.SIGINT)
            watcher.wait(timeout=60)
        machine = {"cpu_seconds_generators": generator, "loadavg": [load, os.getloadavg()]}
        rows = _rows(sizes, work, before, after, machine)
        rows.append(_acked_row(sizes, audit))
    except BaseException:
        print(f"  the load run failed; its files are in {work}", flush=True)
        raise
    finally:
        cluster.down(state.directory)
    shutil.rmtree(work)
    return rows


def seed(state: cluster.State, sizes: Sizes) -> None:
    """``tidings demo``'s graph and month of activity, written and delivered
    by a manual engine on the cluster's stores (the serve processes see it)."""
    started = time.perf_counter()
    settings = Settings(database_url=state.database_url, redis_url=state.redis_url)
    with Tidings(settings, task_runner="manual") as engine:
        result = demo.seed(engine, sizes.people, sizes.activities, fans=sizes.fans, progress=None)
    print(
        f"  seeded {len(result.plan.users):,} people, {len(result.plan.follows):,} follows, "
        f"{len(result.plan.activities):,} activities in {time.perf_counter() - started:.0f} s",
        flush=True,
    )


def _start_watcher(env: dict[str, str], subscribers: int, out: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.sse_watch", "--subscribers", str(subscribers), "--out", out],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        proc.kill()
        raise RuntimeError(f"the SSE watcher did not start: {line!r}")
    print(f"  SSE subscribers: {line.split()[1]} of {subscribers} open", flush=True)
    return proc


def run_locust(env: dict[str, str], sizes: Sizes, work: Path) -> float:
    """Run Locust; the CPU seconds it used."""
    argv = [
        LOCUST, "-f", str(LOCUSTFILE), "--headless", "--only-summary",
        "-u", str(sizes.users), "-r", str(sizes.users), "-t", f"{sizes.seconds}s",
        "--csv", str(work / "locust"), "--stop-timeout", "10",
        "--exit-code-on-error", "0",
    ]  # fmt: skip
    # (The only child reaped meanwhile: the cluster's and the watcher's run on.)
    start = resource.getrusage(resource.RUSAGE_CHILDREN)
    with (work / "locust.log").open("wb") as log:
        done = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    end = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"locust exited {done.returncode}; see {work / 'locust.log'}")
    return end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime


def _drain(state: cluster.State, timeout: float = 120.0) -> None:
    """Wait until Celery has carried out every delivery the load left."""
    settings = Settings(database_url=state.database_url, redis_url=state.redis_url)
    with Tidings(settings, task_runner="manual") as engine:
        deadline = time.monotonic() + timeout
        while engine.admin.pending():
            if time.monotonic() > deadline:
                raise RuntimeError(f"deliveries still pending {timeout:.0f} s after the load")
            time.sleep(0.2)


def _rows(
    sizes: Sizes, work: Path, before: Usages, after: Usages, machine: dict[str, Any]
) -> list[Row]:
    size = f"{sizes.users} users, {sizes.subscribers} SSE, {sizes.seconds} s"
    stats = {r["Name"]: r for r in csv.DictReader((work / "locust_stats.csv").open())}
    statuses = json.loads((work / "statuses.json").read_text())
    print(f"  responses by status: {statuses}", flush=True)
    errors = sum(n for c in statuses.values() for s, n in c.items() if int(s) >= 500)
    http_500 = sum(c.get("500", 0) for c in statuses.values())
    # (A request one port refused went on to the other: not a failure.)
    no_answer = sum(c.get("0", 0) for k, c in statuses.items() if not k.endswith(SENT_ON))
    sent_on = sum(c.get("0", 0) for k, c in statuses.items() if k.endswith(SENT_ON))
    total = stats.pop("Aggregated")
    rows = [
        Row(
            f"{sizes.name}: all requests", STORE, size, float(total["Requests/s"]), "requests/s",
            detail={"requests": int(total["Request Count"]), "statuses": statuses,
                    "p50_ms": float(total["50%"]), "p99_ms": float(total["99%"])},
        ),
        Row(f"{sizes.name}: 5xx responses", STORE, size, errors, "", *at_most(errors, 0),
            detail={"500": http_500, "no_answer": no_answer, "refused_sent_on": sent_on}),
        Row(f"{sizes.name}: 500 responses", STORE, size, http_500, "", *at_most(http_500, 0)),
    ]  # fmt: skip
    for name, r in sorted(stats.items(), key=lambda kv: -int(kv[1]["Request Count"])):
        rows.append(
            Row(
                f"{sizes.name}: {name}, p99", STORE, size, float(r["99%"]), "ms",
                detail={"p50_ms": float(r["50%"]), "requests": int(r["Request Count"]),
                        "requests_per_s": float(r["Requests/s"]),
                        "failures": int(r["Failure Count"])},
            )
        )  # fmt: skip
    rows.append(_lag_row(sizes.name, size, json.loads((work / "sse.json").read_text())))
    rows.append(_cpu_row(sizes.name, size, before, after, int(total["Request Count"]), machine))
    rows += _memory_rows(sizes.name, size, before, after)
    return rows


def _acked_row(sizes: Sizes, audit: Audit) -> Row:
    size = f"{sizes.users} users, {sizes.subscribers} SSE, {sizes.seconds} s"
    wrong = audit.lost + audit.duplicated + audit.missing_in_feeds + audit.duplicated_in_feeds
    print(
        f"  acknowledged publishes: {audit.acknowledged:,}; lost {audit.lost}, stored twice "
        f"{audit.duplicated}; in their authors' feeds ({audit.feeds:,}): missing "
        f"{audit.missing_in_feeds}, twice {audit.duplicated_in_feeds} {audit.examples or ''}",
        flush=True,
    )
    return Row(
        f"{sizes.name}: acknowledged publishes lost or duplicated", STORE, size, wrong, "",
        *at_most(wrong, 0), detail=asdict(audit),
    )  # fmt: skip


def _lag_row(label: str, size: str, seen: dict[str, Any]) -> Row:
    lags = seen["lags"]
    p50 = percentile(lags, 50) * 1000 if lags else float("nan")
    p99 = percentile(lags, 99) * 1000 if lags else float("nan")
    detail = {
        k: seen[k] for k in ("subscribers", "opened", "events", "repeated", "ended", "failed")
    }
    return Row(f"{label}: delivery lag (SSE), p99", STORE, size, p99, "ms",
               detail=detail | {"p50_ms": p50, "samples": len(lags)})  # fmt: skip


def _cpu_row(
    label: str, size: str, before: Usages, after: Usages, requests: int, machine: dict[str, Any]
) -> Row:
    """CPU the cluster spent per request during the load (its processes'
    CPU time at the end less at the start: the machine is shared, so this
    says more than requests/s), with each process's share in the detail."""
    spent = {}
    for name, used in after.items():
        earlier = {u.pid: u.cpu_seconds for u in before.get(name, [])}
        spent[name] = round(sum(u.cpu_seconds - earlier.get(u.pid, 0.0) for u in used), 2)
    total = sum(spent.values())
    print(f"  CPU seconds during the load: {spent}; generators {machine['cpu_seconds_generators']}")
    detail = {"cpu_seconds": spent, "requests": requests} | machine
    return Row(
        f"{label}: cluster CPU per request",
        STORE,
        size,
        1000 * total / requests,
        "ms",
        detail=detail,
    )


def _memory_rows(label: str, size: str, before: Usages, after: Usages) -> list[Row]:
    """One row per process of the cluster, its children included: PSS (which
    adds up across processes sharing pages) at the end of the load; at its
    start, and every process's RSS, in the detail."""
    rows = []
    for name, used in after.items():
        start = _mb(p.pss_kb for p in before.get(name, []))
        end = _mb(p.pss_kb for p in used)
        detail = {
            "start_pss_mb": start,
            "rss_mb_start": [_mb([p.rss_kb]) for p in before.get(name, [])],
            "rss_mb_end": [_mb([p.rss_kb]) for p in used],
        }
        print(f"  memory {name}: PSS {start:.1f} → {end:.1f} MB ({len(used)} processes)")
        rows.append(Row(f"{label}: memory (PSS) {name}", STORE, size, end, "MB", detail=detail))
    return rows


def _mb(kbs: Iterable[int]) -> float:
    return round(sum(kbs) / 1024, 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=int, default=FULL.seconds)
    parser.add_argument("--users", type=int, default=FULL.users)
    parser.add_argument("--subscribers", type=int, default=FULL.subscribers)
    parser.add_argument("--people", type=int, default=FULL.people)
    parser.add_argument("--activities", type=int, default=FULL.activities)
    parser.add_argument("--fans", type=int, default=FULL.fans)
    args = parser.parse_args()
    isolate_settings()
    rows = run(Sizes(name="load", **vars(args)))
    print(table(rows))


if __name__ == "__main__":
    main()
