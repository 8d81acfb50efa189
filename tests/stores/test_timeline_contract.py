"""One contract for every timeline store: memory (the reference), SQL on
SQLite and PostgreSQL, and Redis on one server and on a cluster (the
``backend`` fixture)."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from backends import Backend
from tidings.core import ids
from tidings.stores.base import Cap, TimelineStore


@pytest.fixture
def timeline(backend: Backend) -> TimelineStore:
    return backend.timeline


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


# -- prepare_add: encoded now, written when called ------------------------------


def test_a_prepared_write_lands_only_when_called(timeline: TimelineStore) -> None:
    a = make_ids(3)
    write = timeline.prepare_add(["timeline:x", "timeline:y"], a, BIG)
    assert everything(timeline, "timeline:x", BIG) == []
    write()
    assert everything(timeline, "timeline:x", BIG) == a[::-1]
    assert everything(timeline, "timeline:y", BIG) == a[::-1]


def test_a_prepared_write_is_an_add(timeline: TimelineStore) -> None:
    # Given the same writes made by add on one feed and prepared on another
    cap = Cap(5)
    a = make_ids(12)
    batches = [a[4:8], a[:2], a[10:], a[3:5], a[8:10]]
    for batch in batches:
        timeline.add(["timeline:x"], batch, cap)
        timeline.prepare_add(["timeline:y"], batch, cap)()
    # Then the two feeds hold the same, capped
    assert everything(timeline, "timeline:y", cap) == everything(timeline, "timeline:x", cap)
    assert everything(timeline, "timeline:y", cap) == a[-5:][::-1]


def test_a_write_prepared_in_another_thread(timeline: TimelineStore) -> None:
    # Deliveries prepare the next chunk in a read-ahead thread.
    a = make_ids(4)
    feeds = [f"timeline:u{i}" for i in range(30)]
    with ThreadPoolExecutor(1) as ahead:
        writes = [ahead.submit(timeline.prepare_add, feeds, [i], BIG) for i in a]
        for write in writes:
            write.result()()
    assert all(everything(timeline, f, BIG) == a[::-1] for f in feeds)


def test_a_prepared_write_sent_again_changes_nothing(timeline: TimelineStore) -> None:
    cap = Cap(4)
    a = make_ids(6)
    timeline.add(["timeline:x"], a[:1], cap)
    write = timeline.prepare_add(["timeline:x", "timeline:y"], a[1:], cap)
    write()
    write()  # a retried chunk
    assert everything(timeline, "timeline:x", cap) == a[2:][::-1]
    assert everything(timeline, "timeline:y", cap) == a[2:][::-1]


def test_a_prepared_write_of_nothing_does_nothing(timeline: TimelineStore) -> None:
    a = make_ids(2)
    timeline.add(["timeline:x"], a, BIG)
    timeline.prepare_add([], a, BIG)()
    timeline.prepare_add(["timeline:x", "timeline:y"], [], BIG)()
    assert everything(timeline, "timeline:x", BIG) == a[::-1]
    assert everything(timeline, "timeline:y", BIG) == []


# -- page_docs: a page, and the JSON the store holds for it -------------------


def docs_of(made: list[str]) -> dict[str, tuple[int, bytes]]:
    return {a: (1, b'{"id":"%s"}' % a.encode()) for a in made}


def test_page_docs_pages_as_page_does(timeline: TimelineStore) -> None:
    day = 86_400_000
    now = int(time.time() * 1000)
    a = make_ids(12, start_ms=now - 12 * day, step=day)
    capped = Cap(800, floor=ids.floor_id(ids.id_ms(a[3])), ttl_ms=now - ids.id_ms(a[3]))
    timeline.add(["timeline:x"], a, BIG)
    for cap in (BIG, Cap(8), capped):
        for limit, before in [(5, None), (5, a[9]), (100, a[6]), (3, a[0]), (1, a[11])]:
            page = timeline.page("timeline:x", limit=limit, before=before, cap=cap)
            found = timeline.page_docs("timeline:x", limit=limit, before=before, cap=cap)[0]
            assert found == page


def test_page_docs_of_an_empty_feed(timeline: TimelineStore) -> None:
    assert timeline.page_docs("timeline:nobody", limit=10, before=None, cap=BIG) == ([], {})


def test_page_docs_returns_the_stored_json_of_the_page_only(backend: Backend) -> None:
    # Given a feed of 10 activities, of which every other one has its JSON stored
    timeline = backend.timeline
    a = make_ids(10)
    stored = docs_of(a[::2])
    backend.store_docs(stored)
    timeline.add(["timeline:x"], a, BIG)
    # When a page of 5 is read with its JSON
    page, docs = timeline.page_docs("timeline:x", limit=5, before=a[8], cap=BIG)
    # Then the JSON found is that of stored activities on the page, as stored
    assert page == a[3:8][::-1]
    expected = {i: stored[i][1] for i in page if i in stored}
    assert docs.items() <= expected.items()
    # And a store that reads it in passing found every one
    if backend.docs_in_passing:
        assert docs == expected
    else:
        assert docs == {}


# -- add_each: a batch of activities, each feed its own ids ----------------------

#: A step of a case: ("each", {feed: indices}), ("add", feeds, indices) or
#: ("remove", feeds, indices); indices name ids of ``make_ids``, oldest first.
Step = tuple[Any, ...]


@dataclass(frozen=True)
class Case:
    max_length: int
    steps: list[Step]
    #: What each feed reads afterwards, as indices, newest first.
    expected: dict[str, list[int]]


CASES = {
    "different ids per feed": Case(
        800,
        [("each", {"x": [0, 2], "y": [1], "z": [2, 0, 1]})],
        {"x": [2, 0], "y": [1], "z": [2, 1, 0]},
    ),
    "out of order across calls": Case(
        800,
        [("each", {"x": [1, 3, 5]}), ("each", {"x": [2, 4]}), ("each", {"x": [0]})],
        {"x": [5, 4, 3, 2, 1, 0]},
    ),
    "interleaved across calls and feeds": Case(
        800,
        [
            ("each", {"x": [5, 1, 3], "y": [0, 2]}),
            ("each", {"x": [2, 4], "y": [5, 1]}),
            ("each", {"x": [0], "y": [4, 3]}),
        ],
        {"x": [5, 4, 3, 2, 1, 0], "y": [5, 4, 3, 2, 1, 0]},
    ),
    "duplicates within and across calls": Case(
        800,
        [("each", {"x": [3, 3, 1, 1]}), ("each", {"x": [1, 2, 3, 2]})],
        {"x": [3, 2, 1]},
    ),
    "a retried call changes nothing": Case(
        4,
        [("each", {"x": [0, 4, 2], "y": [3, 1]})] * 2 + [("each", {"x": [5, 1, 3], "y": [0]})] * 2,
        {"x": [5, 4, 3, 2], "y": [3, 1, 0]},
    ),
    "the cap keeps the newest of one call": Case(
        3, [("each", {"x": [6, 0, 5, 1, 4, 2, 3], "y": [1]})], {"x": [6, 5, 4], "y": [1]}
    ),
    "an id older than a full feed's window is ignored": Case(
        3,
        [("each", {"x": [2, 4, 6]}), ("each", {"x": [1]}), ("each", {"x": [0, 3]})],
        {"x": [6, 4, 3]},
    ),
    "ids below a full feed's window and above its newest": Case(
        3, [("each", {"x": [2, 4, 6]}), ("each", {"x": [0, 1, 7]})], {"x": [7, 6, 4]}
    ),
    "an id inside a full feed's window drops its oldest": Case(
        3,
        [("each", {"x": [0, 2, 4]}), ("each", {"x": [3]}), ("each", {"x": [1]})],
        {"x": [4, 3, 2]},
    ),
    "a removal does not bring back an id the cap dropped": Case(
        3,
        [("each", {"x": [0, 1, 2, 4]}), ("each", {"x": [3]}), ("remove", ["x"], [4])],
        {"x": [3, 2]},
    ),
    "after a removal a full feed has room again": Case(
        3,
        [("each", {"x": [1, 2, 3, 4]}), ("remove", ["x"], [3]), ("each", {"x": [0]})],
        {"x": [4, 2, 0]},
    ),
    "mixed with add and remove": Case(
        800,
        [
            ("add", ["x", "y"], [2, 5]),
            ("each", {"x": [3, 1], "y": [4]}),
            ("remove", ["x"], [3]),
            ("each", {"x": [3, 0, 5]}),
            ("add", ["y"], [1, 6]),
            ("remove", ["x", "y"], [6, 2]),
        ],
        {"x": [5, 3, 1, 0], "y": [5, 4, 1]},
    ),
    "mixed with add and remove under a cap": Case(
        3,
        [
            ("add", ["x", "y"], [3, 5]),
            ("each", {"x": [4, 1], "y": [2]}),
            ("add", ["x", "y"], [0, 6]),
            ("remove", ["y"], [5]),
            ("each", {"x": [2], "y": [4, 1]}),
        ],
        {"x": [6, 5, 4], "y": [6, 4, 3]},
    ),
    # Eight ids a feed or more take SQLite's other insert (one JSON object).
    "many ids a feed, some there already": Case(
        800,
        [("each", {"x": [0, 2, 4]}), ("each", {"x": list(range(10)), "y": list(range(9, -1, -1))})],
        {"x": list(range(9, -1, -1)), "y": list(range(9, -1, -1))},
    ),
    "many ids a feed, retried, under a cap": Case(
        5,
        [("each", {"x": [9, 1, 8, 2, 7, 3, 6, 4, 5, 0]})] * 2,
        {"x": [9, 8, 7, 6, 5]},
    ),
    "many ids a feed beside feeds of one": Case(
        800,
        [("each", {"x": list(range(10)), "y": [3]}), ("each", {"y": list(range(10))})],
        {"x": list(range(9, -1, -1)), "y": list(range(9, -1, -1))},
    ),
    "nothing to write": Case(
        800, [("each", {"x": [0]}), ("each", {}), ("each", {"x": [], "y": []})], {"x": [0], "y": []}
    ),
}


def run_step(timeline: TimelineStore, step: Step, a: list[str], cap: Cap) -> None:
    def feeds(names: list[str]) -> list[str]:
        return [f"timeline:{n}" for n in names]

    if step[0] == "each":
        entries = {f"timeline:{n}": [a[i] for i in held] for n, held in step[1].items()}
        timeline.add_each(entries, cap)
    elif step[0] == "add":
        timeline.add(feeds(step[1]), [a[i] for i in step[2]], cap)
    else:
        timeline.remove(feeds(step[1]), [a[i] for i in step[2]], cap)


@pytest.mark.parametrize("name", list(CASES))
def test_add_each(timeline: TimelineStore, name: str) -> None:
    case = CASES[name]
    cap = Cap(case.max_length)
    a = make_ids(10)
    for step in case.steps:
        run_step(timeline, step, a, cap)
    for feed, expected in case.expected.items():
        assert everything(timeline, f"timeline:{feed}", cap) == [a[i] for i in expected], feed


def test_add_each_is_prepared_then_written(timeline: TimelineStore) -> None:
    a = make_ids(4)
    write = timeline.prepare_add_each({"timeline:x": [a[2], a[0]], "timeline:y": [a[3]]}, BIG)
    assert everything(timeline, "timeline:x", BIG) == []
    write()
    timeline.add_each({"timeline:x": [a[1]]}, BIG)
    write()  # a retried chunk
    assert everything(timeline, "timeline:x", BIG) == [a[2], a[1], a[0]]
    assert everything(timeline, "timeline:y", BIG) == [a[3]]


def test_add_each_over_a_floor(timeline: TimelineStore) -> None:
    day = 86_400_000
    now = int(time.time() * 1000)
    a = make_ids(10, start_ms=now - 10 * day, step=day)
    # Real time matters here: Redis expires whole feeds by their newest entry.
    cap = Cap(800, floor=ids.floor_id(ids.id_ms(a[6])), ttl_ms=now - ids.id_ms(a[6]))
    timeline.add_each({"timeline:x": [a[9], a[2], a[7]], "timeline:y": [a[1], a[3]]}, cap)
    timeline.add_each({"timeline:x": [a[6], a[0], a[8]], "timeline:z": [a[5], a[9]]}, cap)
    assert everything(timeline, "timeline:x", cap) == [a[9], a[8], a[7], a[6]]
    assert everything(timeline, "timeline:y", cap) == []
    assert everything(timeline, "timeline:z", cap) == [a[9]]
    assert timeline.page("timeline:x", limit=5, before=a[8], cap=cap) == [a[7], a[6]]


class Model:
    """The contract in plain Python: a set of ids per feed, its newest kept."""

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length
        self.feeds: dict[str, set[str]] = {}

    def add(self, feed: str, activity_ids: list[str]) -> None:
        held = self.feeds.setdefault(feed, set())
        held.update(activity_ids)
        self.feeds[feed] = set(sorted(held)[-self.max_length :])

    def remove(self, feed: str, activity_ids: list[str]) -> None:
        self.feeds.get(feed, set()).difference_update(activity_ids)

    def read(self, feed: str) -> list[str]:
        return sorted(self.feeds.get(feed, set()), reverse=True)


def arrivals(a: list[str], rng: random.Random, window: int) -> list[str]:
    """``a`` shuffled within windows, as concurrent deliveries write them."""
    out: list[str] = []
    for start in range(0, len(a), window):
        part = a[start : start + window]
        rng.shuffle(part)
        out += part
    return out


@pytest.mark.parametrize("max_length", [7, 60])
def test_add_each_matches_the_model(timeline: TimelineStore, max_length: int) -> None:
    # Given a stream of ids, out of order, written in batches to random subsets
    # of feeds (with stragglers, repeats, plain adds and removals mixed in)
    rng = random.Random(max_length)
    cap = Cap(max_length)
    model = Model(max_length)
    feeds = [f"timeline:r{i}" for i in range(5)]
    a = make_ids(500, step=7)
    stream = arrivals(a, rng, 12)
    sent: list[str] = []
    while stream:
        batch = [stream.pop(0) for _ in range(min(len(stream), rng.randint(1, 9)))]
        sent += batch
        batch += rng.sample(sent, min(len(sent), rng.randint(0, 3)))  # retries, stragglers
        entries = {f: rng.sample(batch, rng.randint(0, len(batch))) for f in feeds}
        timeline.add_each(entries, cap)
        for f, held in entries.items():
            model.add(f, held)
        roll = rng.random()
        if roll < 0.1:
            chosen = rng.sample(feeds, 2)
            timeline.add(chosen, batch, cap)
            for f in chosen:
                model.add(f, batch)
        elif roll < 0.2:
            gone = rng.sample(sent, min(len(sent), 4))
            timeline.remove(feeds, gone, cap)
            for f in feeds:
                model.remove(f, gone)
    # Then every feed reads as the model says
    for f in feeds:
        assert everything(timeline, f, cap) == model.read(f), f
