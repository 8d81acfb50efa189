"""One contract for every aggregate store (aggregated and notification feeds):
memory (the reference), SQL on SQLite and PostgreSQL, and Redis on one server
and on a cluster (the ``backend`` fixture)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends import Backend
from tidings.core import ids
from tidings.core.aggregation import (
    AggregateCap,
    Member,
    Position,
    StoredAggregate,
    StoredAggregatePage,
)
from tidings.stores.base import AggregateStore
from tidings.stores.memory import MemoryAggregateStore


@pytest.fixture
def aggregates(backend: Backend) -> AggregateStore:
    return backend.aggregates


T = 1_700_000_000_000
BIG = AggregateCap(max_length=800, max_aggregate_size=10)
FEED = "notification:carol"


def make_ids(n: int, start_ms: int = T, step: int = 1000) -> list[str]:
    return [ids.new_id(start_ms + i * step) for i in range(n)]


def same_ms_ids(n: int, ms: int = T) -> list[str]:
    return sorted(ids.new_id(ms) for _ in range(n))


def m(activity_id: str, aggregate: str, actor: str = "bob") -> Member:
    return Member(activity_id, aggregate, actor)


def read(store: AggregateStore, feed: str = FEED, cap: AggregateCap = BIG) -> StoredAggregatePage:
    return store.page(feed, limit=100_000, snapshot=None, after=None, cap=cap)


def keys(page: StoredAggregatePage) -> list[str]:
    return [g.key for g in page.aggregates]


def by_key(page: StoredAggregatePage) -> dict[str, StoredAggregate]:
    return {g.key: g for g in page.aggregates}


def shape(page: StoredAggregatePage) -> list[tuple[str, list[str], int, int, bool, bool]]:
    """What a page shows of each aggregate (everything but positions)."""
    return [
        (g.key, g.activity_ids, g.activity_count, g.actor_count, g.is_seen, g.is_read)
        for g in page.aggregates
    ]


def walk(
    store: AggregateStore, feed: str, limit: int, cap: AggregateCap = BIG
) -> Iterator[list[StoredAggregate]]:
    """Pages of ``feed`` by snapshot cursor; the caller may change the feed between pages."""
    first = store.page(feed, limit=limit, snapshot=None, after=None, cap=cap)
    yield first.aggregates
    if not first.aggregates:
        return
    snapshot = first.snapshot
    assert snapshot is not None
    last = first.aggregates[-1]
    while True:
        page = store.page(
            feed,
            limit=limit,
            snapshot=snapshot,
            after=Position(last.position, last.key),
            cap=cap,
        )
        assert page.snapshot == snapshot
        if not page.aggregates:
            return
        yield page.aggregates
        last = page.aggregates[-1]


def walk_keys(store: AggregateStore, feed: str, limit: int) -> list[str]:
    return [g.key for page in walk(store, feed, limit) for g in page]


# -- reading -------------------------------------------------------------------


def test_empty_feed(aggregates: AggregateStore) -> None:
    page = read(aggregates, "notification:nobody")
    assert page.aggregates == []
    assert (page.unseen, page.unread) == (0, 0)
    assert aggregates.member_ids("notification:nobody") == []


def test_aggregates_are_ordered_by_their_newest_member(aggregates: AggregateStore) -> None:
    # Given three aggregates whose newest members interleave,
    a = make_ids(6)
    aggregates.add(
        [FEED],
        [m(a[0], "x"), m(a[1], "y"), m(a[2], "z"), m(a[3], "x"), m(a[4], "z")],
        BIG,
    )
    # when read, then the aggregate with the newest member comes first.
    page = read(aggregates)
    assert keys(page) == ["z", "x", "y"]
    assert [(g.newest, g.oldest, g.position) for g in page.aggregates] == [
        (a[4], a[2], ids.id_ms(a[4])),
        (a[3], a[0], ids.id_ms(a[3])),
        (a[1], a[1], ids.id_ms(a[1])),
    ]
    assert page.snapshot == a[4]
    assert set(page.docs) <= {i for g in page.aggregates for i in g.activity_ids}


def test_an_aggregate_receiving_an_activity_moves_to_the_top(aggregates: AggregateStore) -> None:
    a = make_ids(4)
    aggregates.add([FEED], [m(a[0], "old"), m(a[1], "mid"), m(a[2], "new")], BIG)
    assert keys(read(aggregates)) == ["new", "mid", "old"]
    aggregates.add([FEED], [m(a[3], "old")], BIG)
    page = read(aggregates)
    assert keys(page) == ["old", "new", "mid"]
    assert by_key(page)["old"].activity_ids == [a[3], a[0]]


def test_activity_ids_are_newest_first_and_capped_but_counted(aggregates: AggregateStore) -> None:
    # Given 15 activities in one aggregate and aggregates showing 10,
    a = make_ids(15)
    for i in a:
        aggregates.add([FEED], [m(i, "g", actor=f"u{int(i[-1], 16) % 3}")], BIG)
    # then a read shows the newest 10, newest first, and counts all 15.
    (g,) = read(aggregates).aggregates
    assert g.activity_ids == a[::-1][:10]
    assert g.activity_count == 15
    assert (g.oldest, g.newest) == (a[0], a[-1])
    small = AggregateCap(max_length=800, max_aggregate_size=1)
    (g1,) = read(aggregates, cap=small).aggregates
    assert g1.activity_ids == [a[-1]]
    assert g1.activity_count == 15


def test_actor_count_is_distinct_and_drops_with_an_actors_last_activity(
    aggregates: AggregateStore,
) -> None:
    a = make_ids(5)
    members = [m(a[0], "g", "ann"), m(a[1], "g", "bob"), m(a[2], "g", "ann"), m(a[3], "g", "cy")]
    aggregates.add([FEED], members, BIG)
    assert read(aggregates).aggregates[0].actor_count == 3
    aggregates.add([FEED], [members[0]], BIG)  # a retry counts nobody twice
    assert read(aggregates).aggregates[0].actor_count == 3

    steps = [
        (members[0], 3, 3),  # ann still has a[2]
        (members[1], 2, 2),  # bob's only activity
        (members[2], 1, 1),  # ann's last
        (members[0], 1, 1),  # already gone: nothing changes
    ]
    for removed, actors, count in steps:
        aggregates.remove([FEED], [removed], BIG)
        (g,) = read(aggregates).aggregates
        assert (g.actor_count, g.activity_count) == (actors, count), removed
    assert read(aggregates).aggregates[0].activity_ids == [a[3]]


def test_adding_the_same_member_again_changes_nothing(aggregates: AggregateStore) -> None:
    a = make_ids(4)
    members = [m(a[0], "x", "ann"), m(a[1], "y", "bob"), m(a[2], "x", "cy"), m(a[3], "y")]
    aggregates.add([FEED], members, BIG)
    aggregates.mark(FEED, ["x"], read=True)
    once = read(aggregates)
    for batch in ([members[0]], members, members[::-1], [members[2], members[2]]):
        aggregates.add([FEED], batch, BIG)
        again = read(aggregates)
        # A member a feed already holds neither recounts nor unmarks its aggregate.
        assert shape(again) == shape(once)
        assert (again.unseen, again.unread) == (once.unseen, once.unread)
    assert sorted(aggregates.member_ids(FEED)) == a


@pytest.mark.parametrize("order", ["ascending", "descending", "shuffled"])
def test_out_of_order_members_are_sorted(aggregates: AggregateStore, order: str) -> None:
    a = make_ids(30)
    shuffled = {"ascending": a, "descending": a[::-1], "shuffled": a[1::2] + a[::2]}[order]
    aggregate_of = {i: f"g{n % 3}" for n, i in enumerate(a)}
    for i in shuffled:
        aggregates.add([FEED], [m(i, aggregate_of[i])], BIG)
    page = read(aggregates)
    # a[29] is in g2, a[28] in g1, a[27] in g0.
    assert keys(page) == ["g2", "g1", "g0"]
    for g in page.aggregates:
        held = sorted((i for i in a if aggregate_of[i] == g.key), reverse=True)
        assert g.activity_ids == held[:10]
        assert g.activity_count == len(held)


def test_an_older_member_does_not_move_its_aggregate_but_makes_it_unseen(
    aggregates: AggregateStore,
) -> None:
    a = make_ids(4)
    aggregates.add([FEED], [m(a[1], "x"), m(a[2], "y")], BIG)
    aggregates.mark(FEED, None, read=True)
    aggregates.add([FEED], [m(a[0], "x")], BIG)
    page = read(aggregates)
    assert keys(page) == ["y", "x"]
    x = by_key(page)["x"]
    assert x.activity_ids == [a[1], a[0]]
    assert x.position == ids.id_ms(a[1])
    assert (x.is_seen, x.is_read) == (False, False)
    assert (page.unseen, page.unread) == (1, 1)


def test_one_call_writes_many_feeds(aggregates: AggregateStore) -> None:
    feeds = [f"notification:u{i}" for i in range(50)]
    a = make_ids(2)
    aggregates.add(feeds, [m(a[0], "x"), m(a[1], "y")], BIG)
    for feed in feeds:
        assert keys(read(aggregates, feed)) == ["y", "x"], feed
    aggregates.remove(feeds[:25], [m(a[1], "y")], BIG)
    assert keys(read(aggregates, feeds[0])) == ["x"]
    assert keys(read(aggregates, feeds[-1])) == ["y", "x"]


# -- removal -------------------------------------------------------------------


def test_remove(aggregates: AggregateStore) -> None:
    a = make_ids(5)
    aggregates.add([FEED], [m(a[0], "x"), m(a[1], "y"), m(a[2], "x"), m(a[3], "y")], BIG)
    # Removing the newest member of y lets x lead again.
    aggregates.remove([FEED], [m(a[3], "y")], BIG)
    page = read(aggregates)
    assert keys(page) == ["x", "y"]
    assert by_key(page)["y"].activity_count == 1
    assert by_key(page)["y"].newest == a[1]
    # Absent members (unknown id, unknown aggregate, other feed) are no-ops.
    before = shape(read(aggregates))
    aggregates.remove([FEED], [m(a[4], "x"), m(a[4], "nope")], BIG)
    aggregates.remove(["notification:other"], [m(a[0], "x")], BIG)
    assert shape(read(aggregates)) == before
    # An aggregate whose last member leaves disappears, with its counts.
    aggregates.remove([FEED], [m(a[1], "y")], BIG)
    page = read(aggregates)
    assert keys(page) == ["x"]
    assert (page.unseen, page.unread) == (1, 1)
    aggregates.remove([FEED], [m(a[0], "x"), m(a[2], "x")], BIG)
    page = read(aggregates)
    assert page.aggregates == []
    assert (page.unseen, page.unread) == (0, 0)
    assert aggregates.member_ids(FEED) == []
    # An emptied aggregate that gains a member again starts fresh.
    aggregates.add([FEED], [m(a[4], "y")], BIG)
    assert shape(read(aggregates)) == [("y", [a[4]], 1, 1, False, False)]


# -- the cap on aggregates -------------------------------------------------------------


def test_cap_keeps_the_newest_aggregates_and_counts_only_them(aggregates: AggregateStore) -> None:
    cap = AggregateCap(max_length=5, max_aggregate_size=10)
    a = make_ids(12)
    # Given eight aggregates written one by one into a feed of five,
    for n, i in enumerate(a[:8]):
        aggregates.add([FEED], [m(i, f"g{n}")], cap)
    page = read(aggregates, cap=cap)
    # then the five newest are held, and only they are unseen and unread.
    assert keys(page) == ["g7", "g6", "g5", "g4", "g3"]
    assert (page.unseen, page.unread) == (5, 5)
    assert sorted(aggregates.member_ids(FEED)) == a[3:8]

    # An old aggregate that receives a new activity is newest again and survives.
    aggregates.add([FEED], [m(a[8], "g3")], cap)
    aggregates.add([FEED], [m(a[9], "g8")], cap)
    page = read(aggregates, cap=cap)
    assert keys(page) == ["g8", "g3", "g7", "g6", "g5"]
    assert (page.unseen, page.unread) == (5, 5)

    # Seen state goes with a dropped aggregate; counts never exceed the cap.
    aggregates.mark(FEED, None, read=False)
    aggregates.add([FEED], [m(a[10], "g9"), m(a[11], "g10")], cap)
    page = read(aggregates, cap=cap)
    assert keys(page) == ["g10", "g9", "g8", "g3", "g7"]
    assert (page.unseen, page.unread) == (2, 5)
    # A dropped aggregate that comes back holds only what arrived since.
    aggregates.add([FEED], [m(ids.new_id(T + 100_000), "g4")], cap)
    page = read(aggregates, cap=cap)
    assert keys(page)[0] == "g4"
    assert by_key(page)["g4"].activity_count == 1
    assert page.unseen <= 5
    assert page.unread <= 5


def test_cap_drops_an_old_new_aggregate_at_once(aggregates: AggregateStore) -> None:
    cap = AggregateCap(max_length=3, max_aggregate_size=10)
    a = make_ids(4)
    aggregates.add([FEED], [m(a[1], "x"), m(a[2], "y"), m(a[3], "z")], cap)
    aggregates.add([FEED], [m(a[0], "old")], cap)  # older than every held aggregate
    page = read(aggregates, cap=cap)
    assert keys(page) == ["z", "y", "x"]
    assert (page.unseen, page.unread) == (3, 3)
    assert a[0] not in aggregates.member_ids(FEED)


def test_cap_in_one_batch(aggregates: AggregateStore) -> None:
    cap = AggregateCap(max_length=5, max_aggregate_size=10)
    a = make_ids(40)
    members = [m(i, f"g{n % 8:02}") for n, i in enumerate(a)]
    random.Random(7).shuffle(members)
    aggregates.add([FEED], members, cap)
    page = read(aggregates, cap=cap)
    assert keys(page) == ["g07", "g06", "g05", "g04", "g03"]
    assert [g.activity_count for g in page.aggregates] == [5] * 5
    assert (page.unseen, page.unread) == (5, 5)


# -- seen and read -----------------------------------------------------------------


def test_seen_and_read(aggregates: AggregateStore) -> None:
    a = make_ids(8)
    aggregates.add([FEED], [m(a[n], k) for n, k in enumerate("abcd")], BIG)

    def state() -> tuple[dict[str, tuple[bool, bool]], int, int]:
        page = read(aggregates)
        return {g.key: (g.is_seen, g.is_read) for g in page.aggregates}, page.unseen, page.unread

    new = (False, False)
    seen = (True, False)
    done = (True, True)
    # Given four new aggregates, all unseen and unread;
    assert state() == ({"a": new, "b": new, "c": new, "d": new}, 4, 4)
    # when some are marked, only those change (read implies seen);
    aggregates.mark(FEED, ["a"], read=False)
    assert state() == ({"a": seen, "b": new, "c": new, "d": new}, 3, 4)
    aggregates.mark(FEED, ["b", "nope", "b"], read=True)
    assert state() == ({"a": seen, "b": done, "c": new, "d": new}, 2, 3)
    # marking seen never takes back read;
    aggregates.mark(FEED, ["b"], read=False)
    assert state() == ({"a": seen, "b": done, "c": new, "d": new}, 2, 3)
    # unknown aggregates are ignored and create nothing;
    aggregates.mark(FEED, ["zzz"], read=True)
    aggregates.mark("notification:empty", None, read=True)
    aggregates.mark("notification:empty", ["a"], read=True)
    assert state() == ({"a": seen, "b": done, "c": new, "d": new}, 2, 3)
    assert read(aggregates, "notification:empty").aggregates == []
    # None marks every aggregate;
    aggregates.mark(FEED, None, read=False)
    assert state() == ({"a": seen, "b": done, "c": seen, "d": seen}, 0, 3)
    aggregates.mark(FEED, [], read=True)
    assert state() == ({"a": seen, "b": done, "c": seen, "d": seen}, 0, 3)
    aggregates.mark(FEED, None, read=True)
    assert state() == ({"a": done, "b": done, "c": done, "d": done}, 0, 0)
    # and a new activity makes its aggregate unseen and unread again.
    aggregates.add([FEED], [m(a[4], "b")], BIG)
    assert state() == ({"a": done, "b": new, "c": done, "d": done}, 1, 1)
    aggregates.add([FEED], [m(a[5], "e")], BIG)
    assert state() == ({"a": done, "b": new, "c": done, "d": done, "e": new}, 2, 2)
    # Removing an unseen aggregate's last activity removes it from the counts.
    aggregates.remove([FEED], [m(a[5], "e")], BIG)
    assert state() == ({"a": done, "b": new, "c": done, "d": done}, 1, 1)


def test_marks_are_per_feed(aggregates: AggregateStore) -> None:
    a = make_ids(1)
    aggregates.add([FEED, "notification:dave"], [m(a[0], "x")], BIG)
    aggregates.mark(FEED, None, read=True)
    assert read(aggregates).aggregates[0].is_read
    other = read(aggregates, "notification:dave")
    assert not other.aggregates[0].is_seen
    assert (other.unseen, other.unread) == (1, 1)


def test_aggregates_with_the_same_newest_millisecond_stay_apart(aggregates: AggregateStore) -> None:
    # Given two aggregates whose newest activities share a millisecond,
    x, y = same_ms_ids(2)
    cap = AggregateCap(max_length=2, max_aggregate_size=10)
    aggregates.add([FEED], [m(y, "x-aggregate"), m(x, "y-aggregate")], cap)
    page = read(aggregates, cap=cap)
    # then both are held, at the same ms and so in key order (not id order),
    assert keys(page) == ["y-aggregate", "x-aggregate"]
    assert [g.position for g in page.aggregates] == [T, T]
    assert (page.unseen, page.unread) == (2, 2)
    # and marking one never marks the other.
    aggregates.mark(FEED, ["x-aggregate"], read=False)
    page = read(aggregates, cap=cap)
    assert [(g.key, g.is_seen) for g in page.aggregates] == [
        ("y-aggregate", False),
        ("x-aggregate", True),
    ]
    aggregates.mark(FEED, ["y-aggregate"], read=True)
    page = read(aggregates, cap=cap)
    assert [(g.key, g.is_seen, g.is_read) for g in page.aggregates] == [
        ("y-aggregate", True, True),
        ("x-aggregate", True, False),
    ]
    assert (page.unseen, page.unread) == (0, 1)
    # Paging one at a time shows each once.
    assert walk_keys(aggregates, FEED, 1) == ["y-aggregate", "x-aggregate"]
    # A third aggregate in the same ms: the cap keeps the greatest keys.
    (z,) = same_ms_ids(1)
    aggregates.add([FEED], [m(z, "a-aggregate")], cap)
    assert keys(read(aggregates, cap=cap)) == ["y-aggregate", "x-aggregate"]
    aggregates.add([FEED], [m(z, "z-aggregate")], cap)
    page = read(aggregates, cap=cap)
    assert keys(page) == ["z-aggregate", "y-aggregate"]
    assert [(g.is_seen, g.is_read) for g in page.aggregates] == [(False, False), (True, True)]
    assert (page.unseen, page.unread) == (1, 1)


def test_many_aggregates_in_one_millisecond_page_exactly(aggregates: AggregateStore) -> None:
    a = same_ms_ids(23)
    rng = random.Random(3)
    names = [f"g{n:02}" for n in range(23)]
    rng.shuffle(names)
    aggregates.add([FEED], [m(i, k) for i, k in zip(a, names, strict=True)], BIG)
    expected = sorted(names, reverse=True)  # one ms: by key
    assert keys(read(aggregates)) == expected
    for limit in (1, 4, 7, 23, 50):
        assert walk_keys(aggregates, FEED, limit) == expected, limit


# -- paging --------------------------------------------------------------------------


def _thirteen(aggregates: AggregateStore) -> list[str]:
    """Thirteen aggregates of two members each; returns their keys newest first."""
    a = make_ids(26)
    aggregates.add([FEED], [m(i, f"g{n % 13:02}") for n, i in enumerate(a)], BIG)
    return [f"g{n:02}" for n in range(12, -1, -1)]


@pytest.mark.parametrize("limit", [1, 2, 4, 5, 12, 13, 14])
def test_pages_walk_every_aggregate_once(aggregates: AggregateStore, limit: int) -> None:
    expected = _thirteen(aggregates)
    pages = list(walk(aggregates, FEED, limit))
    assert [g.key for p in pages for g in p] == expected
    assert all(len(p) == limit for p in pages[:-1])


def test_a_later_aggregate_gaining_an_activity_between_pages_is_neither_skipped_nor_repeated(
    aggregates: AggregateStore,
) -> None:
    expected = _thirteen(aggregates)
    pages = walk(aggregates, FEED, 4)
    shown = [g.key for g in next(pages)]
    assert shown == expected[:4]
    # An aggregate not yet shown, and one already shown, both receive new activities.
    late = make_ids(2, start_ms=T + 1_000_000)
    aggregates.add([FEED], [m(late[0], expected[8]), m(late[1], expected[1])], BIG)
    for page in pages:
        shown.extend(g.key for g in page)
    assert shown == expected
    # The next first page sees the changes.
    assert keys(read(aggregates))[:3] == [expected[1], expected[8], expected[0]]


def test_an_aggregate_created_between_pages_waits_for_the_next_first_page(
    aggregates: AggregateStore,
) -> None:
    expected = _thirteen(aggregates)
    pages = walk(aggregates, FEED, 5)
    shown = [g.key for g in next(pages)]
    aggregates.add([FEED], [m(ids.new_id(T + 1_000_000), "fresh")], BIG)
    for page in pages:
        shown.extend(g.key for g in page)
    assert shown == expected
    assert keys(read(aggregates))[0] == "fresh"


def test_a_page_shows_an_aggregate_where_it_stood_at_the_snapshot(
    aggregates: AggregateStore,
) -> None:
    a = make_ids(3)
    aggregates.add([FEED], [m(a[0], "x"), m(a[1], "y")], BIG)
    first = aggregates.page(FEED, limit=1, snapshot=None, after=None, cap=BIG)
    assert keys(first) == ["y"]
    assert first.snapshot == a[1]
    aggregates.add([FEED], [m(a[2], "x")], BIG)
    second = aggregates.page(
        FEED, limit=1, snapshot=first.snapshot, after=Position(ids.id_ms(a[1]), "y"), cap=BIG
    )
    (x,) = second.aggregates
    assert x.key == "x"
    assert x.position == ids.id_ms(a[0])  # where it stood at the snapshot
    assert x.activity_count == 2  # but counted now
    assert x.newest == a[2]


def test_after_is_exclusive_and_breaks_ties_on_the_key(aggregates: AggregateStore) -> None:
    a = make_ids(3)
    aggregates.add([FEED], [m(a[0], "x"), m(a[1], "y"), m(a[2], "z")], BIG)

    def after(activity_id: str, key: str) -> list[str]:
        position = Position(ids.id_ms(activity_id), key)
        page = aggregates.page(FEED, limit=10, snapshot=a[2], after=position, cap=BIG)
        return keys(page)

    assert after(a[2], "z") == ["y", "x"]
    assert after(a[1], "y") == ["x"]
    assert after(a[1], "z") == ["y", "x"]  # same ms, greater key
    assert after(a[1], "a") == ["x"]  # same ms, smaller key
    assert after(a[0], "x") == []


# -- member ids and clear ----------------------------------------------------------------


def test_member_ids(aggregates: AggregateStore) -> None:
    a = make_ids(6)
    aggregates.add([FEED], [m(i, f"g{n % 2}") for n, i in enumerate(a)], BIG)
    aggregates.add(["notification:dave"], [m(a[0], "g0")], BIG)
    assert sorted(aggregates.member_ids(FEED)) == a
    aggregates.remove([FEED], [m(a[2], "g0")], BIG)
    assert sorted(aggregates.member_ids(FEED)) == [i for i in a if i != a[2]]
    assert aggregates.member_ids("notification:dave") == [a[0]]


def test_clear(aggregates: AggregateStore) -> None:
    a = make_ids(3)
    feeds: Sequence[str] = [FEED, "notification:dave"]
    aggregates.add(feeds, [m(a[0], "x"), m(a[1], "y")], BIG)
    aggregates.mark(FEED, None, read=True)
    aggregates.clear([FEED, "notification:absent"])
    page = read(aggregates)
    assert page.aggregates == []
    assert (page.unseen, page.unread) == (0, 0)
    assert aggregates.member_ids(FEED) == []
    assert keys(read(aggregates, "notification:dave")) == ["y", "x"]
    # A cleared feed starts afresh: nothing remembered, nothing marked.
    aggregates.add([FEED], [m(a[2], "x")], BIG)
    assert shape(read(aggregates)) == [("x", [a[2]], 1, 1, False, False)]


@pytest.mark.xfail(
    strict=True,
    reason="documented limitation (aggregation.py): a backdated activity (id before the "
    "snapshot) that joins an aggregate not shown yet moves it above the cursor, so the walk "
    "skips that aggregate",
)
def test_a_backdated_activity_between_pages_does_not_skip_its_aggregate(
    aggregates: AggregateStore,
) -> None:
    a = make_ids(5)
    aggregates.add([FEED], [m(a[0], "old"), m(a[2], "mid"), m(a[4], "top")], BIG)
    pages = walk(aggregates, FEED, 2)
    shown = [g.key for g in next(pages)]
    assert shown == ["top", "mid"]
    # An activity published now with a time in the past (ids follow activity
    # times) joins "old", which the reader has not reached yet.
    aggregates.add([FEED], [m(a[3], "old")], BIG)
    for page in pages:
        shown.extend(g.key for g in page)
    assert shown == ["top", "mid", "old"]


# -- large aggregates ------------------------------------------------------------------


@pytest.mark.parametrize("order", ["ascending", "shuffled"])
def test_a_large_aggregate_counts_and_removes_exactly(
    aggregates: AggregateStore, order: str
) -> None:
    # Given an aggregate of 150 activities (Redis moves an aggregate's ids out of its
    # record past 64), delivered in order or shuffled, each one twice
    made = make_ids(150)

    def big(aid: str) -> list[Member]:
        return [m(aid, "big", actor=f"a{int(aid[-2:], 16) % 5}")]

    arrival = list(made) if order == "ascending" else random.Random(3).sample(made, len(made))
    for aid in arrival + arrival[::7]:
        aggregates.add([FEED], big(aid), BIG)
    (aggregate,) = read(aggregates).aggregates
    assert aggregate.activity_count == 150
    assert aggregate.activity_ids == made[::-1][:10]
    assert (aggregate.oldest, aggregate.newest) == (made[0], made[-1])
    # When the newest, the oldest and every third one are removed
    gone = [made[-1], made[0], *made[1:-1:3]]
    for aid in gone:
        aggregates.remove([FEED], big(aid), BIG)
    # Then counts and order follow, down past the inline bound and back
    kept = [aid for aid in made if aid not in set(gone)]
    (aggregate,) = read(aggregates).aggregates
    assert aggregate.activity_count == len(kept)
    assert aggregate.activity_ids == kept[::-1][:10]
    assert (aggregate.oldest, aggregate.newest) == (kept[0], kept[-1])
    assert sorted(aggregates.member_ids(FEED)) == kept
    for aid in kept[:-30]:
        aggregates.remove([FEED], big(aid), BIG)
    (aggregate,) = read(aggregates).aggregates
    assert aggregate.activity_ids == kept[-30:][::-1][:10]
    assert aggregate.activity_count == 30


def test_actor_counts_past_the_exact_bound(aggregates: AggregateStore) -> None:
    # Given 300 activities by 200 distinct actors in one aggregate
    made = make_ids(300)
    for i, aid in enumerate(made):
        aggregates.add([FEED], [m(aid, "popular", actor=f"fan{i % 200}")], BIG)
    (aggregate,) = read(aggregates).aggregates
    assert aggregate.activity_count == 300
    # Then the count is exact on SQL and memory, and within 3% on Redis's estimate
    assert abs(aggregate.actor_count - 200) <= 6
    if type(aggregates).__name__ != "RedisAggregateStore":
        assert aggregate.actor_count == 200


# -- prepare_add: encoded now, written when called ---------------------------------


def test_a_prepared_write_lands_only_when_called(aggregates: AggregateStore) -> None:
    a = make_ids(2)
    write = aggregates.prepare_add([FEED, "notification:dave"], [m(a[0], "x"), m(a[1], "y")], BIG)
    assert read(aggregates).aggregates == []
    write()
    assert keys(read(aggregates)) == ["y", "x"]
    assert keys(read(aggregates, "notification:dave")) == ["y", "x"]


def test_a_prepared_write_is_an_add(aggregates: AggregateStore) -> None:
    # Given the same writes made by add on one feed and prepared on another,
    # with marks in between
    cap = AggregateCap(max_length=3, max_aggregate_size=2)
    a = make_ids(12)
    batches = [
        [m(a[0], "p"), m(a[1], "q", "ann")],
        [m(a[5], "p", "ann"), m(a[2], "r"), m(a[1], "q", "ann")],
        [m(a[3], "s"), m(a[4], "q")],
        [m(a[9], "t", "cy"), m(a[6], "p")],
    ]
    for n, batch in enumerate(batches):
        aggregates.add([FEED], batch, cap)
        aggregates.prepare_add(["notification:dave"], batch, cap)()
        for feed in (FEED, "notification:dave"):
            aggregates.mark(feed, ["q"] if n % 2 else None, read=n == 2)
    # Then the two feeds show the same aggregates, counts and marks
    x, y = read(aggregates, FEED, cap), read(aggregates, "notification:dave", cap)
    assert shape(y) == shape(x)
    assert [g.position for g in y.aggregates] == [g.position for g in x.aggregates]
    assert (y.unseen, y.unread) == (x.unseen, x.unread)
    assert sorted(aggregates.member_ids("notification:dave")) == sorted(aggregates.member_ids(FEED))


def test_a_write_prepared_in_another_thread(aggregates: AggregateStore) -> None:
    # Deliveries prepare the next chunk in a read-ahead thread.
    a = make_ids(4)
    feeds = [f"notification:u{i}" for i in range(30)]
    with ThreadPoolExecutor(1) as ahead:
        writes = [ahead.submit(aggregates.prepare_add, feeds, [m(i, "g")], BIG) for i in a]
        for write in writes:
            write.result()()
    for feed in feeds:
        (aggregate,) = read(aggregates, feed).aggregates
        assert (aggregate.activity_ids, aggregate.activity_count) == (a[::-1], 4)


def test_a_prepared_write_sent_again_changes_nothing(aggregates: AggregateStore) -> None:
    # Given a prepared write sent, and its aggregates marked read
    a = make_ids(3)
    write = aggregates.prepare_add([FEED], [m(a[0], "x"), m(a[1], "x", "ann"), m(a[2], "y")], BIG)
    write()
    aggregates.mark(FEED, None, read=True)
    before = read(aggregates)
    # When it is sent again (a retried chunk)
    write()
    # Then nothing changed: no member counted twice, no aggregate unread again
    after = read(aggregates)
    assert shape(after) == shape(before)
    assert (after.unseen, after.unread) == (0, 0)


def test_a_prepared_write_of_nothing_does_nothing(aggregates: AggregateStore) -> None:
    a = make_ids(2)
    aggregates.add([FEED], [m(a[0], "x")], BIG)
    aggregates.prepare_add([], [m(a[1], "y")], BIG)()
    aggregates.prepare_add([FEED, "notification:dave"], [], BIG)()
    assert keys(read(aggregates)) == ["x"]
    assert read(aggregates, "notification:dave").aggregates == []


# -- docs: the JSON the store holds for a page's activities -----------------------


def docs_of(made: Sequence[str]) -> dict[str, tuple[int, bytes]]:
    return {a: (1, b'{"id":"%s"}' % a.encode()) for a in made}


def test_a_page_with_docs_returns_the_stored_json_of_shown_activities_only(
    backend: Backend,
) -> None:
    # Given aggregates of which some activities have their JSON stored, and one
    # aggregate larger than a page shows of it
    aggregates = backend.aggregates
    cap = AggregateCap(max_length=800, max_aggregate_size=3)
    a = make_ids(12)
    stored = docs_of(a[::2])
    backend.store_docs(stored)
    aggregates.add([FEED], [m(i, "big" if n >= 6 else f"g{n}") for n, i in enumerate(a)], cap)
    # When a page of 4 aggregates is read, with and without docs
    plain = aggregates.page(FEED, limit=4, snapshot=None, after=None, cap=cap)
    page = aggregates.page(FEED, limit=4, snapshot=None, after=None, cap=cap, docs=True)
    # Then the aggregates are the same, and only the page with docs has any
    assert shape(page) == shape(plain)
    assert (page.snapshot, page.unseen, page.unread) == (plain.snapshot, 7, 7)
    assert plain.docs == {}
    # And the JSON found is that of stored activities the page shows, as stored
    shown = [i for g in page.aggregates for i in g.activity_ids]
    assert len(shown) == 3 + 3  # the big aggregate's newest three, three one-activity aggregates
    expected = {i: stored[i][1] for i in shown if i in stored}
    assert page.docs.items() <= expected.items()
    # And a store that reads it in passing found every one
    if backend.docs_in_passing:
        assert page.docs == expected
    else:
        assert page.docs == {}


# -- batches of deliveries: each feed its own members ------------------------


def test_add_each_gives_every_feed_its_own_members(aggregates: AggregateStore) -> None:
    a, b, c = make_ids(3)
    small = AggregateCap(max_length=2, max_aggregate_size=10)
    aggregates.prepare_add_each(
        {
            "notification:x": [m(a, "like:1"), m(b, "like:1", "cat")],
            "notification:y": [m(b, "like:1", "cat"), m(c, "comment:2")],
            "notification:z": [m(a, "like:1"), m(b, "like:2"), m(c, "like:3")],
        },
        small,
    )()
    assert shape(read(aggregates, "notification:x", small)) == [
        ("like:1", [b, a], 2, 2, False, False)
    ]
    assert keys(read(aggregates, "notification:y", small)) == ["comment:2", "like:1"]
    # The cap applies to each feed once the batch is written.
    assert keys(read(aggregates, "notification:z", small)) == ["like:3", "like:2"]


def test_add_each_matches_add_feed_by_feed(backend: Backend) -> None:
    rng = random.Random(3)
    activity_ids = make_ids(40)
    entries = {
        f"notification:f{i}": [
            m(x, f"g{rng.randrange(5)}", f"a{rng.randrange(3)}")
            for x in rng.sample(activity_ids, 12)
        ]
        for i in range(6)
    }
    backend.aggregates.prepare_add_each(entries, BIG)()
    backend.aggregates.prepare_add_each(entries, BIG)()  # a retried batch changes nothing
    reference = MemoryAggregateStore()
    for feed, members in entries.items():
        reference.add([feed], members, BIG)
    for feed in entries:
        assert shape(read(backend.aggregates, feed)) == shape(read(reference, feed)), feed
