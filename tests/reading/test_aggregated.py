"""Aggregated and notification feeds through the engine, on every store."""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import EngineFactory
from tidings import Activity, InvalidCursor, Tidings, ValidationError
from tidings.canonical.outbox import enqueue
from tidings.core.aggregation import Aggregate, AggregatePage
from tidings.core.fanout import OutboxKind

T0 = datetime(2026, 1, 1, 9, tzinfo=UTC)
DAY = "2026-01-01"

_tick = itertools.count(1)


def act(
    engine: Tidings,
    feed: str,
    verb: str = "like",
    obj: str = "photo:1",
    *,
    actor: str | None = None,
    time: datetime | None = None,
    **extra: Any,
) -> Activity:
    """Publish; without an explicit time, each call is one second after the last (same day)."""
    data: dict[str, Any] = {
        "actor": actor or feed.split(":")[1],
        "verb": verb,
        "object": obj,
        "time": time or T0 + timedelta(seconds=next(_tick) % 3600),
    }
    data.update(extra)
    return engine.add_activity(feed, data)


def ids_of(aggregate: Aggregate) -> list[str]:
    return [a.id for a in aggregate.activities]


def newest_first(activities: list[Activity]) -> list[str]:
    return sorted((a.id for a in activities), reverse=True)


def view(page: AggregatePage) -> list[tuple[str, int, int, list[str], bool | None, bool | None]]:
    """Everything a page shows of its aggregates, comparable with ``==``."""
    return [
        (g.key, g.activity_count, g.actor_count, ids_of(g), g.is_seen, g.is_read)
        for g in page.results
    ]


def walk(engine: Tidings, feed: str, limit: int) -> list[AggregatePage]:
    pages = [engine.read_aggregates(feed, limit=limit)]
    while (cursor := pages[-1].next) is not None:
        pages.append(engine.read_aggregates(feed, limit=limit, cursor=cursor))
        assert len(pages) < 100, "cursor walk does not end"
    return pages


# -- aggregated feeds ------------------------------------------------------------


def test_bob_liked_three_photos(make_engine: EngineFactory) -> None:
    # Given alice's aggregated timeline following bob,
    feeds = make_engine()
    feeds.follow("timeline_aggregated:alice", "user:bob")
    # when bob likes three photos and comments once,
    likes = [act(feeds, "user:bob", "like", f"photo:{i}") for i in range(3)]
    comment = act(feeds, "user:bob", "comment", "photo:1")
    # then alice sees "bob liked 3 photos" as one aggregate, hydrated, newest first.
    page = feeds.read_aggregates("timeline_aggregated:alice")
    assert [g.key for g in page.results] == [f"bob:comment:{DAY}", f"bob:like:{DAY}"]
    liked = page.results[1]
    assert (liked.verb, liked.activity_count, liked.actor_count) == ("like", 3, 1)
    assert liked.activities == sorted(likes, key=lambda a: a.id, reverse=True)
    assert liked.created_at == likes[0].time
    assert liked.updated_at == likes[-1].time
    assert page.results[0].activities == [comment]
    # Aggregated feeds track no seen or read state.
    assert (liked.is_seen, liked.is_read) == (None, None)
    assert (page.unseen, page.unread, page.next) == (None, None, None)
    assert "is_seen" not in liked.to_dict()


def test_a_new_day_starts_a_new_aggregate(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline_aggregated:alice", "user:bob")
    act(feeds, "user:bob", time=T0)
    act(feeds, "user:bob", time=T0 + timedelta(days=1))
    page = feeds.read_aggregates("timeline_aggregated:alice")
    assert [g.key for g in page.results] == ["bob:like:2026-01-02", f"bob:like:{DAY}"]


def test_aggregates_show_max_aggregate_size_activities_but_count_all(
    make_engine: EngineFactory,
) -> None:
    feeds = make_engine(
        groups={"timeline_aggregated": {"kind": "aggregated", "max_aggregate_size": 3}}
    )
    feeds.follow("timeline_aggregated:alice", "user:bob")
    made = [act(feeds, "user:bob", obj=f"photo:{i}") for i in range(7)]
    (g,) = feeds.read_aggregates("timeline_aggregated:alice").results
    assert g.activity_count == 7
    assert ids_of(g) == newest_first(made)[:3]


def test_custom_template_over_extra(make_engine: EngineFactory) -> None:
    feeds = make_engine(
        groups={"album": {"kind": "aggregated", "aggregation": "{verb}:{extra.album}"}}
    )
    feeds.follow("album:alice", "user:bob")
    act(feeds, "user:bob", "upload", "photo:1", extra={"album": "summer"})
    act(feeds, "user:bob", "upload", "photo:2", extra={"album": "summer"})
    act(feeds, "user:bob", "upload", "photo:3", extra={"album": 2026})
    act(feeds, "user:bob", "upload", "photo:4")
    page = feeds.read_aggregates("album:alice")
    assert [(g.key, g.activity_count) for g in page.results] == [
        ("upload:", 1),
        ("upload:2026", 1),
        ("upload:summer", 2),
    ]


# -- notification feeds ------------------------------------------------------------


def test_alice_and_four_others_liked_your_photo(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    # Given five people liking carol's photo (and one liking another photo),
    likers = ["alice", "dan", "erin", "frank", "gina"]
    made = [act(feeds, f"user:{u}", "like", "photo:42", to=["notification:carol"]) for u in likers]
    other = act(feeds, "user:dan", "like", "photo:7", to=["notification:carol"])
    again = act(feeds, "user:alice", "like", "photo:42", to=["notification:carol"])
    # then carol's notifications aggregate the likes by verb, object and day.
    page = feeds.read_aggregates("notification:carol")
    assert [g.key for g in page.results] == [f"like:photo:42:{DAY}", f"like:photo:7:{DAY}"]
    liked = page.results[0]
    assert (liked.activity_count, liked.actor_count) == (6, 5)
    assert ids_of(liked) == newest_first([*made, again])
    assert liked.activities[0].actor == "alice"
    assert (liked.is_seen, liked.is_read) == (False, False)
    assert ids_of(page.results[1]) == [other.id]
    assert (page.unseen, page.unread) == (2, 2)
    # The actors' own feeds are flat and unaffected.
    assert [a.id for a in feeds.read("user:alice").results] == [again.id, made[0].id]


def test_same_millisecond_activities_on_one_object_are_all_counted(
    make_engine: EngineFactory,
) -> None:
    feeds = make_engine()
    feeds.follow("timeline_aggregated:zed", "user:bob")
    made = [
        act(feeds, f"user:{u}", "like", "photo:1", time=T0, to=["notification:carol"])
        for u in ("ann", "bob", "cy")
    ]
    made += [act(feeds, "user:bob", "like", "photo:1", time=T0) for _ in range(2)]
    assert len({a.id for a in made}) == 5
    (g,) = feeds.read_aggregates("notification:carol").results
    assert (g.activity_count, g.actor_count) == (3, 3)
    assert ids_of(g) == newest_first(made[:3])
    (mine,) = feeds.read_aggregates("timeline_aggregated:zed").results
    assert (mine.key, mine.activity_count) == (f"bob:like:{DAY}", 3)


# -- paging -------------------------------------------------------------------------


def _notify(feeds: Tidings, n: int) -> list[str]:
    """``n`` aggregates in carol's notifications (each photo liked twice); keys newest first."""
    made: list[Activity] = []
    for i in range(2 * n):
        made.append(
            act(feeds, f"user:u{i % 3}", "like", f"photo:{i % n:02}", to=["notification:carol"])
        )
    return [f"like:photo:{i:02}:{DAY}" for i in range(n - 1, -1, -1)]


@pytest.mark.parametrize("limit", [1, 3, 7, 17, 18, 100])
def test_read_aggregates_pages_walk_every_aggregate_once(
    make_engine: EngineFactory, limit: int
) -> None:
    feeds = make_engine()
    expected = _notify(feeds, 17)
    pages = walk(feeds, "notification:carol", limit)
    assert [g.key for p in pages for g in p.results] == expected
    assert all(len(p.results) == limit for p in pages[:-1])
    assert all(p.unseen == 17 for p in pages)
    assert [g.updated_at for p in pages for g in p.results] == sorted(
        (g.updated_at for p in pages for g in p.results), reverse=True
    )


def test_read_aggregates_pages_stay_exact_while_activities_arrive(
    make_engine: EngineFactory,
) -> None:
    feeds = make_engine()
    expected = _notify(feeds, 12)
    first = feeds.read_aggregates("notification:carol", limit=4)
    shown = [g.key for g in first.results]
    # Between pages: an aggregate not shown yet, and one shown, get new likes;
    # a new aggregate appears.
    act(feeds, "user:zoe", "like", "photo:02", to=["notification:carol"])
    act(feeds, "user:zoe", "like", "photo:10", to=["notification:carol"])
    act(feeds, "user:zoe", "like", "photo:99", to=["notification:carol"])
    cursor = first.next
    while cursor is not None:
        page = feeds.read_aggregates("notification:carol", limit=4, cursor=cursor)
        shown.extend(g.key for g in page.results)
        cursor = page.next
    assert shown == expected
    fresh = [g.key for g in feeds.read_aggregates("notification:carol", limit=3).results]
    assert fresh == [f"like:photo:99:{DAY}", f"like:photo:10:{DAY}", f"like:photo:02:{DAY}"]


def test_read_aggregates_cursors_and_limits(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    _notify(feeds, 3)
    feeds.follow("timeline_aggregated:alice", "user:u0")
    page = feeds.read_aggregates("notification:carol", limit=1)
    assert page.next is not None
    with pytest.raises(InvalidCursor, match="another feed"):
        feeds.read_aggregates("notification:dave", cursor=page.next)
    with pytest.raises(InvalidCursor):
        feeds.read_aggregates("notification:carol", cursor=page.next[:-2] + "xx")
    with pytest.raises(InvalidCursor):
        feeds.read_aggregates("notification:carol", cursor="garbage")
    flat = feeds.read("user:u0", limit=1)
    assert flat.next is not None
    with pytest.raises(InvalidCursor):
        feeds.read_aggregates("notification:carol", cursor=flat.next)
    for bad in (0, 101, "5", True, None):
        with pytest.raises(ValidationError, match="from 1 to 100"):
            feeds.read_aggregates("notification:carol", limit=bad)  # type: ignore[arg-type]
    last = feeds.read_aggregates("notification:carol", limit=2, cursor=page.next)
    assert len(last.results) == 2
    assert last.next is None


def test_feed_kinds_are_enforced(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    act(feeds, "user:bob", to=["notification:carol"])
    for aggregated in ("timeline_aggregated:alice", "notification:carol"):
        with pytest.raises(ValidationError, match="read_aggregates"):
            feeds.read(aggregated)
        with pytest.raises(ValidationError, match="read_aggregates"):
            feeds.reads.json(aggregated)
    with pytest.raises(ValidationError, match="flat feed"):
        feeds.read_aggregates("user:bob")
    with pytest.raises(ValidationError, match="flat feed"):
        feeds.read_aggregates("timeline:bob")
    for feed in ("timeline_aggregated:alice", "user:bob", "timeline:bob"):
        with pytest.raises(ValidationError, match="only notification feeds"):
            feeds.mark_seen(feed)
        with pytest.raises(ValidationError, match="only notification feeds"):
            feeds.mark_read(feed, ["x"])
    with pytest.raises(ValidationError, match="list of aggregate keys"):
        feeds.mark_seen("notification:carol", "like")
    with pytest.raises(ValidationError, match="list of aggregate keys"):
        feeds.mark_seen("notification:carol", [1])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="limit is 1000"):
        feeds.mark_read("notification:carol", ["g"] * 1001)
    # Aggregate keys follow the rules of every other string: a key no aggregate can
    # have is refused, not passed to a store that cannot hold it.
    for bad, message in [("x" * 201, "limit is 200"), ("a\x00", "NUL"), ("\ud800", "surrogate")]:
        with pytest.raises(ValidationError, match=message) as info:
            feeds.mark_read("notification:carol", ["ok", bad])
        assert info.value.field == "groups.1"
    # Nothing was marked by the refused calls.
    assert feeds.read_aggregates("notification:carol").unseen == 1


# -- seen and read ---------------------------------------------------------------------


def test_mark_seen_and_read(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    keys = _notify(feeds, 4)
    carol = "notification:carol"

    def state() -> tuple[list[tuple[bool | None, bool | None]], int | None, int | None]:
        page = feeds.read_aggregates(carol)
        return [(g.is_seen, g.is_read) for g in page.results], page.unseen, page.unread

    new, seen, done = (False, False), (True, False), (True, True)
    assert state() == ([new, new, new, new], 4, 4)
    feeds.mark_seen(carol, [keys[1]])
    assert state() == ([new, seen, new, new], 3, 4)
    feeds.mark_read(carol, [keys[2], "unknown"])
    assert state() == ([new, seen, done, new], 2, 3)
    feeds.mark_seen(carol)
    assert state() == ([seen, seen, done, seen], 0, 3)
    feeds.mark_read(carol)
    assert state() == ([done, done, done, done], 0, 0)
    # A new like on a read aggregate makes it unseen and unread again, and first.
    act(feeds, "user:zoe", "like", "photo:00", to=[carol])
    assert state() == ([new, done, done, done], 1, 1)
    assert feeds.read_aggregates(carol).results[0].key == keys[-1]


@pytest.mark.parametrize("mark", ["seen", "read"])
def test_read_aggregates_can_mark_what_it_returns(make_engine: EngineFactory, mark: str) -> None:
    feeds = make_engine()
    keys = _notify(feeds, 5)
    carol = "notification:carol"
    feeds.mark_seen(carol, [keys[0]])
    # Reading the first three while marking them shows their state from before,
    page = feeds.read_aggregates(carol, limit=3, mark_seen=mark == "seen", mark_read=mark == "read")
    assert [g.key for g in page.results] == keys[:3]
    assert [(g.is_seen, g.is_read) for g in page.results] == [
        (True, False),
        (False, False),
        (False, False),
    ]
    # and the feed's counts from after.
    if mark == "seen":
        assert (page.unseen, page.unread) == (2, 5)
        expected = [(True, False)] * 3 + [(False, False)] * 2
    else:
        assert (page.unseen, page.unread) == (2, 2)
        expected = [(True, True)] * 3 + [(False, False)] * 2
    after = feeds.read_aggregates(carol)
    assert [(g.is_seen, g.is_read) for g in after.results] == expected
    assert (after.unseen, after.unread) == (page.unseen, page.unread)
    # Marking a later page marks only that page.
    assert page.next is not None
    rest = feeds.read_aggregates(carol, limit=3, cursor=page.next, mark_read=True)
    assert [g.key for g in rest.results] == keys[3:]
    assert (rest.unseen, rest.unread) == (0, 0 if mark == "read" else 3)


def test_mark_seen_on_an_aggregated_read_is_ignored(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline_aggregated:alice", "user:bob")
    act(feeds, "user:bob")
    page = feeds.read_aggregates("timeline_aggregated:alice", mark_seen=True, mark_read=True)
    assert (page.unseen, page.unread) == (None, None)
    assert page.results[0].is_seen is None


# -- removal, follows and redelivery ------------------------------------------------------


def test_remove_activity_drops_it_from_aggregates(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline_aggregated:alice", "user:bob")
    a, b = (act(feeds, "user:bob", to=["notification:carol"]) for _ in range(2))
    c = act(feeds, "user:bob", "comment", to=["notification:carol"])
    feeds.remove_activity("user:bob", a.id)
    for feed, key in [
        ("timeline_aggregated:alice", f"bob:like:{DAY}"),
        ("notification:carol", f"like:photo:1:{DAY}"),
    ]:
        page = feeds.read_aggregates(feed)
        liked = next(g for g in page.results if g.key == key)
        assert (liked.activity_count, ids_of(liked)) == (1, [b.id]), feed
    feeds.remove_activity("user:bob", c.id)
    feeds.remove_activity("user:bob", b.id)
    assert feeds.read_aggregates("timeline_aggregated:alice").results == []
    empty = feeds.read_aggregates("notification:carol")
    assert (empty.results, empty.unseen, empty.unread) == ([], 0, 0)


def test_removed_activity_not_yet_retracted_is_skipped(make_engine: EngineFactory) -> None:
    feeds = make_engine(task_runner="manual")
    feeds.follow("timeline_aggregated:alice", "user:bob")
    a = act(feeds, "user:bob", "like")
    b = act(feeds, "user:bob", "comment")
    feeds.admin.drain()
    feeds.remove_activity("user:bob", a.id)  # alice's copy waits for the runner
    page = feeds.read_aggregates("timeline_aggregated:alice")
    assert [ids_of(g) for g in page.results] == [[b.id]]
    feeds.admin.drain()
    assert [ids_of(g) for g in feeds.read_aggregates("timeline_aggregated:alice").results] == [
        [b.id]
    ]


@pytest.mark.parametrize("action", ["remove", "unfollow"])
def test_removal_after_an_update_that_changes_the_aggregate_key(
    make_engine: EngineFactory, action: str
) -> None:
    # Given a template over extra, and an activity whose extra is updated after
    # delivery (so it would render a different key now),
    feeds = make_engine(
        groups={"album": {"kind": "notification", "aggregation": "{verb}:{extra.album}"}}
    )
    feeds.follow("album:alice", "user:bob")
    a = act(feeds, "user:bob", "upload", extra={"album": "summer"})
    feeds.update_activity(a.id, set={"album": "winter"})
    # when it is removed, or alice unfollows bob,
    if action == "remove":
        feeds.remove_activity("user:bob", a.id)
    else:
        feeds.unfollow("album:alice", "user:bob")
    # then it leaves the aggregate it joined, and the emptied aggregate goes with its counts.
    page = feeds.read_aggregates("album:alice")
    assert (page.results, page.unseen, page.unread) == ([], 0, 0)
    assert feeds.aggregates.member_ids("album:alice") == []


@pytest.mark.parametrize("keep_history", [False, True])
def test_unfollow_on_an_aggregated_feed(make_engine: EngineFactory, keep_history: bool) -> None:
    feeds = make_engine()
    alice = "timeline_aggregated:alice"
    feeds.follow(alice, "user:bob")
    feeds.follow(alice, "user:carol")
    bobs = [act(feeds, "user:bob", obj=f"photo:{i}") for i in range(3)]
    addressed = act(feeds, "user:bob", obj="photo:9", to=[alice])
    carols = [act(feeds, "user:carol", "post", f"note:{i}") for i in range(2)]
    assert feeds.unfollow(alice, "user:bob", keep_history=keep_history)
    page = feeds.read_aggregates(alice)
    got = {g.key: ids_of(g) for g in page.results}
    if keep_history:
        assert got == {
            f"bob:like:{DAY}": newest_first([*bobs, addressed]),
            f"carol:post:{DAY}": newest_first(carols),
        }
    else:
        # What came through the follow goes; what was addressed to alice stays.
        assert got == {f"bob:like:{DAY}": [addressed.id], f"carol:post:{DAY}": newest_first(carols)}
    act(feeds, "user:bob", obj="photo:10")  # no longer delivered
    assert view(feeds.read_aggregates(alice)) == view(page)


def test_follow_copies_recent_activities_as_aggregates(make_engine: EngineFactory) -> None:
    feeds = make_engine(groups={"timeline_aggregated": {"kind": "aggregated", "max_length": 2}})
    likes = [act(feeds, "user:bob", "like", f"photo:{i}") for i in range(4)]
    posts = [act(feeds, "user:bob", "post", f"note:{i}") for i in range(2)]
    shares = [act(feeds, "user:bob", "share", f"note:{i}") for i in range(2)]
    # Copies the newest five: two shares, two posts and one like; the feed holds two aggregates.
    assert feeds.follow("timeline_aggregated:alice", "user:bob", copy_limit=5)
    page = feeds.read_aggregates("timeline_aggregated:alice")
    assert [(g.key, ids_of(g)) for g in page.results] == [
        (f"bob:share:{DAY}", newest_first(shares)),
        (f"bob:post:{DAY}", newest_first(posts)),
    ]
    assert likes[-1].id not in {i for g in page.results for i in ids_of(g)}
    assert feeds.follow("timeline_aggregated:dave", "user:bob", copy_limit=0)
    assert feeds.read_aggregates("timeline_aggregated:dave").results == []


def test_delivering_twice_changes_nothing(make_engine: EngineFactory) -> None:
    feeds = make_engine(task_runner="manual", delivery_chunk_size=2)
    followers = [f"timeline_aggregated:u{i}" for i in range(5)]
    feeds.follow_many([(f, "user:bob") for f in followers], copy_limit=0)
    made = [act(feeds, "user:bob", obj=f"photo:{i}", to=["notification:carol"]) for i in range(3)]
    feeds.admin.drain()
    feeds.mark_read("notification:carol")
    watched = ["notification:carol", *followers]
    once = [view(feeds.read_aggregates(f)) for f in watched]
    counts = feeds.read_aggregates("notification:carol")
    assert (counts.unseen, counts.unread) == (0, 0)
    for a in made:
        # A direct write repeated (as after a crash before the outbox row completed),
        keys = feeds.deliverer.aggregate_keys(a)
        feeds.deliverer.write_direct(OutboxKind.DELIVER, a, keys, "user:bob", a.to)
        # and a whole outbox row redelivered.
        with feeds.db.write() as conn:
            keys = feeds.deliverer.aggregate_keys(a)
            enqueue(conn, OutboxKind.DELIVER, a, "user:bob", feeds.clock.ms(), keys)
        assert feeds.admin.drain() == 1
    assert [view(feeds.read_aggregates(f)) for f in watched] == once
    again = feeds.read_aggregates("notification:carol")
    assert (again.unseen, again.unread) == (0, 0)


# -- concurrency ---------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_concurrent_publishers_count_exactly(make_engine: EngineFactory, store: str) -> None:
    threads, each = 8, 100
    # Memory stores live in one process object: the threads share one engine.
    # Every other store is shared through its database or server.
    engines = (
        [make_engine()] * threads if store == "memory" else [make_engine() for _ in range(threads)]
    )
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def publish(n: int) -> None:
        engine = engines[n]
        try:
            start.wait()
            for i in range(each):
                act(
                    engine,
                    "user:bob",
                    "like",
                    "photo:1",
                    actor=f"actor{n}",
                    time=T0 + timedelta(milliseconds=i),
                    to=["notification:carol"],
                )
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=publish, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    engines[0].admin.drain()
    assert engines[0].admin.pending() == 0
    page = engines[0].read_aggregates("notification:carol")
    (g,) = page.results
    assert (g.key, g.activity_count, g.actor_count) == (
        f"like:photo:1:{DAY}",
        threads * each,
        threads,
    )
    assert len(g.activities) == 10
    assert (page.unseen, page.unread) == (1, 1)
    assert len(engines[0].aggregates.member_ids("notification:carol")) == threads * each
