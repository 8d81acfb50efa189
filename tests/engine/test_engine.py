"""The engine facade on every store (memory, SQLite, PostgreSQL, Redis)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import EngineFactory
from snapshots import snapshot
from tidings import (
    Activity,
    ActivityNotFound,
    InvalidCursor,
    InvalidFeedId,
    Tidings,
    UnknownFeedGroup,
    ValidationError,
)
from tidings.canonical.outbox import enqueue
from tidings.core.fanout import OutboxKind
from tidings.stores.base import Cap, TimelineStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


_tick = itertools.count()


def post(engine: Tidings, feed: str, n: int, **extra: Any) -> Activity:
    """Publish; without an explicit time, each call is one second after the last."""
    data: dict[str, Any] = {
        "actor": feed.split(":")[1],
        "verb": "post",
        "object": f"note:{n}",
        "time": T0 + timedelta(seconds=next(_tick)),
    }
    data.update(extra)
    return engine.add_activity(feed, data)


def read_all(engine: Tidings, feed: str, limit: int = 7) -> list[Activity]:
    out: list[Activity] = []
    cursor = None
    while True:
        page = engine.read(feed, limit=limit, cursor=cursor)
        out.extend(page.results)
        if page.next is None:
            return out
        cursor = page.next


def ids_of(items: Sequence[Activity]) -> list[str]:
    return [a.id for a in items]


def held(engine: Tidings, feed: str) -> list[str]:
    """The ids a feed shows on its first page, flat or aggregated (newest first)."""
    if engine.reads.is_aggregated(feed):
        return [a.id for g in engine.read_aggregates(feed).results for a in g.activities]
    return ids_of(engine.read(feed).results)


# -- publishing and reading ----------------------------------------------------


def test_delivery_to_followers_and_to(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    feeds.follow("timeline:carol", "user:bob")
    a = post(feeds, "user:bob", 1, to=["notification:dave", "timeline:erin"])
    for feed in [
        "user:bob",
        "timeline:alice",
        "timeline:carol",
        "notification:dave",
        "timeline:erin",
    ]:
        assert held(feeds, feed) == [a.id], feed
    # One level only: followers of a `to` feed or of a follower get nothing.
    feeds.follow("timeline:frank", "timeline:alice")
    b = post(feeds, "user:bob", 2)
    assert ids_of(feeds.read("timeline:frank").results) == []
    assert ids_of(feeds.read("timeline:alice").results) == [b.id, a.id]


def test_pages_walk_everything_once_with_equal_times(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    made = [post(feeds, "user:bob", i, time=T0 + timedelta(seconds=i // 10)) for i in range(53)]
    walked = read_all(feeds, "timeline:alice", limit=6)
    assert ids_of(walked) == sorted(ids_of(made), reverse=True)
    assert [a.time for a in walked] == sorted((a.time for a in made), reverse=True)


def test_pages_stay_exact_while_items_are_added(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    made = [post(feeds, "user:bob", i, time=T0 + timedelta(minutes=i)) for i in range(20)]
    first = feeds.read("user:bob", limit=5)
    # New activities arrive between pages: some newer, some at the same time.
    for i in range(20, 30):
        post(feeds, "user:bob", i, time=T0 + timedelta(minutes=40))
    post(feeds, "user:bob", 99, time=made[14].time)
    rest = []
    cursor = first.next
    while cursor:
        page = feeds.read("user:bob", limit=4, cursor=cursor)
        rest.extend(page.results)
        cursor = page.next
    walked = ids_of(first.results) + ids_of(rest)
    assert len(walked) == len(set(walked))
    assert set(ids_of(made)) <= set(walked)
    assert walked == sorted(walked, reverse=True)


def test_read_limits_and_cursors(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    for i in range(3):
        post(feeds, "user:bob", i)
    page = feeds.read("user:bob", limit=2)
    assert page.next is not None
    with pytest.raises(InvalidCursor, match="another feed"):
        feeds.read("user:carol", cursor=page.next)
    with pytest.raises(InvalidCursor):
        feeds.read("user:bob", cursor=page.next[:-2] + "xx")
    for bad in (0, 101, "5", True):
        with pytest.raises(ValidationError, match="from 1 to 100"):
            feeds.read("user:bob", limit=bad)  # type: ignore[arg-type]
    with pytest.raises(UnknownFeedGroup):
        feeds.read("planet:earth")
    with pytest.raises(InvalidFeedId):
        feeds.read("bob")
    last = feeds.read("user:bob", limit=2, cursor=page.next)
    assert len(last.results) == 1
    assert last.next is None


# -- idempotency -----------------------------------------------------------------


def test_foreign_id_makes_publishing_idempotent(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    first = post(feeds, "user:bob", 1, foreign_id="post:1", to=["notification:carol"])
    once = snapshot(feeds)
    for _ in range(5):
        again = post(feeds, "user:bob", 1, foreign_id="post:1", to=["notification:carol"])
        assert again == first
        # Even a different payload with the same foreign_id changes nothing.
        assert post(feeds, "user:bob", 2, foreign_id="post:1") == first
    assert snapshot(feeds) == once
    assert feeds.activities.publish(
        "user:bob", {"actor": "b", "verb": "v", "object": "o", "foreign_id": "post:1"}
    ) == (first, False)
    # The same foreign_id in another feed is another activity.
    assert post(feeds, "user:carol", 1, foreign_id="post:1").id != first.id


def test_rerunning_a_delivery_changes_nothing(make_engine: EngineFactory) -> None:
    feeds = make_engine(task_runner="manual", delivery_chunk_size=3)
    feeds.follow_many([(f"timeline:u{i:02}", "user:bob") for i in range(10)], copy_limit=0)
    a = post(feeds, "user:bob", 1, to=["notification:carol"])
    post(feeds, "user:bob", 2)
    feeds.admin.drain()
    once = snapshot(feeds)
    for _ in range(3):
        with feeds.db.write() as conn:
            keys = feeds.deliverer.aggregate_keys(a)
            enqueue(conn, OutboxKind.DELIVER, a, "user:bob", feeds.clock.ms(), keys)
        assert feeds.admin.drain() == 1
    assert snapshot(feeds) == once


# -- crash safety ----------------------------------------------------------------


class Crash(Exception):
    pass


class CrashingTimeline:
    """Wraps a store and fails the ``fail_at``-th add, like a process killed mid-delivery."""

    def __init__(self, inner: TimelineStore, fail_at: int) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.adds = 0

    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        self.prepare_add(feeds, activity_ids, cap)()

    def prepare_add(
        self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap
    ) -> Callable[[], None]:
        return self._counted(self.inner.prepare_add(feeds, activity_ids, cap))

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[str]], cap: Cap
    ) -> Callable[[], None]:
        return self._counted(self.inner.prepare_add_each(entries, cap))

    def _counted(self, write: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            self.adds += 1
            if self.adds == self.fail_at:
                raise Crash
            write()

        return run


# The first run writes the 6 chunks of followers only: publish wrote the
# direct targets in this process. Crashes at the first, second, a middle and
# the last chunk.
@pytest.mark.parametrize("fail_at", [1, 2, 4, 6])
def test_delivery_resumes_after_a_crash(make_engine: EngineFactory, fail_at: int) -> None:
    feeds = make_engine(task_runner="manual", delivery_chunk_size=4)
    followers = [f"timeline:u{i:02}" for i in range(22)]
    feeds.follow_many([(f, "user:bob") for f in followers], copy_limit=0)
    a = post(feeds, "user:bob", 1)
    real = feeds.deliverer.timeline
    crashing = CrashingTimeline(real, fail_at)
    feeds.deliverer.timeline = crashing  # type: ignore[assignment]
    with pytest.raises(Crash):
        feeds.admin.drain()
    assert feeds.admin.pending() == 1
    counting = CrashingTimeline(real, fail_at=-1)
    feeds.deliverer.timeline = counting  # type: ignore[assignment]
    assert feeds.admin.drain() == 1
    # The retry writes the direct targets again (the first attempt used up the
    # note that publish had written them; idempotent), then the 6 chunks but
    # those recorded before the crash.
    done_before = fail_at - 1
    assert counting.adds == 1 + 6 - done_before
    for follower in followers:
        assert ids_of(feeds.read(follower).results) == [a.id]
    assert feeds.admin.pending() == 0


def test_accepted_activity_survives_a_failed_direct_write(make_engine: EngineFactory) -> None:
    feeds = make_engine(task_runner="manual")
    feeds.follow("timeline:alice", "user:bob")
    real = feeds.deliverer.timeline
    feeds.deliverer.timeline = CrashingTimeline(real, fail_at=1)  # type: ignore[assignment]
    a = post(feeds, "user:bob", 1)  # the direct write fails; publishing still succeeds
    feeds.deliverer.timeline = real
    assert real.page("user:bob", limit=10, before=None, cap=Cap(800)) == []
    # Reading past the end of the (empty) materialised feed finds it all the same.
    assert ids_of(feeds.read("user:bob").results) == [a.id]
    feeds.admin.drain()
    assert real.page("user:bob", limit=10, before=None, cap=Cap(800)) == [a.id]
    assert ids_of(feeds.read("user:bob").results) == [a.id]
    assert ids_of(feeds.read("timeline:alice").results) == [a.id]


class DownCache:
    """An activity cache whose server is gone: when a write is sent, or already
    when it is prepared (a cluster's slot map being rebuilt)."""

    def __init__(self, fail_at_prepare: bool) -> None:
        self.fail_at_prepare = fail_at_prepare

    def get_many(self, activity_ids: Sequence[str]) -> dict[str, bytes]:
        return {}

    def put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> None:
        raise ConnectionError("the cache is down")

    def prepare_put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> Callable[[], None]:
        if self.fail_at_prepare:
            raise ConnectionError("the slot map is being rebuilt")
        return lambda: self.put_many(docs)

    def delete(self, activity_ids: Sequence[str]) -> None:
        raise ConnectionError("the cache is down")


@pytest.mark.parametrize("fail_at_prepare", [False, True])
def test_a_failed_cache_write_after_the_commit_is_not_the_publishers_error(
    make_engine: EngineFactory, fail_at_prepare: bool
) -> None:
    feeds = make_engine(task_runner="manual")
    feeds.follow("timeline:alice", "user:bob")
    feeds._publishing.cache = DownCache(fail_at_prepare)
    # Committed: the publish returns (an error would make the group commit
    # write the activity a second time), and it is stored once.
    a = post(feeds, "user:bob", 1)
    b = feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "note:2"})
    feeds.admin.drain()
    assert ids_of(feeds.read("timeline:alice").results) == sorted([a.id, b.id], reverse=True)
    assert feeds.admin.pending() == 0


# -- bad input writes nothing ----------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {"actor": "bob", "verb": "post"},
        {"actor": "bob", "verb": "x" * 65, "object": "o"},
        {"actor": "bob", "verb": "post", "object": "o", "to": ["planet:mars"]},
        {
            "actor": "bob",
            "verb": "post",
            "object": "o",
            "to": ["timeline:a"] * 0 + [f"timeline:{i}" for i in range(101)],
        },
        {"actor": "bob", "verb": "post", "object": "o", "extra": {"b": "x" * 11_000}},
        {"actor": "bob", "verb": "post", "object": "o", "time": "2026-01-01T00:00:00"},
    ],
)
def test_rejected_activity_leaves_nothing(make_engine: EngineFactory, data: dict[str, Any]) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    before = snapshot(feeds)
    with pytest.raises(ValidationError):
        feeds.add_activity("user:bob", data)
    assert snapshot(feeds) == before


def test_rejected_calls_leave_nothing(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    post(feeds, "user:bob", 1)
    before = snapshot(feeds)
    with pytest.raises(UnknownFeedGroup):
        post(feeds, "planet:mars", 1)
    with pytest.raises(ValidationError, match="cannot follow itself"):
        feeds.follow("user:bob", "user:bob")
    with pytest.raises(ValidationError, match="from 0 to 1000"):
        feeds.follow("timeline:a", "user:bob", copy_limit=1001)
    with pytest.raises(ValidationError, match="limit is 1000"):
        feeds.follow_many([(f"timeline:{i}", "user:bob") for i in range(1001)])
    with pytest.raises(InvalidFeedId):
        feeds.follow_many([("timeline:ok", "user:bob"), ("timeline:ok", "nope")])
    with pytest.raises(ValidationError, match="exactly one"):
        feeds.remove_activity("user:bob")
    with pytest.raises(ValidationError, match="not an activity id"):
        feeds.get_activity("nope")
    with pytest.raises(ActivityNotFound):
        feeds.get_activity(("user:bob", "missing"))
    assert snapshot(feeds) == before


# -- update and removal --------------------------------------------------------


def test_update_is_visible_in_every_feed(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    a = post(feeds, "user:bob", 1, foreign_id="p1", extra={"likes": 0, "title": "hi"})
    updated = feeds.update_activity(("user:bob", "p1"), set={"likes": 3}, unset=["title"])
    assert updated.extra == {"likes": 3}
    assert feeds.update_activity(a.id, set={"x": [1]}).extra == {"likes": 3, "x": [1]}
    for feed in ["user:bob", "timeline:alice"]:
        assert feeds.read(feed).results[0].extra == {"likes": 3, "x": [1]}
    assert feeds.get_activity(a.id).extra == {"likes": 3, "x": [1]}
    with pytest.raises(ValidationError, match="limit"):
        feeds.update_activity(a.id, set={"blob": "x" * 11_000})
    # A value JSON cannot carry is refused where the caller put it (not stored as null).
    with pytest.raises(ValidationError, match="finite") as info:
        feeds.update_activity(a.id, set={"ok": 1, "n": {"deep": [float("nan")]}})
    assert info.value.field == "set.n.deep.0"
    assert feeds.get_activity(a.id).extra == {"likes": 3, "x": [1]}


def test_remove_by_id_and_foreign_id_everywhere(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    a = post(feeds, "user:bob", 1, foreign_id="p1", to=["notification:carol"])
    b = post(feeds, "user:bob", 2)
    feeds.remove_activity("user:bob", foreign_id="p1")
    feeds.remove_activity("user:bob", b.id)
    for feed in ["user:bob", "timeline:alice", "notification:carol"]:
        assert held(feeds, feed) == []
    with pytest.raises(ActivityNotFound):
        feeds.get_activity(a.id)
    with pytest.raises(ActivityNotFound):
        feeds.remove_activity("user:bob", a.id)
    # Only the feed an activity was added to may remove it.
    c = post(feeds, "user:bob", 3)
    with pytest.raises(ActivityNotFound, match="not added or addressed to user:carol"):
        feeds.remove_activity("user:carol", c.id)
    # After removal, the foreign_id may be used again.
    assert post(feeds, "user:bob", 4, foreign_id="p1").id != a.id


def stored(engine: Tidings, feed: str) -> list[str]:
    """The ids a feed's store holds (flat or aggregated), without reading past it."""
    if engine.reads.is_aggregated(feed):
        return sorted(engine.aggregates.member_ids(feed))
    return engine.timeline.page(feed, limit=100, before=None, cap=Cap(800))


def test_the_owner_of_an_addressed_feed_removes_just_that_entry(
    make_engine: EngineFactory,
) -> None:
    feeds = make_engine(task_runner="manual")
    a = post(feeds, "user:bob", 1, to=["timeline:alice", "timeline:carol", "notification:alice"])
    # Before the runner has carried out the delivery: it must not write it back.
    assert feeds.remove_activity("timeline:alice", a.id) == a
    feeds.admin.drain()
    for feed in ("timeline:alice", "notification:alice", "timeline:carol", "user:bob"):
        list(feeds.admin.rebuild([feed]))
    assert stored(feeds, "timeline:alice") == []
    assert held(feeds, "timeline:alice") == []  # nor read from the canonical store
    for feed in ("timeline:carol", "user:bob", "notification:alice"):
        assert held(feeds, feed) == [a.id], feed
    with pytest.raises(ActivityNotFound, match="not added or addressed to timeline:alice"):
        feeds.remove_activity("timeline:alice", a.id)
    feeds.remove_activity("notification:alice", a.id)
    list(feeds.admin.rebuild(["notification:alice"]))
    assert held(feeds, "notification:alice") == []
    assert feeds.get_activity(a.id) == a
    # Through foreign_id only the feed it was added to names it.
    b = post(feeds, "user:bob", 2, foreign_id="b", to=["timeline:alice"])
    with pytest.raises(ActivityNotFound):
        feeds.remove_activity("timeline:alice", foreign_id="b")
    assert held(feeds, "timeline:alice") == [b.id]


def test_the_owner_removes_an_entry_a_follow_delivered_for_good(
    make_engine: EngineFactory,
) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    feeds.follow("timeline:carol", "user:bob")
    # (Newer than the follows: their history holds them.)
    a = post(feeds, "user:bob", 1, to=["timeline:alice"], time=datetime.now(UTC))
    b = post(feeds, "user:bob", 2, time=datetime.now(UTC))
    feeds.remove_activity("timeline:alice", a.id)  # by `to` and by the follow
    feeds.remove_activity("timeline:alice", b.id)  # by the follow alone
    assert stored(feeds, "timeline:alice") == []
    assert held(feeds, "timeline:alice") == []  # nor read from its history
    list(feeds.admin.rebuild(["timeline:alice"]))
    assert stored(feeds, "timeline:alice") == []
    # The activities stay everywhere else.
    assert sorted(held(feeds, "timeline:carol")) == sorted([a.id, b.id])
    assert sorted(held(feeds, "user:bob")) == sorted([a.id, b.id])
    # Following again copies the source's history, less what she removed.
    feeds.unfollow("timeline:alice", "user:bob")
    feeds.follow("timeline:alice", "user:bob")
    assert held(feeds, "timeline:alice") == []
    # Pulled, then pushed again (backfilled): still out.
    feeds.admin.reclassify(threshold=1)
    assert feeds.admin.fanout_strategy("user:bob") == "pull"
    assert held(feeds, "timeline:alice") == []
    feeds.admin.reclassify(threshold=100)
    assert feeds.admin.fanout_strategy("user:bob") == "push"
    assert stored(feeds, "timeline:alice") == []
    # A feed it never reached has nothing to remove.
    with pytest.raises(ActivityNotFound, match="nor delivered there by a follow"):
        feeds.remove_activity("timeline:dave", a.id)


@pytest.mark.parametrize("delivery", ["batch", "chunks"])
def test_an_entry_removed_before_its_delivery_is_not_delivered(
    make_engine: EngineFactory, delivery: str
) -> None:
    # Found by the stateful test: the owner takes out an activity that reached
    # the feed by `to` while its delivery to the source's followers, the
    # feed among them, is still pending.
    feeds = make_engine("manual", **({"delivery_chunk_size": 1} if delivery == "chunks" else {}))
    feeds.follow("timeline:alice", "user:bob")
    feeds.follow("timeline:carol", "user:bob")
    when = datetime.now(UTC)
    a = post(feeds, "user:bob", 1, to=["timeline:alice"], time=when)
    b = post(feeds, "user:bob", 2, to=["timeline:alice"], time=when)
    feeds.remove_activity("timeline:alice", a.id)
    feeds.admin.drain()
    assert held(feeds, "timeline:alice") == [b.id]
    assert sorted(held(feeds, "timeline:carol")) == sorted([a.id, b.id])


def test_ids_of_removed_activities_are_dropped_and_the_page_refilled(
    make_engine: EngineFactory,
) -> None:
    feeds = make_engine(task_runner="manual")
    feeds.follow("timeline:alice", "user:bob")
    made = [post(feeds, "user:bob", i) for i in range(10)]
    feeds.admin.drain()
    # Remove three without letting the retraction reach alice's timeline.
    for a in made[5:8]:
        feeds.remove_activity("user:bob", a.id)
    page = feeds.read("timeline:alice", limit=5)
    assert ids_of(page.results) == [made[9].id, made[8].id, made[4].id, made[3].id, made[2].id]
    assert page.next is not None
    # The stale ids were cleaned from the feed while reading.
    raw = feeds.timeline.page("timeline:alice", limit=100, before=None, cap=Cap(800))
    assert len(raw) == 7


# -- follows ---------------------------------------------------------------------


def test_follow_copies_recent_and_unfollow_removes_them(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    made = [post(feeds, "user:bob", i) for i in range(8)]
    other = post(feeds, "user:carol", 1)
    feeds.follow("timeline:alice", "user:carol")
    assert feeds.follow("timeline:alice", "user:bob", copy_limit=3)
    assert not feeds.follow("timeline:alice", "user:bob", copy_limit=3)  # already
    assert ids_of(feeds.read("timeline:alice").results) == [other.id, *ids_of(made[:4:-1])]
    addressed = post(feeds, "user:bob", 9, to=["timeline:alice"])
    assert feeds.unfollow("timeline:alice", "user:bob")
    assert not feeds.unfollow("timeline:alice", "user:bob")
    # What came by `to` stays; what came through the follow goes.
    assert ids_of(feeds.read("timeline:alice").results) == [addressed.id, other.id]
    assert feeds.get_activity(made[0].id) == made[0]  # unfollow removes nothing canonical


def test_unfollow_keep_history(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    a = post(feeds, "user:bob", 1)
    feeds.unfollow("timeline:alice", "user:bob", keep_history=True)
    post(feeds, "user:bob", 2)
    assert ids_of(feeds.read("timeline:alice").results) == [a.id]


def test_followers_and_following_pages(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    fans = [f"timeline:f{i:02}" for i in range(23)]
    created = feeds.follow_many([(f, "user:bob") for f in fans] + [("timeline:f00", "user:c")])
    assert len(created) == 24
    assert feeds.follow_many([("timeline:f00", "user:bob")]) == []
    walked: list[str] = []
    cursor = None
    while True:
        page = feeds.followers("user:bob", cursor=cursor, limit=5)
        walked.extend(f.follower for f in page.results)
        if page.next is None:
            break
        cursor = page.next
    assert walked == fans
    following = feeds.following("timeline:f00", limit=10)
    assert [f.source for f in following.results] == ["user:bob", "user:c"]
    assert feeds.counts("user:bob") == (23, 0)
    assert feeds.counts("timeline:f00") == (0, 2)
    feeds.unfollow("timeline:f00", "user:bob")
    assert feeds.counts("user:bob") == (22, 0)
    assert feeds.counts("timeline:f00") == (0, 1)
    with pytest.raises(InvalidCursor):
        feeds.following("timeline:f01", cursor=page.next or "x")


def test_aggregate_cap_and_ttl(make_engine: EngineFactory) -> None:
    now = datetime.now(UTC)
    feeds = make_engine(groups={"timeline": {"max_length": 5}, "site": {"ttl_days": 1}})
    feeds.follow("timeline:alice", "user:bob")
    made = [post(feeds, "user:bob", i) for i in range(9)]
    assert ids_of(feeds.read("timeline:alice").results) == ids_of(made[:3:-1])
    made_now = [post(feeds, "site:2", 0, time=now)]
    assert ids_of(feeds.read("site:2").results) == ids_of(made_now)
    old = feeds.add_activity(
        "site:1", {"actor": "a", "verb": "v", "object": "o", "time": now - timedelta(days=2)}
    )
    fresh = feeds.add_activity(
        "site:1", {"actor": "a", "verb": "v", "object": "o", "time": now - timedelta(hours=1)}
    )
    assert old.id != fresh.id
    assert ids_of(feeds.read("site:1").results) == [fresh.id]


def test_thread_runner_delivers_in_background(make_engine: EngineFactory) -> None:
    from waiting import wait_delivered

    feeds = make_engine(task_runner="thread")
    feeds.follow_many([(f"timeline:u{i}", "user:bob") for i in range(50)], copy_limit=0)
    a = post(feeds, "user:bob", 1)
    wait_delivered(feeds, 10)
    assert all(ids_of(feeds.read(f"timeline:u{i}").results) == [a.id] for i in range(50))


def test_read_hydrates_from_the_canonical_store_after_a_cache_miss(
    make_engine: EngineFactory,
) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    made = [post(feeds, "user:bob", i) for i in range(3)]
    feeds.cache.delete([made[1].id])  # e.g. Redis restarted without its cache
    assert ids_of(feeds.read("timeline:alice").results) == ids_of(made[::-1])
    assert ids_of(feeds.read("timeline:alice").results) == ids_of(made[::-1])  # now cached


def test_redis_scripts_survive_a_script_flush(make_engine: EngineFactory, store: str) -> None:
    if store not in ("redis", "cluster"):
        pytest.skip("Redis only")
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    client = feeds.timeline.client  # type: ignore[attr-defined]
    a = post(feeds, "user:bob", 1)
    client.script_flush()  # as after a restart: every cached script is gone
    assert ids_of(feeds.read("timeline:alice").results) == [a.id]
    client.script_flush()
    b = post(feeds, "user:bob", 2)
    assert ids_of(feeds.read("timeline:alice").results) == [b.id, a.id]
