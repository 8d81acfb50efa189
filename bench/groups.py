"""Bench 6: aggregated feeds ("bob liked 3 photos").

Follower feeds of group ``timeline_aggregated`` (``{actor}:{verb}:{day}``,
3 activities shown per group) that already hold ``GROUPS`` groups of 3
activities each. Measured:

- fan-out of one activity that joins an existing group in every follower
  feed, through ``add_activity`` + delivery (feeds/s);
- one activity joining an existing group of one feed, one store call (p50);
- ``read_groups(feed, limit=25)``, hydrated (p50, p99);
- Redis memory per group.
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

GROUP = "timeline_aggregated"
SOURCE = "user:celeb"
GROUPS = 100
PER_GROUP = 3
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
    """``n_feeds`` aggregated feeds following SOURCE, each holding GROUPS groups."""
    tmp = tempfile.mkdtemp(prefix="tidings-bench-groups-")
    options: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp}/bench.db",
        "timeline_store": store,
        "groups": {GROUP: {"kind": "aggregated", "max_group_size": PER_GROUP}},
    }
    if store == "redis":
        server.flush()
        options["redis_url"] = server.url
    eng = Tidings(Settings(**options), task_runner="manual")
    try:
        feeds = [f"{GROUP}:f{i:07d}" for i in range(n_feeds)]
        add_follows(eng, SOURCE, feeds)
        made = []
        # Published to a feed nobody follows: canonical rows to hydrate from.
        for g in range(GROUPS):
            for k in range(PER_GROUP):
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
        members = eng.deliverer.members(GROUP, made, {})
        cap = eng.deliverer.group_cap(GROUP)
        step = 500
        for start in range(0, n_feeds, step):
            eng.aggregates.add(feeds[start : start + step], members, cap)
        yield Filled(eng, store, feeds, made)
    finally:
        eng.close()
        shutil.rmtree(tmp, ignore_errors=True)


def fanout(full: Filled, activities: int) -> Row:
    """Publish activities that each join an existing group of every follower feed."""
    eng = full.eng
    rates = []
    for n in range(activities):
        actor = f"a{(n * 7) % GROUPS:03d}"
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
    size = f"{len(full.feeds):,} feeds x {GROUPS} groups, best of {activities}"
    target, met = at_least(best, FANOUT_TARGET, full.store == "redis")
    print(f"  group fan-out {full.store}: {best:,.0f} feeds/s", flush=True)
    detail = {"rates": rates}
    return Row(
        "fan-out into aggregated feeds", full.store, size, best, "feeds/s", target, met, detail
    )


def join_latency(full: Filled, calls: int) -> list[Row]:
    """One activity joining an existing group of one feed: one store call."""
    eng, rng = full.eng, random.Random(7)
    cap = eng.deliverer.group_cap(GROUP)
    base = DAY + timedelta(hours=3)
    samples = []
    clock = time.perf_counter

    settle()
    for n in range(calls):
        feed = rng.choice(full.feeds)
        group = f"a{rng.randrange(GROUPS):03d}:like:2026-11-02"
        aid = ids.new_id(int((base + timedelta(milliseconds=n)).timestamp() * 1000))
        member = Member(aid, group, group.split(":")[0])
        t0 = clock()
        eng.aggregates.add([feed], [member], cap)
        samples.append((clock() - t0) * 1000)
    p50 = percentile(samples, 50)
    target, met = at_most(p50, JOIN_P50, full.store == "redis")
    size = f"p50 of {calls:,} calls"
    return [
        Row("one activity joins a group", full.store, size, p50, "ms", target, met),
        Row(
            "one activity joins a group",
            full.store,
            f"p99 of {calls:,} calls",
            percentile(samples, 99),
            "ms",
        ),
    ]


def reads(full: Filled, n: int) -> list[Row]:
    eng, rng = full.eng, random.Random(42)
    for _ in range(min(300, n)):
        eng.read_groups(rng.choice(full.feeds), limit=25)
    samples = []
    settle()
    for _ in range(n):
        feed = rng.choice(full.feeds)
        t0 = time.perf_counter()
        page = eng.read_groups(feed, limit=25)
        samples.append((time.perf_counter() - t0) * 1000)
        if len(page.results) != 25 or any(len(g.activities) != PER_GROUP for g in page.results):
            raise RuntimeError(f"short page from {feed}")
    out = []
    for q, goal in ((50, None), (99, READ_P99)):
        value = percentile(samples, q)
        target, met = at_most(value, goal or 0, goal is not None and full.store == "redis")
        size = f"p{q} of {n:,} reads, 25 groups x {PER_GROUP} activities"
        out.append(
            Row("read a page of groups, hydrated", full.store, size, value, "ms", target, met)
        )
    print(f"  group reads {full.store}: p99 {percentile(samples, 99):.3f} ms", flush=True)
    return out


def memory(full: Filled, server: RedisServer, before: int) -> Row:
    used = server.used_memory() - before
    per_group = used / (len(full.feeds) * GROUPS)
    size = f"{len(full.feeds):,} feeds x {GROUPS} groups of {PER_GROUP}"
    return Row("memory per group (used_memory)", "redis", size, per_group, "bytes/group")


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
