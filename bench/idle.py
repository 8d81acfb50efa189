"""Bench 10: idle followers (``inactive_days``), on the Redis store.

- The sweep (``Tidings.sweep_readers``, run by ``tidings reclassify``) over
  ``followers`` follower feeds of one source, 90% of them not read for 31
  days: tiers set, idle feeds marked and their Redis feeds cleared.
- A fan-out of one activity to those followers before and after the sweep:
  idle followers are skipped, so the delivery writes a tenth of the feeds.
- For ``readers`` of the idle feeds, each following ``SOURCES`` sources with
  ``PER_SOURCE`` activities: the first read after idleness (which requests
  the rebuild), a read while the rebuild is pending (served from the
  canonical store, what HTTP answers with 206), and the rebuild itself
  (``max_length`` entries from the canonical store into Redis).
"""

from __future__ import annotations

import functools
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import (
    RedisServer,
    Row,
    add_follows,
    engine,
    follower_ids,
    human,
    percentile,
    publish,
    settle,
    timed,
    warm_up,
)
from tidings import Tidings

SOURCE = "user:celeb"
SOURCES = 5
PER_SOURCE = 400
PAGE = 25
ACTIVE_SHARE = 0.1
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def run(server: RedisServer, followers: int, readers: int, repeats: int) -> list[Row]:
    with engine("redis", server) as eng:
        clock = _Clock()
        eng.clock.now = clock
        warm_up(eng)
        feeds = follower_ids(followers, prefix="i")
        add_follows(eng, SOURCE, feeds)
        rng = random.Random(3)
        active = set(rng.sample(feeds, int(followers * ACTIVE_SHARE)))
        # Everyone read at T0; the active tenth again 31 days later.
        eng.canonical.readers.record_reads(dict.fromkeys(feeds, eng.clock.ms()), eng.clock.ms())
        # The regenerated readers' history: SOURCES sources of PER_SOURCE each.
        sources = [f"user:s{i}" for i in range(SOURCES)]
        for n in range(PER_SOURCE):
            for source in sources:
                data = {"actor": source, "verb": "post", "object": f"o:{n}"}
                eng.add_activity(source, data | {"time": T0 - timedelta(seconds=n)})
        eng.admin.drain()
        idle_readers = [f for f in feeds if f not in active][:readers]
        for source in sources:
            add_follows(eng, source, idle_readers)

        settle()
        before = [timed(functools.partial(publish, eng, SOURCE, n)) for n in range(repeats)]
        clock.now += timedelta(days=31)
        eng.canonical.readers.record_reads(
            dict.fromkeys(sorted(active), eng.clock.ms()), eng.clock.ms()
        )
        settle()
        sweep_s = timed(eng.admin.sweep_readers)
        idle_count = eng.canonical.readers.reader_counts().get("idle", 0)
        settle()
        after = [timed(functools.partial(publish, eng, SOURCE, 100 + n)) for n in range(repeats)]
        rows = _fanout_rows(followers, before, after, sweep_s, idle_count)
        rows += _regeneration_rows(eng, idle_readers)
        return rows


def _fanout_rows(
    followers: int, before: list[float], after: list[float], sweep_s: float, idle: int
) -> list[Row]:
    size = f"{human(followers)} followers, {1 - ACTIVE_SHARE:.0%} idle"
    full, skipped = statistics.median(before) * 1000, statistics.median(after) * 1000
    print(f"  sweep {sweep_s * 1000:.0f} ms; fan-out {full:.0f} ms -> {skipped:.0f} ms", flush=True)
    return [
        Row("idle sweep (tiers, idle marked, feeds cleared)", "redis", size, sweep_s * 1000, "ms",
            detail={"idle_feeds": idle}),
        Row("fan-out of 1 activity, none idle yet", "redis", size, full, "ms"),
        Row("fan-out of 1 activity, idle skipped", "redis", size, skipped, "ms",
            detail={"speed-up": full / skipped}),
    ]  # fmt: skip


def _regeneration_rows(eng: Tidings, readers: list[str]) -> list[Row]:
    clock = time.perf_counter
    first: list[float] = []
    pending: list[float] = []
    for feed in readers:
        t0 = clock()
        page = eng.read(feed, limit=PAGE)
        t1 = clock()
        again = eng.read(feed, limit=PAGE, cursor=page.next)
        t2 = clock()
        if not (page.regenerating and again.regenerating) or len(again.results) != PAGE:
            raise RuntimeError(f"{feed}: expected full pages while regenerating")
        first.append((t1 - t0) * 1000)
        pending.append((t2 - t1) * 1000)
    settle()
    rebuild: list[float] = []
    while jobs := eng.canonical.readers.claim_regenerations(eng.clock.ms(), 60_000):
        for job in jobs:
            t0 = clock()
            eng.deliverer.regenerations.regenerate(job)
            rebuild.append((clock() - t0) * 1000)
    if len(rebuild) != len(readers):
        raise RuntimeError(f"rebuilt {len(rebuild)} of {len(readers)} feeds")
    held = len(
        eng.timeline.page(readers[0], limit=1000, before=None, cap=eng.deliverer.cap("timeline"))
    )
    size = f"{SOURCES + 1} sources, p{{q}} of {len(readers):,} feeds"
    out: list[Row] = []
    for name, samples in (
        ("read 25, first after idleness (requests rebuild)", first),
        ("read 25 while rebuilding (canonical, HTTP 206)", pending),
        (f"rebuild of an idle feed ({held} entries)", rebuild),
    ):
        for q in (50, 99):
            detail: dict[str, Any] = {"mean_ms": sum(samples) / len(samples)}
            out.append(Row(name, "redis", size.format(q=q), percentile(samples, q), "ms",
                           detail=detail))  # fmt: skip
    print(
        f"  idle reads: p99 first {percentile(first, 99):.2f} ms, "
        f"pending {percentile(pending, 99):.2f} ms, rebuild {percentile(rebuild, 99):.2f} ms",
        flush=True,
    )
    return out
