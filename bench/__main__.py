"""Run every bench: ``python -m bench`` (full, a few minutes) or ``--quick`` (smoke sizes).

Prints a markdown table and writes it as JSON to ``bench/results.json``;
``--profile`` prints where a 100k-follower Redis fan-out spends its time instead;
``--http-only`` runs only the HTTP bench (wrk against uvicorn) and replaces the
HTTP rows of the JSON, keeping the others; ``--groups-only`` does the same for
the aggregated-feed bench, and ``--cluster-only`` for the Redis Cluster fan-out
(3 local masters, beside the single server's figure of the same run).
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
from dataclasses import asdict, dataclass
from pathlib import Path

import tidings
from bench import cluster, fanout, groups, http, memory, profiling, read, steady
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
    group_feeds: int
    sql_group_feeds: int
    group_activities: int


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
    group_feeds=10_000,
    sql_group_feeds=1_000,
    group_activities=5,
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
    group_feeds=200,
    sql_group_feeds=100,
    group_activities=2,
)
RESULTS = Path(__file__).with_name("results.json")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    parser.add_argument("--profile", action="store_true", help="profile the big Redis fan-out")
    parser.add_argument("--http-only", action="store_true", help="only the HTTP bench (wrk)")
    parser.add_argument("--groups-only", action="store_true", help="only the aggregated-feed bench")
    parser.add_argument(
        "--cluster-only", action="store_true", help="only the Redis Cluster fan-out bench"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    http_load = http.QUICK if args.quick else http.FULL
    isolate_settings()
    started = time.perf_counter()
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
        if args.cluster_only:
            print("redis cluster fan-out (3 local masters) and single server", flush=True)
            rows = cluster.run(server, sizes.followers[-1], sizes.activities, sizes.repeats)
        elif args.groups_only:
            rows = groups.run(
                server,
                sizes.group_feeds,
                sizes.sql_group_feeds,
                sizes.group_activities,
                sizes.reads,
            )
        else:
            rows = [] if args.http_only else run_all(server, sizes)
            print("http: wrk against uvicorn", flush=True)
            rows += http.run(server, http_load)
    elapsed = time.perf_counter() - started
    print()
    print(table(rows))
    load = os.getloadavg()
    print(f"\n({elapsed:.0f} s; load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    report = {
        "machine": machine,
        "mode": "quick" if args.quick else "full",
        "sizes": asdict(sizes),
        "http_load": asdict(http_load),
        "seconds": elapsed,
        "loadavg_at_end": load,
        "rows": [asdict(r) | {"result": r.result()} for r in rows],
    }
    if args.http_only and args.out.exists():
        report = http.merge(json.loads(args.out.read_text()), report)
    if args.groups_only and args.out.exists():
        report = groups.merge(json.loads(args.out.read_text()), report)
    if args.cluster_only and args.out.exists():
        report = cluster.merge(json.loads(args.out.read_text()), report)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


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


def run_all(server: RedisServer, sizes: Sizes) -> list[Row]:
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

    rows += groups.run(
        server, sizes.group_feeds, sizes.sql_group_feeds, sizes.group_activities, sizes.reads
    )
    return rows


if __name__ == "__main__":
    main()
