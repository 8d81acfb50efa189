"""Bench 4: latency of ``engine.read(feed, limit=25)`` (hydrated) on random full feeds."""

from __future__ import annotations

import random
import time

from bench.harness import RedisServer, Row, at_most, percentile, settle
from bench.steady import FullFeeds

#: (p50, p99) targets in ms; None where there is none.
TARGETS: dict[str, tuple[float | None, float | None]] = {
    "redis": (0.3, 1.0),
    "sql": (None, 1.0),
}
PAGE = 25


def run(full: FullFeeds, reads: int) -> list[Row]:
    rng = random.Random(42)
    eng, feeds = full.eng, full.feeds
    for _ in range(min(500, reads)):  # warm-up
        feed = rng.choice(feeds)
        eng.read(feed, limit=PAGE, cursor=eng.read(feed, limit=PAGE).next)
    first: list[float] = []
    second: list[float] = []
    clock = time.perf_counter
    settle()
    for _ in range(reads):
        feed = rng.choice(feeds)
        t0 = clock()
        page = eng.read(feed, limit=PAGE)
        t1 = clock()
        after = eng.read(feed, limit=PAGE, cursor=page.next)
        t2 = clock()
        if len(page.results) != PAGE or len(after.results) != PAGE:
            raise RuntimeError(f"short page from {feed}")
        first.append((t1 - t0) * 1000)
        second.append((t2 - t1) * 1000)
    p50_goal, p99_goal = TARGETS.get(full.store, (None, None))
    out = []
    for name, samples, goals in (
        ("read 25, first page", first, (p50_goal, p99_goal)),
        ("read 25, cursor page", second, (None, None)),
    ):
        for q, goal in zip((50, 99), goals, strict=True):
            value = percentile(samples, q)
            target, met = at_most(value, goal or 0, goal is not None)
            size = f"p{q} of {reads:,} reads"
            detail = {"mean_ms": sum(samples) / len(samples), "max_ms": max(samples)}
            out.append(Row(name, full.store, size, value, "ms", target, met, detail))
    print(f"  reads {full.store}: p50 {percentile(first, 50):.3f} ms", flush=True)
    return out


def ping(server: RedisServer, n: int) -> list[Row]:
    """The floor under any Redis read: one PING round trip through redis-py."""
    client = server.client
    for _ in range(min(500, n)):
        client.ping()
    samples = []
    settle()
    for _ in range(n):
        t0 = time.perf_counter()
        client.ping()
        samples.append((time.perf_counter() - t0) * 1000)
    size = f"{n:,} round trips"
    return [
        Row(f"redis-py PING, p{q}", "redis", size, percentile(samples, q), "ms") for q in (50, 99)
    ]
