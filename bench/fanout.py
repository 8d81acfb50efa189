"""Benches 1-2: one activity fanned out to N followers, end to end, against raw ZADD."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from bench.harness import (
    SOURCE,
    RedisServer,
    Row,
    add_follows,
    at_least,
    engine,
    feed_key,
    follower_ids,
    human,
    publish,
    settle,
    timed,
    warm_up,
)

STORES = ("redis", "sql", "memory")
TARGETS = {"redis": 250_000.0, "sql": 40_000.0}  # entries/s at 100k followers
TARGET_SIZE = 100_000


@dataclass
class Fanout:
    store: str
    followers: int
    chunk: int
    seconds: list[float]
    memory: dict[str, float] = field(default_factory=dict)
    #: The rate of every repeat, this one (the best) included.
    rates: list[float] = field(default_factory=list)
    #: One of the interleaved chunk-size runs.
    compared: bool = False

    @property
    def entries(self) -> int:
        return self.followers * len(self.seconds)

    @property
    def rate(self) -> float:
        return self.entries / sum(self.seconds)


def run_one(
    server: RedisServer,
    store: str,
    followers: int,
    activities: int,
    *,
    chunk: int | None = None,
    memory: bool = False,
    database_url: str | None = None,
) -> Fanout:
    """Time ``activities`` publishes (add_activity + drain) into empty follower feeds
    (the canonical store: a fresh SQLite file, or the empty ``database_url``)."""
    with engine(store, server, chunk=chunk, database_url=database_url) as eng:
        warm_up(eng)
        feeds = follower_ids(followers)
        add_follows(eng, SOURCE, feeds)
        before = server.used_memory() if memory else 0
        settle()
        seconds = [timed(partial(publish, eng, SOURCE, n)) for n in range(activities)]
        result = Fanout(store, followers, eng.settings.delivery_chunk_size, seconds)
        cap = eng.deliverer.cap(feeds[-1].partition(":")[0])
        held = eng.timeline.page(feeds[-1], limit=activities + 1, before=None, cap=cap)
        if len(held) != activities:
            raise RuntimeError(f"{store}: last follower holds {len(held)} of {activities}")
        if memory:
            delta = server.used_memory() - before
            usage = server.key_usage(feed_key(eng, feeds[len(feeds) // 2]))
            result.memory = {
                "used_memory_delta": delta,
                "per_entry": delta / result.entries,
                "key_usage": usage,
                "key_per_entry": usage / activities,
            }
        return result


def best(runs: list[Fanout], compared: bool = False) -> Fanout:
    """The fastest run, carrying every run's rate (and the first run's memory figures)."""
    top = max(runs, key=lambda r: r.rate)
    top.memory, top.rates, top.compared = runs[0].memory, [r.rate for r in runs], compared
    label = f"{top.store} {human(top.followers)}" + (f" chunk {top.chunk:,}" if compared else "")
    print(f"  fan-out {label}: {', '.join(f'{r:,.0f}' for r in top.rates)} entries/s", flush=True)
    return top


def run(
    server: RedisServer,
    sizes: Sequence[int],
    activities: int,
    chunks: Sequence[int],
    repeats: int,
) -> list[Fanout]:
    """Best of ``repeats`` runs per store and size, each on a fresh engine and empty feeds."""
    results: list[Fanout] = []
    for store in STORES:
        for n in sizes:
            memory = store == "redis" and n == sizes[-1]
            runs = [
                run_one(server, store, n, activities, memory=memory and i == 0)
                for i in range(repeats)
            ]
            results.append(best(runs))
    # Chunk sizes run in interleaved rounds, so load from elsewhere hits each alike.
    compared: list[int | None] = [None, *chunks]
    by_chunk: dict[int | None, list[Fanout]] = {c: [] for c in compared}
    for _ in range(repeats):
        for c in compared:
            by_chunk[c].append(run_one(server, "redis", sizes[-1], activities, chunk=c))
    results += sorted((best(runs, compared=True) for runs in by_chunk.values()), key=chunk_of)
    return results


def chunk_of(result: Fanout) -> int:
    return result.chunk


def rows(results: Sequence[Fanout], default_chunk: int) -> list[Row]:
    out = []
    for r in results:
        size = f"{human(r.followers)} followers x {len(r.seconds)}"
        bench = f"fan-out, empty feeds, best of {len(r.rates)}"
        goal = TARGETS.get(r.store)
        target, met = at_least(r.rate, goal or 0, goal is not None and r.followers == TARGET_SIZE)
        if r.compared:
            bench = f"fan-out, chunk {r.chunk:,}" + (
                " (default)" if r.chunk == default_chunk else ""
            )
            bench += f", interleaved, best of {len(r.rates)}"
            target, met = "", None
        detail = {"chunk": r.chunk, "seconds": r.seconds, "entries": r.entries, "rates": r.rates}
        out.append(Row(bench, r.store, size, r.rate, "entries/s", target, met, detail))
    return out


def redis_benchmark_zadd(server: RedisServer, requests: int, members: int | None = None) -> float:
    """requests/s of ``redis-benchmark -P 100 -t zadd`` against the private server.

    Without ``members`` every ZADD sets the same member of one key (no entry is
    written after the first); ``members`` (``-r``) makes each a real insert.
    """
    exe = shutil.which("redis-benchmark")
    if exe is None:
        raise RuntimeError("redis-benchmark not found")
    # fmt: off
    argv = [
        exe, "-h", "127.0.0.1", "-p", str(server.port),
        "-P", "100", "-t", "zadd", "-n", str(requests), "-q",
    ]
    if members is not None:
        argv += ["-r", str(members)]
    # fmt: on
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300).stdout
    found = re.findall(r"ZADD: ([\d.]+) requests per second", out)
    if not found:
        raise RuntimeError(f"cannot parse redis-benchmark output: {out[-500:]!r}")
    return float(found[-1])
