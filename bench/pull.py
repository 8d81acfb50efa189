"""Bench 7: reading a feed that merges pulled sources (hybrid fan-out).

Each reader's timeline is full (``max_length`` pushed entries) and follows
``SOURCES`` pulled sources whose activities interleave in time with the
pushed ones, so every page is a real k-way merge; the pushed source has
twice ``max_length`` activities, so half of its history lies past the cap. Timed: ``read(feed, 25)``,
first page and the next (cursor) page, on the Redis store; and one page read
past the cap (from the canonical store), for the record; and, alternating
with them, the same feeds with nothing pulled, as a baseline.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import (
    FOLLOWER_GROUP,
    RedisServer,
    Row,
    add_follows,
    at_most,
    engine,
    follower_ids,
    percentile,
    settle,
    warm_up,
)
from tidings import Tidings
from tidings.core.fanout import Strategy

SOURCES = 5
PAGE = 25
#: p99 target (ms) of a first page merging SOURCES pulled sources, Redis store.
P99_TARGET = 3.0
PUSHED = "user:pushed"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run(server: RedisServer, readers: int, reads: int, per_source: int = 1000) -> list[Row]:
    with engine("redis", server) as eng:
        warm_up(eng)
        feeds = follower_ids(readers, prefix="p")
        pulled = [f"user:pulled{i}" for i in range(SOURCES)]
        max_length = eng.feed_groups[FOLLOWER_GROUP].max_length
        # Twice the cap, so that half of the pushed source lies past the cap.
        _publish(eng, pulled, per_source, 2 * max_length)
        add_follows(eng, PUSHED, feeds)
        for source in pulled:
            add_follows(eng, source, feeds)
            # Classified by hand: the bulk follows above skip the counters.
            eng.canonical.fanout.set_strategy(source, Strategy.PULL, eng.clock.ms())
        cap = eng.deliverer.cap(FOLLOWER_GROUP)
        newest = eng.canonical.activities.newest_ids(PUSHED, max_length)
        for start in range(0, readers, 500):
            eng.timeline.add(feeds[start : start + 500], newest, cap)
        return _measure(eng, feeds, pulled, reads, newest[-1])


def _publish(eng: Tidings, pulled: list[str], per_source: int, pushed: int) -> None:
    """Pushed and pulled activities one second apart, interleaved."""
    sources = [PUSHED] * pushed + [s for s in pulled for _ in range(per_source)]
    random.Random(7).shuffle(sources)
    for n, source in enumerate(sources):
        data = {"actor": source, "verb": "post", "object": f"o:{n}"}
        eng.add_activity(source, data | {"time": T0 + timedelta(seconds=n)})
    eng.admin.drain()


def _measure(
    eng: Tidings, feeds: list[str], pulled: list[str], reads: int, oldest_held: str
) -> list[Row]:
    rng = random.Random(42)
    for _ in range(min(500, reads)):  # warm-up
        feed = rng.choice(feeds)
        eng.read(feed, limit=PAGE, cursor=eng.read(feed, limit=PAGE).next)
    first: list[float] = []
    second: list[float] = []
    deep: list[float] = []
    # The same feeds read with their sources pushed (no merge), in blocks that
    # alternate with the pulled ones: on a busy machine the tail is mostly
    # the machine's, and this row shows how much.
    baseline: list[float] = []
    clock = time.perf_counter
    settle()
    block = 250
    for done in range(0, reads, block):
        for source in pulled:
            eng.canonical.fanout.set_strategy(source, Strategy.PULL, eng.clock.ms())
        for _ in range(min(block, reads - done)):
            feed = rng.choice(feeds)
            # A cursor at the last materialised entry: the next page is all history.
            past_cap = eng.cursors.encode(f"feed:{feed}", oldest_held)
            t0 = clock()
            page = eng.read(feed, limit=PAGE)
            t1 = clock()
            after = eng.read(feed, limit=PAGE, cursor=page.next)
            t2 = clock()
            beyond = eng.read(feed, limit=PAGE, cursor=past_cap)
            t3 = clock()
            lengths = (len(page.results), len(after.results), len(beyond.results))
            if lengths != (PAGE, PAGE, PAGE):
                raise RuntimeError(f"short page from {feed}: {lengths}")
            if {a.actor for a in page.results} == {PUSHED}:
                raise RuntimeError("the page merged no pulled source")
            first.append((t1 - t0) * 1000)
            second.append((t2 - t1) * 1000)
            deep.append((t3 - t2) * 1000)
        for source in pulled:
            eng.canonical.fanout.set_strategy(source, Strategy.PUSH, eng.clock.ms())
        for _ in range(min(block, reads - done)):
            feed = rng.choice(feeds)
            t0 = clock()
            eng.read(feed, limit=PAGE)
            baseline.append((clock() - t0) * 1000)
    out = []
    size = f"{SOURCES} pulled sources, p{{q}} of {reads:,} reads"
    for name, samples, goal in (
        ("read 25 merging pulled, first page", first, P99_TARGET),
        ("read 25 merging pulled, cursor page", second, None),
        ("read 25 past the cap (canonical)", deep, None),
        ("read 25, same feeds, nothing pulled", baseline, None),
    ):
        for q in (50, 99):
            value = percentile(samples, q)
            target, met = at_most(value, goal or 0, goal is not None and q == 99)
            detail: dict[str, Any] = {
                "mean_ms": sum(samples) / len(samples),
                "max_ms": max(samples),
            }
            out.append(Row(name, "redis", size.format(q=q), value, "ms", target, met, detail))
    print(f"  pulled reads: p99 {percentile(first, 99):.3f} ms (first page)", flush=True)
    return out
