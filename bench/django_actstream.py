"""Bench: django-activity-stream's ``user_stream`` against the tidings read of
the same timeline (``--only actstream``; issue 30).

One private PostgreSQL server holds both: django-activity-stream 2.0's tables
(Django's own database) and tidings' canonical store (a database of its own
on the same server). tidings runs as the Django guide sets it up: the
``tidings.contrib.django`` engine, ``database_url`` on PostgreSQL and
``redis_url`` (the bench's private redis-server) for the feeds, the default
thread runner. A second engine on the same canonical database keeps its feeds
in PostgreSQL too (``timeline_store="sql"``, no Redis; the reader's feed
rebuilt from the canonical store): tidings on nothing but the PostgreSQL
actstream has.

The data (:mod:`bench.actstream_data` fills it) is the same on both sides:
``users`` users, ``actions`` actions by actors drawn uniformly, and a reader
following ``following`` of them.

Timed, interleaved in each of ``reads`` rounds (after a warm-up; the order
reversed every other round):

- ``list(user_stream(reader)[:25])``: actstream's own queries, with the
  generic relations it fetches (``FETCH_RELATIONS``, on by default), against
  ``engine.read(home_feed, limit=25)``, that read enriched into ``User``
  instances (:func:`tidings.contrib.django.enrich`: both sides then return
  model instances), and the read of the PostgreSQL-only engine;
- pages 2 to 4: actstream's offset slices against tidings' cursor pages.

Before timing, the bench checks that the first four pages of each hold the
same actions in the same order.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench import actstream_data
from bench.actstream_data import Dataset, Sizes
from bench.harness import PostgresServer, RedisServer, Row, at_least, percentile, settle

PAGE = 25
#: Pages compared after the first (actstream: offset slices; tidings: cursors).
NEXT_PAGES = 3
#: actstream's p99 ÷ tidings' p99 on the first page, the issue's goal.
TARGET_RATIO = 20.0
WARM_UP = 30

FULL = Sizes(users=20_000, actions=1_000_000, following=200, reads=1_000)
QUICK = Sizes(users=2_000, actions=20_000, following=200, reads=50)

#: What is timed: (sample name, row label, store).
TIMED = (
    ("actstream", "actstream user_stream, first page of 25", "PostgreSQL"),
    ("tidings", "tidings read, first page of 25", "PostgreSQL + Redis"),
    (
        "tidings + enrich",
        "tidings read + enrich (User instances), first page",
        "PostgreSQL + Redis",
    ),
    ("tidings sql", "tidings read, first page of 25", "PostgreSQL"),
    ("actstream next", f"actstream user_stream, pages 2-{1 + NEXT_PAGES} (offset)", "PostgreSQL"),
    ("tidings next", f"tidings read, pages 2-{1 + NEXT_PAGES} (cursor)", "PostgreSQL + Redis"),
    ("tidings sql next", f"tidings read, pages 2-{1 + NEXT_PAGES} (cursor)", "PostgreSQL"),
)
#: actstream ÷ tidings: (row label, actstream's samples, tidings' samples, store, the goal's row).
RATIOS = (
    ("actstream ÷ tidings read, first page", "actstream", "tidings", "PostgreSQL + Redis", True),
    ("actstream ÷ tidings read + enrich, first page", "actstream", "tidings + enrich",
     "PostgreSQL + Redis", False),
    ("actstream ÷ tidings read, first page", "actstream", "tidings sql", "PostgreSQL", False),
    (f"actstream ÷ tidings, pages 2-{1 + NEXT_PAGES}", "actstream next", "tidings next",
     "PostgreSQL + Redis", False),
    (f"actstream ÷ tidings, pages 2-{1 + NEXT_PAGES}", "actstream next", "tidings sql next",
     "PostgreSQL", False),
)  # fmt: skip


@dataclass
class Samples:
    """Milliseconds per call, by what was timed."""

    ms: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, fn: Callable[[], object]) -> None:
        t0 = time.perf_counter()
        fn()
        self.ms.setdefault(name, []).append((time.perf_counter() - t0) * 1000)

    def p(self, name: str, q: float) -> float:
        return percentile(self.ms[name], q)


@dataclass(frozen=True)
class Readers:
    """The reads of one dataset, each returning what an application would use."""

    #: actstream's page ``n`` (0: the first), as model instances.
    stream: Callable[[int], list[Any]]
    #: A tidings page from the Django app's engine (Redis feeds), by cursor.
    page: Callable[[str | None], Any]
    #: The same from the engine whose feeds are in PostgreSQL.
    sql_page: Callable[[str | None], Any]
    #: The Django app engine's first page, enriched into model instances.
    enriched: Callable[[], list[Any]]


def run(server: RedisServer, quick: bool) -> list[Row]:
    sizes = QUICK if quick else FULL
    with (
        PostgresServer() as postgres,
        actstream_data.django_and_tidings(postgres, server) as (database, tidings_url),
    ):
        data = actstream_data.fill(sizes, postgres, database)
        with actstream_data.sql_engine(tidings_url, data.home_feed) as sql:
            storage = actstream_data.storage(postgres, database, tidings_url, server)
            return measure(data, sizes, readers(data, sql), storage)


def readers(data: Dataset, sql: Any) -> Readers:
    from actstream.models import user_stream

    from tidings.contrib.django import enrich, get_engine

    engine = get_engine()
    reader, feed = data.reader, data.home_feed

    def stream(n: int) -> list[Any]:
        return list(user_stream(reader)[n * PAGE : (n + 1) * PAGE])

    return Readers(
        stream=stream,
        page=lambda cursor: engine.read(feed, limit=PAGE, cursor=cursor),
        sql_page=lambda cursor: sql.read(feed, limit=PAGE, cursor=cursor),
        enriched=lambda: enrich(engine.read(feed, limit=PAGE).results),
    )


def measure(data: Dataset, sizes: Sizes, reads: Readers, storage: dict[str, int]) -> list[Row]:
    cursors = compare_pages(reads)
    queries, share = actstream_data.in_queries(partial(reads.stream, 0), WARM_UP)
    plans = {n + 1: actstream_data.explain_page(data.reader, n, PAGE) for n in (0, NEXT_PAGES)}
    scan = next((line.strip() for line in plans[1] if "Scan" in line), plans[1][0])
    print(
        f"  actstream: {queries} queries per page, {share:.0%} of its time in them;"
        f" its main query: {scan}",
        flush=True,
    )
    for n, plan in plans.items():
        print(f"  actstream page {n}: {plan[-1].strip()}", flush=True)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("actstream", partial(reads.stream, 0)),
        ("tidings", partial(reads.page, None)),
        ("tidings + enrich", reads.enriched),
        ("tidings sql", partial(reads.sql_page, None)),
    ]
    for n, cursor in enumerate(cursors, start=1):
        steps += [
            ("actstream next", partial(reads.stream, n)),
            ("tidings next", partial(reads.page, cursor)),
            ("tidings sql next", partial(reads.sql_page, cursor)),
        ]
    for _ in range(WARM_UP):
        for _, fn in steps:
            fn()
    settle()
    # What lives now (Django, both engines, the fill's leftovers) is left out
    # of the collector's full passes, as in a pre-forked server: otherwise a
    # full pass over a heap a million-row fill grew stalls whichever read
    # happens to cross the threshold (both sides alike), and p99 measures it.
    gc.freeze()
    samples = Samples()
    full_passes = gc.get_stats()[2]["collections"]
    try:
        for round_ in range(sizes.reads):
            for name, fn in steps if round_ % 2 else reversed(steps):
                samples.add(name, fn)
    finally:
        full_passes = gc.get_stats()[2]["collections"] - full_passes
        gc.unfreeze()
    print(f"  full garbage collections while timing: {full_passes}", flush=True)
    detail = {
        "queries_per_page": queries,
        "share_in_queries": share,
        "plans": plans,
        "fill_seconds": data.seconds,
        "full_collections_while_timing": full_passes,
        "storage_bytes": storage,
    }
    return rows(samples, sizes, detail)


def compare_pages(reads: Readers) -> list[str]:
    """Check that the first 1 + NEXT_PAGES pages of actstream and of both tidings
    engines hold the same actions in order, and that enrichment names the
    users actstream does; the cursors of pages 2 onwards."""
    cursors: list[str] = []
    cursor: str | None = None
    for n in range(1 + NEXT_PAGES):
        ours = [a.id for a in reads.stream(n)]
        page, sql_page = reads.page(cursor), reads.sql_page(cursor)
        for name, got in (("PostgreSQL + Redis", page), ("PostgreSQL", sql_page)):
            theirs = [actstream_data.action_id(a.foreign_id) for a in got.results]
            if ours != theirs or len(ours) != PAGE:
                raise RuntimeError(
                    f"page {n + 1} differs: actstream {ours}, tidings ({name}) {theirs}"
                )
        if page.next != sql_page.next or page.next is None:
            raise RuntimeError(f"page {n + 1}: the engines' cursors differ")
        cursor = page.next
        cursors.append(cursor)
    for action, item in zip(reads.stream(0), reads.enriched(), strict=True):
        if (action.actor, action.action_object, action.target) != (
            item.actor,
            item.object,
            item.target,
        ):
            raise RuntimeError(f"action {action.id}: actstream and tidings name other users")
    print(f"  the first {1 + NEXT_PAGES} pages of {PAGE} match", flush=True)
    return cursors[:NEXT_PAGES]


def rows(samples: Samples, sizes: Sizes, detail: dict[str, Any]) -> list[Row]:
    size = (
        f"{sizes.actions:,} actions, {sizes.users:,} users, reader follows {sizes.following};"
        f" {sizes.reads:,} rounds"
    )
    out: list[Row] = []
    for name, label, store in TIMED:
        xs = samples.ms[name]
        extra = {"mean_ms": sum(xs) / len(xs), "max_ms": max(xs)}
        if name == "actstream":
            extra |= detail
        for q in (50, 99):
            out.append(Row(f"{label}, p{q}", store, size, samples.p(name, q), "ms", detail=extra))
    goal = sizes.actions >= FULL.actions
    for label, theirs, ours, store, the_goal in RATIOS:
        p99 = samples.p(theirs, 99) / samples.p(ours, 99)
        target, met = at_least(p99, TARGET_RATIO, goal and the_goal)
        p50 = {"p50_ratio": samples.p(theirs, 50) / samples.p(ours, 50)}
        out.append(Row(f"{label}, p99", store, size, p99, "x", target, met, p50))
    for r in out:
        ratio = f" (p50 {r.detail['p50_ratio']:.2f}x)" if "p50_ratio" in r.detail else ""
        print(f"  {r.bench} [{r.store}]: {r.result()}{ratio}", flush=True)
    return out
