"""Ranked feeds and reactions (``--only ranked``), on SQLite and on SQLite + Redis.

Readers' ranked feeds each hold 1,000 entries (20 sources of 50 activities,
cap 1,000) and are ranked over all of them with an expression that reads
reaction counts, the reader's affinity and verb weights. About 20 reactions
an activity on average (likes and comments, some by the readers themselves,
so affinities are not all zero).

Measured, each sample a library call on an idle engine (manual delivery):
the first page of 25 (ranks 1,000 candidates and writes the snapshot), the
next page (a slice of the snapshot), adding a like, and a flat page of 25
with and without ``reactions=counts,latest,own`` (interleaved, so both see
the same machine).
"""

from __future__ import annotations

import functools
import gc
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.harness import RedisServer, Row, at_most, percentile, settle, timed
from bench.harness import engine as engine_for
from tidings import Tidings

RANKING = (
    "decay_exp(age_hours, 24) * (1 + ln(1 + likes + 2 * comments)) * weight(verb) * (1 + affinity)"
)
GROUPS = {
    "ranked": {
        "kind": "ranked",
        "ranking": RANKING,
        "weights": {"video": 1.5},
        "candidates": 1000,
        "max_length": 1000,
    }
}
#: (first page p99, next page p99, like p99) targets in ms, by store.
TARGETS = {"sql": (20.0, 2.0, None), "redis": (10.0, 2.0, 2.0)}
PAGE = 25


def _ms(fn: Callable[[], object]) -> float:
    return timed(fn) * 1000


@dataclass(frozen=True)
class Sizes:
    readers: int
    sources: int
    per_source: int
    reactions: int
    samples: int


FULL = Sizes(readers=40, sources=20, per_source=50, reactions=20_000, samples=1_000)
QUICK = Sizes(readers=5, sources=5, per_source=10, reactions=300, samples=50)


def _fill(engine: Tidings, sizes: Sizes, rng: random.Random) -> list[str]:
    readers = [f"r{i}" for i in range(sizes.readers)]
    sources = [f"s{i}" for i in range(sizes.sources)]
    pairs = [
        (f"{group}:{r}", f"user:{s}")
        for r in readers
        for s in sources
        for group in ("ranked", "timeline")
    ]
    for start in range(0, len(pairs), 1000):
        engine.follow_many(pairs[start : start + 1000], copy_limit=0)
    now = time.time()
    made: list[str] = []
    for s in sources:
        batch = [
            {
                "actor": s,
                "verb": rng.choice(["post", "post", "video"]),
                "object": f"photo:{s}-{n}",
                # Spread over the last two days, so recency matters.
                "time": _iso(now - rng.uniform(0, 172_800)),
            }
            for n in range(sizes.per_source)
        ]
        made += [a.id for a in engine.add_activities(f"user:{s}", batch)]
    engine.admin.drain()
    users = readers + [f"u{i}" for i in range(200)]
    for _ in range(sizes.reactions):
        kind = "like" if rng.random() < 0.8 else "comment"
        engine.reactions.add(
            rng.choice(made),
            kind,
            rng.choice(users),
            {"text": "nice"} if kind == "comment" else None,
        )
    return made


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + "Z"


def _store(server: RedisServer, store: str, sizes: Sizes) -> list[Row]:
    rng = random.Random(7)
    rows: list[Row] = []
    label = {"sql": "sqlite", "redis": "sqlite+redis"}[store]
    with engine_for(store, server, groups=GROUPS) as engine:
        made = _fill(engine, sizes, rng)
        readers = [f"r{i}" for i in range(sizes.readers)]
        held = len(engine.read(f"ranked:{readers[0]}", PAGE).results)
        for r in readers[:5]:  # warm-up: statements prepared, caches filled
            engine.read(f"ranked:{r}", PAGE)
        settle()
        # As `tidings serve` does with what its workers load: the setup's
        # objects are not walked again by every full collection.
        gc.freeze()
        try:
            measured = _measure(engine, rng, readers, made, sizes)
        finally:
            gc.unfreeze()
    first, nxt, likes, plain, rich = measured
    goals = TARGETS[store]
    size = f"{sizes.samples:,} reads, {held} shown of 1,000 candidates"
    for name, samples, goal in (
        ("ranked page of 25 over 1,000 candidates (counts, affinity)", first, goals[0]),
        ("ranked next page from the snapshot", nxt, goals[1]),
        ("add a like", likes, goals[2]),
    ):
        p99 = percentile(samples, 99)
        target, met = at_most(p99, goal or 0, goal is not None)
        detail = {"p50_ms": percentile(samples, 50), "max_ms": max(samples)}
        rows.append(Row(f"{name}, p99", label, size, p99, "ms", target, met, detail))
    extra = percentile(rich, 99) - percentile(plain, 99)
    target, met = at_most(extra, 1.0)
    detail = {
        "plain_p50_ms": percentile(plain, 50),
        "plain_p99_ms": percentile(plain, 99),
        "rich_p50_ms": percentile(rich, 50),
        "rich_p99_ms": percentile(rich, 99),
    }
    rows.append(
        Row(
            "page of 25 with reactions=counts,latest,own, p99 added",
            label,
            size,
            extra,
            "ms",
            target,
            met,
            detail,
        )
    )
    print(
        f"  ranked {label}: first p99 {percentile(first, 99):.2f} ms, next p99 "
        f"{percentile(nxt, 99):.2f} ms, like p99 {percentile(likes, 99):.2f} ms, "
        f"reactions +{extra:.2f} ms",
        flush=True,
    )
    return rows


Samples = tuple[list[float], list[float], list[float], list[float], list[float]]


def _measure(
    engine: Tidings, rng: random.Random, readers: list[str], made: list[str], sizes: Sizes
) -> Samples:
    """First and next ranked pages, likes, and flat pages without and with reactions."""
    first: list[float] = []
    nxt: list[float] = []
    for _ in range(sizes.samples):
        feed = f"ranked:{rng.choice(readers)}"
        t0 = time.perf_counter()
        page = engine.reads.json(feed, PAGE)
        t1 = time.perf_counter()
        more = engine.reads.json(feed, PAGE, page.next)
        t2 = time.perf_counter()
        if len(page.results) != PAGE or len(more.results) != PAGE:
            raise RuntimeError(f"short ranked page from {feed}")
        first.append((t1 - t0) * 1000)
        nxt.append((t2 - t1) * 1000)
    likes = []
    for i in range(sizes.samples):
        aid = rng.choice(made)
        likes.append(_ms(functools.partial(engine.reactions.add, aid, "like", f"bench{i}")))
    plain: list[float] = []
    rich: list[float] = []
    for _ in range(sizes.samples):
        feed = f"timeline:{rng.choice(readers)}"
        reader = feed.partition(":")[2]
        plain.append(_ms(functools.partial(engine.reads.json, feed, PAGE)))
        with_reactions = functools.partial(
            engine.reads.json, feed, PAGE, reactions="counts,latest,own", user=reader
        )
        rich.append(_ms(with_reactions))
    return first, nxt, likes, plain, rich


def run(server: RedisServer, quick: bool) -> list[Row]:
    sizes = QUICK if quick else FULL
    print("ranked feeds and reactions", flush=True)
    return [*_store(server, "sql", sizes), *_store(server, "redis", sizes)]
