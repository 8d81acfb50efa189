"""One contract for every timeline store: memory (the reference), SQL on
SQLite and PostgreSQL, and Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidings.canonical.db import Database
from tidings.core import ids
from tidings.stores.base import Cap, TimelineStore
from tidings.stores.memory import MemoryTimelineStore
from tidings.stores.redis.stores import RedisTimelineStore, connect
from tidings.stores.sql import SqlTimelineStore


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis", "cluster"])
def timeline(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TimelineStore]:
    kind = request.param
    if kind == "memory":
        yield MemoryTimelineStore()
    elif kind in ("redis", "cluster"):
        client = connect(
            request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
        )
        yield RedisTimelineStore(client, "contract")
        client.close()
    else:
        url = (
            f"sqlite:///{tmp_path / 't.db'}"
            if kind == "sqlite"
            else request.getfixturevalue("postgres_url")
        )
        db = Database(url)
        db.migrate()
        yield SqlTimelineStore(db)
        db.close()


def make_ids(n: int, start_ms: int = 1_700_000_000_000, step: int = 1000) -> list[str]:
    return [ids.new_id(start_ms + i * step) for i in range(n)]


def everything(t: TimelineStore, feed: str, cap: Cap) -> list[str]:
    return t.page(feed, limit=100_000, before=None, cap=cap)


BIG = Cap(800)


def test_empty_feed_reads_empty(timeline: TimelineStore) -> None:
    assert timeline.page("timeline:nobody", limit=10, before=None, cap=BIG) == []


def test_newest_first_and_before_is_exclusive(timeline: TimelineStore) -> None:
    a = make_ids(10)
    for i in a:
        timeline.add(["timeline:x"], [i], BIG)
    assert everything(timeline, "timeline:x", BIG) == a[::-1]
    assert timeline.page("timeline:x", limit=3, before=a[5], cap=BIG) == [a[4], a[3], a[2]]
    assert timeline.page("timeline:x", limit=3, before=a[0], cap=BIG) == []


@pytest.mark.parametrize("order", ["ascending", "descending", "shuffled"])
def test_out_of_order_inserts_are_sorted(timeline: TimelineStore, order: str) -> None:
    a = make_ids(40)
    shuffled = {"ascending": a, "descending": a[::-1], "shuffled": a[1::2] + a[::2]}[order]
    for i in shuffled:
        timeline.add(["timeline:x"], [i], BIG)
    assert everything(timeline, "timeline:x", BIG) == a[::-1]


def test_add_is_idempotent(timeline: TimelineStore) -> None:
    a = make_ids(5)
    timeline.add(["timeline:x", "timeline:y"], a, BIG)
    timeline.add(["timeline:x", "timeline:y"], a, BIG)
    timeline.add(["timeline:x"], [a[2]], BIG)
    timeline.add(["timeline:x"], [a[4]], BIG)
    assert everything(timeline, "timeline:x", BIG) == a[::-1]
    assert everything(timeline, "timeline:y", BIG) == a[::-1]


def test_one_id_into_many_feeds(timeline: TimelineStore) -> None:
    feeds = [f"timeline:u{i}" for i in range(250)]
    (a,) = make_ids(1)
    timeline.add(feeds, [a], BIG)
    assert all(everything(timeline, f, BIG) == [a] for f in feeds)


def test_cap_keeps_newest_exactly(timeline: TimelineStore) -> None:
    cap = Cap(5)
    a = make_ids(30)
    for i in a:
        timeline.add(["timeline:x"], [i], cap)
    assert everything(timeline, "timeline:x", cap) == a[-5:][::-1]


def test_cap_drops_an_old_insert(timeline: TimelineStore) -> None:
    cap = Cap(3)
    a = make_ids(5)
    timeline.add(["timeline:x"], a[2:], cap)
    timeline.add(["timeline:x"], [a[0]], cap)  # older than everything held: dropped
    assert everything(timeline, "timeline:x", cap) == a[2:][::-1]


def test_removal_does_not_resurrect_trimmed_entries(timeline: TimelineStore) -> None:
    cap = Cap(3)
    a = make_ids(6)
    for i in a:
        timeline.add(["timeline:x"], [i], cap)
    timeline.remove(["timeline:x"], [a[4]], cap)
    assert everything(timeline, "timeline:x", cap) == [a[5], a[3]]
    timeline.add(["timeline:x"], [a[1]], cap)  # room again: an old id is accepted
    assert everything(timeline, "timeline:x", cap) == [a[5], a[3], a[1]]


def test_many_ids_merge_and_cap(timeline: TimelineStore) -> None:
    cap = Cap(10)
    a = make_ids(30)
    timeline.add(["timeline:x"], a[::2], cap)
    timeline.add(["timeline:x"], a[1::2], cap)
    assert everything(timeline, "timeline:x", cap) == a[-10:][::-1]


def test_many_ids_overlapping_what_a_feed_holds(timeline: TimelineStore) -> None:
    cap = Cap(4)
    a = make_ids(5)
    timeline.add(["timeline:x"], a[3:], cap)
    timeline.add(["timeline:x"], a, cap)  # a copy on follow: overlaps, then caps
    assert everything(timeline, "timeline:x", cap) == a[1:][::-1]
    timeline.add(["timeline:x"], a, cap)
    assert everything(timeline, "timeline:x", cap) == a[1:][::-1]


def test_remove_from_many_feeds_and_ignore_unknown(timeline: TimelineStore) -> None:
    a = make_ids(4)
    timeline.add(["timeline:x", "timeline:y"], a, BIG)
    timeline.remove(
        ["timeline:x", "timeline:y", "timeline:z"], [a[1], a[3], make_ids(1, 5)[0]], BIG
    )
    assert everything(timeline, "timeline:x", BIG) == [a[2], a[0]]
    assert everything(timeline, "timeline:y", BIG) == [a[2], a[0]]
    timeline.remove(["timeline:x"], [a[0], a[2]], BIG)
    assert everything(timeline, "timeline:x", BIG) == []
    timeline.add(["timeline:x"], [a[1]], BIG)
    assert everything(timeline, "timeline:x", BIG) == [a[1]]


def test_floor_hides_expired_entries(timeline: TimelineStore) -> None:
    day = 86_400_000
    now = int(time.time() * 1000)
    a = make_ids(10, start_ms=now - 10 * day, step=day)
    # Real time matters here: Redis expires whole feeds by its own clock.
    floor = ids.floor_id(ids.id_ms(a[6]))
    cap = Cap(800, floor=floor, ttl_ms=now - ids.id_ms(a[6]))
    timeline.add(["timeline:x"], a, cap)
    assert everything(timeline, "timeline:x", cap) == a[6:][::-1]
    assert timeline.page("timeline:x", limit=2, before=a[7], cap=cap) == [a[6]]


def test_same_millisecond_ids_page_exactly(timeline: TimelineStore) -> None:
    a = sorted(ids.new_id(1_700_000_000_000) for _ in range(57))
    timeline.add(["timeline:x"], a, BIG)
    seen: list[str] = []
    before = None
    while page := timeline.page("timeline:x", limit=5, before=before, cap=BIG):
        seen.extend(page)
        before = page[-1]
    assert seen == a[::-1]


def test_long_feed_through_compaction(timeline: TimelineStore) -> None:
    cap = Cap(50)
    a = make_ids(400)
    for i in a:
        timeline.add(["timeline:x"], [i], cap)
    assert everything(timeline, "timeline:x", cap) == a[-50:][::-1]


def test_clear(timeline: TimelineStore) -> None:
    a = make_ids(3)
    timeline.add(["timeline:x", "timeline:y"], a, BIG)
    timeline.clear(["timeline:x"])
    assert everything(timeline, "timeline:x", BIG) == []
    assert everything(timeline, "timeline:y", BIG) == a[::-1]
    timeline.add(["timeline:x"], a[:1], BIG)
    assert everything(timeline, "timeline:x", BIG) == a[:1]
