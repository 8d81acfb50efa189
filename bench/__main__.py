"""Run the benches: ``python -m bench`` (all, several minutes) or ``--quick`` (smoke sizes).

Prints a markdown table and writes it as JSON to ``bench/results.json``.
``--only core,aggregates,celery,cluster,pull,publish,http,idle,client`` runs some of them and replaces only
their rows in the JSON, keeping the others (the JSON records which runs the
rows come from). ``--profile`` prints where a 100k-follower Redis fan-out
spends its time instead. ``--only peer`` runs Stream Framework on a power-law
graph (bench/peer.py); it is not part of the default run, since its first run
installs Stream Framework into a venv of its own. ``--only load`` (2 minutes)
and ``--only soak`` (10 minutes) run Locust against a local cluster
(bench/load.py); they are not part of the default run either. Nor is
``--only actstream`` (bench/django_actstream.py: django-activity-stream's
``user_stream`` against the tidings read of the same timeline), which fills a
million actions on each side first (six minutes or more on two cores).
``--only faults`` (opt-in, about 8 minutes) runs every fault scenario of
``scripts/faults`` on a local cluster under the Locust load (bench/faults.py).
``--only everyday_redis`` (also opt-in) runs the everyday bench on SQLite +
Redis and PostgreSQL + Redis alone, with PostgreSQL's share of SQLite's in
the same run. ``--only partition`` (opt-in, minutes) fills a private
PostgreSQL with 1M activities and 5M follows in the unpartitioned layout
and partitions it online while a publisher runs (bench/partition.py).
``--only getstream`` (in the default run too, a minute or two) reads the same
feed page through stream-python (Stream's v2 protocol), through tidings'
own Python client and through ``/v1`` (bench/getstream.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import tidings
from bench import (
    aggregates,
    celery,
    client,
    cluster,
    django_actstream,
    everyday,
    fanout,
    faults,
    getstream,
    http,
    http_publish,
    http_publish_serve,
    idle,
    live,
    load,
    memory,
    order,
    partition,
    peer,
    profiling,
    publish,
    pull,
    ranked,
    read,
    steady,
    users,
    webapp,
)
from bench.harness import RedisServer, Row, at_least, isolate_settings, table
from tidings import Settings


@dataclass(frozen=True)
class Sizes:
    followers: tuple[int, ...]
    activities: int
    repeats: int
    chunks: tuple[int, ...]
    zadd_requests: int
    redis_full_feeds: int
    redis_steady_activities: int
    sql_full_feeds: int
    sql_steady_activities: int
    reads: int
    aggregate_feeds: int
    sql_aggregate_feeds: int
    aggregate_activities: int
    pull_readers: int = 2_000
    order_feeds: int = 10_000
    order_activities: int = 200


FULL = Sizes(
    followers=(1_000, 10_000, 100_000),
    activities=4,
    repeats=5,
    chunks=(1_000, 10_000),
    zadd_requests=1_000_000,
    redis_full_feeds=10_000,
    # About one compaction cycle of the Redis store: a full feed is rewritten
    # after slack(800) = 200 appends, so 200 publishes amortise that copy.
    redis_steady_activities=200,
    sql_full_feeds=2_000,
    sql_steady_activities=20,
    reads=5_000,
    aggregate_feeds=10_000,
    sql_aggregate_feeds=1_000,
    aggregate_activities=5,
)
QUICK = Sizes(
    followers=(100, 1_000),
    activities=3,
    repeats=1,
    chunks=(100, 10_000),
    zadd_requests=100_000,
    redis_full_feeds=200,
    redis_steady_activities=10,
    sql_full_feeds=100,
    sql_steady_activities=5,
    reads=300,
    aggregate_feeds=200,
    sql_aggregate_feeds=100,
    aggregate_activities=2,
    pull_readers=100,
    order_feeds=200,
    order_activities=24,
)
RESULTS = Path(__file__).with_name("results.json")


#: Former names of benches, still accepted by ``--only``.
RENAMED = {"groups": "aggregates"}


def bench_names(text: str) -> list[str]:
    """The benches ``--only`` names, former names replaced by the current ones."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    return [RENAMED.get(name, name) for name in names]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    parser.add_argument("--profile", action="store_true", help="profile the big Redis fan-out")
    parser.add_argument(
        "--only",
        type=bench_names,
        default=list(DEFAULT_BENCHES),
        help=f"comma-separated benches to run, of: {', '.join(BENCHES)} "
        f"(default: all but {', '.join(sorted(OPT_IN))})",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    args = parser.parse_args()
    unknown = sorted(set(args.only) - set(BENCHES))
    if unknown:
        parser.error(f"unknown bench(es) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    sizes = QUICK if args.quick else FULL
    isolate_settings()
    started = time.perf_counter()
    rows: list[Row] = []
    with RedisServer() as server:
        machine = {
            "cpu_count": os.cpu_count(),
            "redis_version": server.version(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
            "tidings": source_version(),
            "loadavg_at_start": os.getloadavg(),
        }
        print(f"cores (os.cpu_count): {machine['cpu_count']}")
        print(f"redis-server: {machine['redis_version']}")
        print(f"python {machine['python']}, sqlite {machine['sqlite']}, {machine['platform']}")
        print(f"tidings: {machine['tidings']}")
        print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        if args.profile:
            print(profiling.run(server, sizes.followers[-1]))
            return
        for name in args.only:
            print(f"{name}:", flush=True)
            rows += BENCHES[name](server, sizes, args.quick)
    elapsed = time.perf_counter() - started
    print()
    print(table(rows))
    load = os.getloadavg()
    print(f"\n({elapsed:.0f} s; load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    run = {
        "benches": args.only,
        "machine": machine,
        "mode": "quick" if args.quick else "full",
        "sizes": asdict(sizes),
        "seconds": elapsed,
        "loadavg_at_end": load,
    }
    report = run | {"rows": [asdict(r) | {"result": r.result()} for r in rows]}
    if set(args.only) != set(DEFAULT_BENCHES) and args.out.exists():
        report = merge(json.loads(args.out.read_text()), report, run)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


def merge(previous: dict[str, Any], report: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The rows of ``report`` (a partial run) over those of ``previous``, the other
    rows kept (a row is a bench on a store: a run of some stores replaces only
    theirs); ``runs`` lists every run the rows come from."""
    ours = {(r["bench"], r["store"]) for r in report["rows"]}
    kept = [r for r in previous.get("rows", []) if (r.get("bench"), r.get("store")) not in ours]
    earlier = previous.get("runs") or [{k: v for k, v in previous.items() if k != "rows"}]
    return {"runs": [*earlier, run], "rows": kept + report["rows"]}


def source_version() -> str:
    """Where tidings was imported from, a hash of its files, its git commit and state."""
    package = Path(tidings.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".lua"):
            digest.update(path.relative_to(package).as_posix().encode() + path.read_bytes())
    where = f"{package.parent} (files sha256 {digest.hexdigest()[:12]})"
    try:
        head = git(package, "rev-parse", "--short", "HEAD")
        changed = git(package, "status", "--porcelain", "--", ".").splitlines()
    except (OSError, subprocess.CalledProcessError):
        return where
    state = f"{len(changed)} files changed" if changed else "clean"
    return f"{where} @ {head} ({state})"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def run_core(server: RedisServer, sizes: Sizes, quick: bool) -> list[Row]:
    """Flat feeds: fan-out, the ZADD baseline, steady state, reads, memory."""
    rows: list[Row] = []
    default_chunk = Settings().delivery_chunk_size

    print("fan-out into empty feeds", flush=True)
    results = fanout.run(server, sizes.followers, sizes.activities, sizes.chunks, sizes.repeats)
    rows += fanout.rows(results, default_chunk)
    engine_rate = next(
        r.rate
        for r in results
        if r.store == "redis" and r.followers == sizes.followers[-1] and not r.compared
    )
    big = next(r for r in results if r.memory)

    for members in (None, 100_000):
        print("redis-benchmark zadd", flush=True)
        server.flush()
        zadd = fanout.redis_benchmark_zadd(server, sizes.zadd_requests, members)
        size = f"-P 100 -n {sizes.zadd_requests:,}" + (f" -r {members:,}" if members else "")
        rows.append(Row("redis-benchmark ZADD", "redis", size, zadd, "requests/s"))
        ratio = engine_rate / zadd
        target, met = at_least(ratio, 0.5, sizes.followers[-1] == fanout.TARGET_SIZE)
        size = f"{sizes.followers[-1]:,} followers vs ZADD" + (
            f" -r {members:,}" if members else ""
        )
        rows.append(Row("engine fan-out / ZADD rate", "redis", size, ratio, "", target, met))

    print("full feeds: redis", flush=True)
    with steady.full_feeds(server, "redis", sizes.redis_full_feeds) as full:
        rows += memory.full_rows(full, server, "after fill")
        rows.append(steady.run(full, sizes.redis_steady_activities))
        rows += memory.full_rows(full, server, "after steady fan-out")
        rows += memory.fanout_rows(big)
        rows += read.run(full, sizes.reads)
        rows += read.ping(server, sizes.reads)

    print("full feeds: sql (SQLite)", flush=True)
    with steady.full_feeds(server, "sql", sizes.sql_full_feeds) as full:
        rows.append(steady.run(full, sizes.sql_steady_activities))
        rows += read.run(full, sizes.reads)

    return rows


BENCHES: dict[str, Callable[[RedisServer, Sizes, bool], list[Row]]] = {
    "core": run_core,
    "aggregates": lambda server, sizes, quick: aggregates.run(
        server,
        sizes.aggregate_feeds,
        sizes.sql_aggregate_feeds,
        sizes.aggregate_activities,
        sizes.reads,
    ),
    "celery": lambda server, sizes, quick: celery.run(server, sizes.followers[-1], sizes.repeats),
    "cluster": lambda server, sizes, quick: cluster.run(
        server, sizes.followers[-1], sizes.activities, sizes.repeats
    ),
    "pull": lambda server, sizes, quick: pull.run(server, sizes.pull_readers, sizes.reads),
    "publish": lambda server, sizes, quick: publish.run(
        server, sizes.followers[-1], 50 if quick else 300
    ),
    "http": lambda server, sizes, quick: http.run(server, http.QUICK if quick else http.FULL),
    "order": lambda server, sizes, quick: order.run(
        server, sizes.order_feeds, sizes.order_activities, sizes.repeats
    ),
    # One uvicorn worker on SQLite; then `tidings serve --workers 2` on
    # PostgreSQL + Redis and on SQLite, /metrics scraped under that load.
    "http_publish": lambda server, sizes, quick: [
        *http_publish.run(http_publish.QUICK if quick else http_publish.FULL),
        *http_publish_serve.run(
            server, http_publish_serve.QUICK if quick else http_publish_serve.FULL
        ),
    ],
    "idle": lambda server, sizes, quick: idle.run(
        server, sizes.followers[-1], sizes.pull_readers // 2, sizes.repeats
    ),
    "everyday": lambda server, sizes, quick: everyday.run(
        server, everyday.QUICK if quick else everyday.FULL
    ),
    # The two stores with Redis alone (SQLite + Redis, PostgreSQL + Redis),
    # for the production path's ratios; their rows replace only theirs.
    "everyday_redis": lambda server, sizes, quick: everyday.run(
        server,
        everyday.QUICK if quick else everyday.FULL,
        everyday.REDIS_STORES,
        extras=False,
    ),
    "live": lambda server, sizes, quick: live.run(server, quick),
    "client": lambda server, sizes, quick: client.run(server, quick),
    "ranked": lambda server, sizes, quick: ranked.run(server, quick),
    "users": lambda server, sizes, quick: users.run(server, quick),
    # stream-python against tidings' client and its /v1 read, on SQLite and PostgreSQL + Redis.
    "getstream": lambda server, sizes, quick: getstream.run(server, quick),
    # Runs tidings demo (a minute of seeding) and Chromium.
    "webapp": lambda server, sizes, quick: webapp.run(server, quick),
    # Its own PostgreSQL; configures Django in this process; minutes of filling.
    "actstream": lambda server, sizes, quick: django_actstream.run(server, quick),
    # Starts its own redis-server: the peer's runner is another venv's process.
    "peer": lambda server, sizes, quick: peer.run(quick),
    # Start a cluster of their own (scripts/cluster.py) and drive Locust at it.
    "load": lambda server, sizes, quick: load.run(load.QUICK if quick else load.FULL),
    "soak": lambda server, sizes, quick: load.run(load.QUICK_SOAK if quick else load.SOAK),
    # Every fault scenario (scripts/faults) on a cluster of its own, under Locust.
    "faults": lambda server, sizes, quick: faults.run(faults.QUICK if quick else faults.FULL),
    # Its own PostgreSQL, filled with 1M activities and 5M follows, then
    # partitioned online while a publisher runs (minutes).
    "partition": lambda server, sizes, quick: partition.run(
        server, partition.QUICK if quick else partition.FULL
    ),
}
# Run only when named in --only.
OPT_IN = frozenset({"peer", "actstream", "load", "soak", "faults", "everyday_redis", "partition"})
DEFAULT_BENCHES = [name for name in BENCHES if name not in OPT_IN]


if __name__ == "__main__":
    main()
