"""Users and enrichment (``--only users``), on SQLite and on SQLite + Redis.

A page of 25 with ``enrich=true`` (each activity's actor a user with a
profile, its object a stored object) against the same page without,
interleaved; and 16 threads claiming one handle at once, many rounds: each
round must have exactly one winner.
"""

from __future__ import annotations

import contextlib
import functools
import random
import threading
from collections.abc import Callable

from bench.harness import RedisServer, Row, at_most, percentile, settle, timed
from bench.harness import engine as engine_for
from tidings import Tidings
from tidings.core.users import HandleTaken

PAGE = 25
SAMPLES = 2_000
READERS = 50
AUTHORS = 200
ROUNDS = 50


def _ms(fn: Callable[[], object]) -> float:
    return timed(fn) * 1000


def _fill(engine: Tidings, rng: random.Random, authors: int, readers: int) -> None:
    for a in range(authors):
        profile = {"name": f"Author {a}", "avatar": f"/avatars/{a}.png", "bio": "x" * 120}
        engine.users.create(f"a{a}", f"author{a}", profile)
        engine.objects.put("photo", str(a), {"url": f"/p/{a}.jpg", "w": 640, "h": 480})
    pairs = [
        (f"timeline:r{r}", f"user:a{a}")
        for r in range(readers)
        for a in rng.sample(range(authors), 20)
    ]
    for start in range(0, len(pairs), 1000):
        engine.follow_many(pairs[start : start + 1000], copy_limit=0)
    for a in range(authors):
        batch = [
            {"actor": f"a{a}", "verb": "post", "object": f"photo:{rng.randrange(authors)}"}
            for _ in range(10)
        ]
        engine.add_activities(f"user:a{a}", batch)
    engine.admin.drain()


def enrichment(server: RedisServer, store: str, quick: bool) -> list[Row]:
    rng = random.Random(3)
    label = {"sql": "sqlite", "redis": "sqlite+redis"}[store]
    samples = 100 if quick else SAMPLES
    with engine_for(store, server) as engine:
        _fill(engine, rng, 20 if quick else AUTHORS, 5 if quick else READERS)
        readers = [f"timeline:r{r}" for r in range(5 if quick else READERS)]
        for feed in readers[:5]:
            engine.reads.json(feed, PAGE, enrich=True)
        settle()
        plain: list[float] = []
        rich: list[float] = []
        for _ in range(samples):
            feed = rng.choice(readers)
            plain.append(_ms(functools.partial(engine.reads.json, feed, PAGE)))
            rich.append(_ms(functools.partial(engine.reads.json, feed, PAGE, enrich=True)))
    extra = percentile(rich, 99) - percentile(plain, 99)
    target, met = at_most(extra, 2.0)
    detail = {
        "plain_p50_ms": percentile(plain, 50),
        "plain_p99_ms": percentile(plain, 99),
        "enriched_p50_ms": percentile(rich, 50),
        "enriched_p99_ms": percentile(rich, 99),
    }
    print(f"  enrich {label}: +{extra:.2f} ms at p99", flush=True)
    size = f"{samples:,} pages of 25, actor + object each"
    return [
        Row("page of 25 with enrich=true, p99 added", label, size, extra, "ms", target, met, detail)
    ]


def rules(server: RedisServer, store: str, quick: bool) -> list[Row]:
    """A page of 25 for a reader with 1,000 mutes and 100 keyword filters
    (none of which hides anything here: the cost of checking them) against
    the same page for a reader without, interleaved."""
    rng = random.Random(4)
    label = {"sql": "sqlite", "redis": "sqlite+redis"}[store]
    samples = 100 if quick else SAMPLES
    with engine_for(store, server) as engine:
        _fill(engine, rng, 20 if quick else AUTHORS, 2)
        # The same follows as r0, with their history: the same pages.
        sources = [f.source for f in engine.following("timeline:r0", limit=100).results]
        engine.follow_many([("timeline:ruled", s) for s in sources], copy_limit=100)
        engine.admin.drain()
        for n in range(1000):
            engine.rules.mute("ruled", f"muted{n}")
        for n in range(100):
            engine.rules.add_filter("ruled", [f"keyword{n}", f"other phrase {n}"])
        plain_feed, ruled_feed = "timeline:r0", "timeline:ruled"
        a = engine.reads.json(plain_feed, PAGE).results
        b = engine.reads.json(ruled_feed, PAGE).results
        if len(a) != PAGE or len(b) != PAGE:
            raise RuntimeError("short pages")
        settle()
        plain: list[float] = []
        ruled: list[float] = []
        for _ in range(samples):
            plain.append(_ms(functools.partial(engine.reads.json, plain_feed, PAGE)))
            ruled.append(_ms(functools.partial(engine.reads.json, ruled_feed, PAGE)))
    ratio = percentile(ruled, 99) / percentile(plain, 99)
    target, met = at_most(ratio, 1.5)
    detail = {
        "plain_p50_ms": percentile(plain, 50),
        "plain_p99_ms": percentile(plain, 99),
        "ruled_p50_ms": percentile(ruled, 50),
        "ruled_p99_ms": percentile(ruled, 99),
    }
    print(f"  rules {label}: p99 x{ratio:.2f}", flush=True)
    size = f"{samples:,} pages of 25; 1,000 mutes, 100 filters"
    return [
        Row(
            "page of 25 with 1,000 mutes and 100 filters, p99 ratio",
            label,
            size,
            ratio,
            "x",
            target,
            met,
            detail,
        )
    ]


def claims(server: RedisServer, quick: bool) -> list[Row]:
    rounds = 5 if quick else ROUNDS
    winners: list[int] = []
    with engine_for("sql", server) as engine:
        for n in range(rounds):
            start = threading.Barrier(16)
            won: list[str] = []

            def claim(
                i: int, n: int = n, start: threading.Barrier = start, won: list[str] = won
            ) -> None:
                start.wait()
                with contextlib.suppress(HandleTaken):
                    engine.users.create(f"c{n}-{i}", f"Prize{n}" if i % 2 else f"PRIZE{n}")
                    won.append(f"c{n}-{i}")

            threads = [threading.Thread(target=claim, args=(i,)) for i in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            winners.append(len(won))
    exact = sum(1 for w in winners if w == 1)
    print(f"  handle claims: {exact}/{rounds} rounds with exactly one winner", flush=True)
    return [
        Row(
            "16 concurrent claims of one handle: rounds with exactly one winner",
            "sqlite",
            f"{rounds} rounds",
            exact,
            f"of {rounds}",
            f"= {rounds}",
            exact == rounds,
            {"winners": winners},
        )
    ]


def run(server: RedisServer, quick: bool) -> list[Row]:
    print("users and enrichment", flush=True)
    return [
        *enrichment(server, "sql", quick),
        *enrichment(server, "redis", quick),
        *rules(server, "sql", quick),
        *rules(server, "redis", quick),
        *claims(server, quick),
    ]
