"""Bench 6: aggregated feeds ("bob liked 3 photos").

Follower feeds of feed group ``timeline_aggregated`` (``{actor}:{verb}:{day}``,
3 activities shown per aggregate) that already hold ``AGGREGATES`` aggregates of 3
activities each. Measured:

- fan-out of one activity that joins an existing aggregate in every follower
  feed, through ``add_activity`` + delivery (feeds/s);
- one activity joining an existing aggregate of one feed, one store call (p50);
- ``read_aggregates(feed, limit=25)``, hydrated (p50, p99);
- Redis memory per aggregate.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import (
    RedisServer,
    Row,
    add_follows,
    at_least,
    at_most,
    percentile,
    settle,
)
from tidings import Settings, Tidings
from tidings.core import ids
from tidings.core.activity import Activity
from tidings.core.aggregation import Member

FEED_GROUP = "timeline_aggregated"
SOURCE = "user:celeb"
AGGREGATES = 100
PER_AGGREGATE = 3
DAY = datetime(2026, 11, 2, 8, tzinfo=UTC)
#: Targets: fan-out feeds/s, join p50 ms, read p99 ms.
FANOUT_TARGET = 100_000
JOIN_P50 = 0.3
READ_P99 = 2.0


@dataclass
class Filled:
    eng: Tidings
    store: str
    feeds: list[str]
    activities: list[Activity]


@contextlib.contextmanager
def filled(server: RedisServer, store: str, n_feeds: int) -> Iterator[Filled]:
    """``n_feeds`` aggregated feeds following SOURCE, each holding AGGREGATES aggregates."""
    tmp = tempfile.mkdtemp(prefix="tidings-bench-aggregates-")
    options: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp}/bench.db",
        "timeline_store": store,
        "groups": {FEED_GROUP: {"kind": "aggregated", "max_aggregate_size": PER_AGGREGATE}},
    }
    if store == "redis":
        server.flush()
        options["redis_url"] = server.url
    eng = Tidings(Settings(**options), task_runner="manual")
    try:
        feeds = [f"{FEED_GROUP}:f{i:07d}" for i in range(n_feeds)]
        add_follows(eng, SOURCE, feeds)
        made = []
        # Published to a feed nobody follows: canonical rows to hydrate from.
        for g in range(AGGREGATES):
            for k in range(PER_AGGREGATE):
                made.append(
                    eng.add_activity(
                        "user:filler",
                        {
                            "actor": f"a{g:03d}",
                            "verb": "like",
                            "object": f"photo:{g}-{k}",
                            "time": DAY + timedelta(minutes=g, seconds=k),
                        },
                    )
                )
        eng.admin.drain()
        members = eng.deliverer.members(FEED_GROUP, made, {})
        cap = eng.deliverer.aggregate_cap(FEED_GROUP)
        step = 500
        for start in range(0, n_feeds, step):
            eng.aggregates.add(feeds[start : start + step], members, cap)
        yield Filled(eng, store, feeds, made)
    finally:
        eng.close()
        shutil.rmtree(tmp, ignore_errors=True)


def fanout(full: Filled, activities: int) -> Row:
    """Publish activities that each join an existing aggregate of every follower feed."""
    eng = full.eng
    rates = []
    for n in range(activities):
        actor = f"a{(n * 7) % AGGREGATES:03d}"
        data = {
            "actor": actor,
            "verb": "like",
            "object": f"photo:new-{n}",
            "time": DAY + timedelta(hours=2, seconds=n),
        }
        settle()
        t0 = time.perf_counter()
        eng.add_activity(SOURCE, data)
        eng.admin.drain()
        rates.append(len(full.feeds) / (time.perf_counter() - t0))
    best = max(rates)
    size = f"{len(full.feeds):,} feeds x {AGGREGATES} aggregates, best of {activities}"
    target, met = at_least(best, FANOUT_TARGET, full.store == "redis")
    print(f"  aggregate fan-out {full.store}: {best:,.0f} feeds/s", flush=True)
    detail = {"rates": rates}
    return Row(
        "fan-out into aggregated feeds", full.store, size, best, "feeds/s", target, met, detail
    )


def join_latency(full: Filled, calls: int) -> list[Row]:
    """One activity joining an existing aggregate of one feed: one store call."""
    eng, rng = full.eng, random.Random(7)
    cap = eng.deliverer.aggregate_cap(FEED_GROUP)
    base = DAY + timedelta(hours=3)
    samples = []
    clock = time.perf_counter

    settle()
    for n in range(calls):
        feed = rng.choice(full.feeds)
        aggregate = f"a{rng.randrange(AGGREGATES):03d}:like:2026-11-02"
        aid = ids.new_id(int((base + timedelta(milliseconds=n)).timestamp() * 1000))
        member = Member(aid, aggregate, aggregate.split(":")[0])
        t0 = clock()
        eng.aggregates.add([feed], [member], cap)
        samples.append((clock() - t0) * 1000)
    p50 = percentile(samples, 50)
    target, met = at_most(p50, JOIN_P50, full.store == "redis")
    size = f"p50 of {calls:,} calls"
    return [
        Row("one activity joins an aggregate", full.store, size, p50, "ms", target, met),
        Row(
            "one activity joins an aggregate",
            full.store,
            f"p99 of {calls:,} calls",
            percentile(samples, 99),
            "ms",
        ),
    ]


def reads(full: Filled, n: int) -> list[Row]:
    eng, rng = full.eng, random.Random(42)
    for _ in range(min(300, n)):
        eng.read_aggregates(rng.choice(full.feeds), limit=25)
    samples = []
    settle()
    for _ in range(n):
        feed = rng.choice(full.feeds)
        t0 = time.perf_counter()
        page = eng.read_aggregates(feed, limit=25)
        samples.append((time.perf_counter() - t0) * 1000)
        if len(page.results) != 25 or any(len(g.activities) != PER_AGGREGATE for g in page.results):
            raise RuntimeError(f"short page from {feed}")
    out = []
    for q, goal in ((50, None), (99, READ_P99)):
        value = percentile(samples, q)
        target, met = at_most(value, goal or 0, goal is not None and full.store == "redis")
        size = f"p{q} of {n:,} reads, 25 aggregates x {PER_AGGREGATE} activities"
        out.append(
            Row("read a page of aggregates, hydrated", full.store, size, value, "ms", target, met)
        )
    print(f"  aggregate reads {full.store}: p99 {percentile(samples, 99):.3f} ms", flush=True)
    return out


def memory(full: Filled, server: RedisServer, before: int) -> Row:
    used = server.used_memory() - before
    per_aggregate = used / (len(full.feeds) * AGGREGATES)
    size = f"{len(full.feeds):,} feeds x {AGGREGATES} aggregates of {PER_AGGREGATE}"
    return Row(
        "memory per aggregate (used_memory)", "redis", size, per_aggregate, "bytes/aggregate"
    )


def run(
    server: RedisServer, redis_feeds: int, sql_feeds: int, activities: int, samples: int
) -> list[Row]:
    rows: list[Row] = []
    print("aggregated feeds: redis", flush=True)
    server.flush()
    base = server.used_memory()
    with filled(server, "redis", redis_feeds) as full:
        rows.append(memory(full, server, base))
        rows.append(fanout(full, activities))
        rows += reads(full, samples)
        # Last: its members have no canonical activity, so reads would skip them.
        rows += join_latency(full, samples)
    print("aggregated feeds: sql (SQLite)", flush=True)
    with filled(server, "sql", sql_feeds) as full:
        rows.append(fanout(full, max(1, activities // 2)))
        rows += reads(full, max(100, samples // 5))
    return rows
