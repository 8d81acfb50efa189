"""Hybrid fan-out and reading past the cap, on every store.

Sources above the threshold are pulled: their flat followers merge them at
read time. Reading past the end of a feed's materialised entries continues
from the canonical store, so a cursor walks the feed's whole history.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import EngineFactory
from tidings import Activity, Tidings, ValidationError
from tidings.core.fanout import Strategy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
_tick = itertools.count(1)


def engine_at_t0(make_engine: EngineFactory, **overrides: Any) -> Tidings:
    """An engine whose clock stands at T0, so activities posted after it are
    newer than every follow (the history of a follow starts at its time)."""
    # No grace period: a switch to pull takes effect at once (tested on its own below).
    feeds = make_engine(**{"pull_grace_seconds": 0, **overrides})
    feeds.clock.now = lambda: T0
    return feeds


def post(engine: Tidings, feed: str, **extra: Any) -> Activity:
    n = next(_tick)
    data: dict[str, Any] = {
        "actor": feed.split(":")[1],
        "verb": "post",
        "object": f"note:{n}",
        "time": T0 + timedelta(seconds=n),
    }
    data.update(extra)
    return engine.add_activity(feed, data)


def walk(engine: Tidings, feed: str, limit: int) -> list[str]:
    out: list[str] = []
    cursor = None
    while True:
        page = engine.read(feed, limit=limit, cursor=cursor)
        out.extend(a.id for a in page.results)
        assert page.next is None or len(page.results) == limit
        if page.next is None:
            return out
        cursor = page.next


def raw(engine: Tidings, feed: str) -> list[str]:
    """What the timeline store holds for ``feed`` (within its cap: Redis trims lazily)."""
    cap = engine.deliverer.cap(feed.split(":")[0])
    return engine.timeline.page(feed, limit=1000, before=None, cap=cap)


def newest_first(items: list[Activity]) -> list[str]:
    return sorted((a.id for a in items), reverse=True)


FANS = ["timeline:alice", "timeline:carol", "timeline:dave"]


def test_a_pulled_source_is_merged_at_read_time(make_engine: EngineFactory) -> None:
    feeds = engine_at_t0(make_engine)
    feeds.follow_many([(fan, "user:bob") for fan in FANS])
    feeds.follow("timeline:alice", "user:erin")
    feeds.follow("timeline_aggregated:alice", "user:bob")
    assert feeds.admin.reclassify(threshold=2) == [("user:bob", "push", "pull")]
    assert feeds.admin.fanout_strategy("user:bob") == "pull"
    assert feeds.admin.reclassify(threshold=2) == []  # nothing changed since
    with pytest.raises(ValidationError):
        feeds.admin.reclassify(threshold=-1)
    made = []
    for _ in range(4):
        made += [post(feeds, "user:bob"), post(feeds, "user:erin")]
    made.append(post(feeds, "user:zed", to=["timeline:alice"]))
    # Flat followers hold none of bob's; erin is still pushed.
    bobs = {a.id for a in made if a.actor == "bob"}
    assert not bobs & set(raw(feeds, "timeline:alice"))
    assert raw(feeds, "timeline:carol") == []
    for limit in (1, 2, 3, 25):
        assert walk(feeds, "timeline:alice", limit) == newest_first(made)
    assert walk(feeds, "timeline:carol", 2) == sorted(bobs, reverse=True)
    # Aggregated followers are still pushed.
    aggregates = feeds.read_aggregates("timeline_aggregated:alice").results
    assert {a.id for g in aggregates for a in g.activities} == bobs


def test_switching_to_pull_keeps_what_was_pushed_without_duplicates(
    make_engine: EngineFactory,
) -> None:
    feeds = engine_at_t0(make_engine)
    feeds.follow_many([(fan, "user:bob") for fan in FANS])
    before = [post(feeds, "user:bob") for _ in range(3)]
    assert set(raw(feeds, "timeline:alice")) == {a.id for a in before}
    feeds.admin.reclassify(threshold=2)
    after = [post(feeds, "user:bob") for _ in range(3)]
    assert set(raw(feeds, "timeline:alice")) == {a.id for a in before}
    assert walk(feeds, "timeline:alice", 2) == newest_first(before + after)


def test_switching_back_to_push_copies_what_readers_merged(make_engine: EngineFactory) -> None:
    feeds = engine_at_t0(make_engine)
    feeds.follow_many([(fan, "user:bob") for fan in [*FANS, "timeline:x", "timeline:y"]])
    feeds.follow("timeline:alice", "user:erin")
    assert feeds.admin.reclassify(threshold=4) == [("user:bob", "push", "pull")]
    made = [post(feeds, "user:bob") for _ in range(3)] + [post(feeds, "user:erin")]
    seen = {fan: walk(feeds, fan, 2) for fan in FANS}
    # Back to push below threshold * (1 - hysteresis) = 3.6 followers: 4 stay pulled.
    feeds.unfollow("timeline:x", "user:bob")
    assert feeds.admin.reclassify(threshold=4) == []
    feeds.unfollow("timeline:dave", "user:bob")
    assert feeds.admin.reclassify(threshold=4) == [("user:bob", "pull", "push")]
    assert feeds.admin.fanout_strategy("user:bob") == "push"
    assert set(raw(feeds, "timeline:alice")) == {a.id for a in made}
    assert set(raw(feeds, "timeline:carol")) == {a.id for a in made if a.actor == "bob"}
    assert raw(feeds, "timeline:dave") == []
    for fan in ("timeline:alice", "timeline:carol"):
        assert walk(feeds, fan, 2) == seen[fan]
    pushed = post(feeds, "user:bob")
    assert raw(feeds, "timeline:carol")[0] == pushed.id


def test_a_draining_source_is_merged_until_backfilled(make_engine: EngineFactory) -> None:
    feeds = engine_at_t0(make_engine)
    feeds.follow("timeline:alice", "user:bob")
    feeds.admin.reclassify(threshold=0)
    a = post(feeds, "user:bob")
    # A reclassify cut short after marking the source draining: new activities
    # are pushed again, and readers still merge what was not.
    feeds.canonical.fanout.set_strategy("user:bob", Strategy.DRAINING, feeds.clock.ms())
    b = post(feeds, "user:bob")
    assert raw(feeds, "timeline:alice") == [b.id]
    assert walk(feeds, "timeline:alice", 1) == [b.id, a.id]
    # The next run finishes the switch.
    assert feeds.admin.reclassify(threshold=5) == [("user:bob", "draining", "push")]
    assert raw(feeds, "timeline:alice") == [b.id, a.id]


def test_a_pulled_source_shows_from_where_the_follow_starts(make_engine: EngineFactory) -> None:
    feeds = engine_at_t0(make_engine)
    feeds.follow("timeline:carol", "user:bob")
    feeds.admin.reclassify(threshold=0)
    old = [post(feeds, "user:bob") for _ in range(5)]
    feeds.clock.now = lambda: T0 + timedelta(days=1)  # later: the old posts predate it
    feeds.follow("timeline:alice", "user:bob", copy_limit=2)
    assert raw(feeds, "timeline:alice") == []  # pulled: nothing copied
    new = post(feeds, "user:bob", time=T0 + timedelta(days=2))
    assert walk(feeds, "timeline:alice", 2) == [new.id, old[4].id, old[3].id]
    feeds.follow("timeline:dave", "user:bob", copy_limit=0)
    assert walk(feeds, "timeline:dave", 2) == [new.id]
    assert walk(feeds, "timeline:carol", 2) == newest_first([*old, new])
    feeds.unfollow("timeline:alice", "user:bob")
    assert walk(feeds, "timeline:alice", 2) == []


def test_delivery_skips_flat_followers_of_a_pulled_source(make_engine: EngineFactory) -> None:
    feeds = engine_at_t0(make_engine, task_runner="manual", delivery_chunk_size=2)
    fans = [f"timeline:f{i}" for i in range(5)] + ["user:u1", "user:u2"]
    aggregated = [f"timeline_aggregated:g{i}" for i in range(3)] + ["notification:n1"]
    feeds.follow_many([(fan, "user:bob") for fan in fans + aggregated])
    feeds.admin.reclassify(threshold=3)
    a = post(feeds, "user:bob", to=["timeline:zoe"])
    assert feeds.admin.drain() == 1
    # Aggregated followers (chunks of 2, across feed group ranges) are still pushed.
    for feed in aggregated:
        assert [x.id for g in feeds.read_aggregates(feed).results for x in g.activities] == [a.id]
    assert raw(feeds, "user:bob") == [a.id]
    assert raw(feeds, "timeline:zoe") == [a.id]  # `to` feeds are still written
    assert all(raw(feeds, fan) == [] for fan in fans)
    assert all(walk(feeds, fan, 5) == [a.id] for fan in fans)
    # Removal: gone from every reader.
    feeds.remove_activity("user:bob", a.id)
    feeds.admin.drain()
    assert all(walk(feeds, fan, 5) == [] for fan in [*fans, "timeline:zoe"])


def test_reading_past_the_cap_walks_the_whole_history(make_engine: EngineFactory) -> None:
    feeds = engine_at_t0(make_engine, groups={"timeline": {"max_length": 5}})
    feeds.follow("timeline:alice", "user:bob")
    feeds.follow("timeline:alice", "user:erin")
    feeds.follow("timeline:alice", "user:pulled")
    feeds.follow_many([(f"timeline:x{i}", "user:pulled") for i in range(3)])
    feeds.admin.reclassify(threshold=2)
    history: list[Activity] = []
    for _ in range(6):
        history += [post(feeds, "user:bob"), post(feeds, "user:erin")]
        history.append(post(feeds, "user:pulled"))
    history.append(post(feeds, "timeline:alice"))  # its own
    history.append(post(feeds, "user:zed", to=["timeline:alice"]))  # addressed
    not_followed = post(feeds, "user:zed")
    assert len(raw(feeds, "timeline:alice")) == 5
    for limit in (1, 4, 7, 100):
        assert walk(feeds, "timeline:alice", limit) == newest_first(history)
    assert not_followed.id not in walk(feeds, "timeline:alice", 100)
    # Unfollowing removes the source from the history too; removals show at once.
    feeds.unfollow("timeline:alice", "user:erin")
    gone = history.pop(0)
    feeds.remove_activity("user:bob", gone.id)
    expected = newest_first([a for a in history if a.actor != "erin"])
    assert walk(feeds, "timeline:alice", 4) == expected


def test_a_deep_cursor_stays_exact_while_activities_arrive(make_engine: EngineFactory) -> None:
    feeds = engine_at_t0(make_engine, groups={"timeline": {"max_length": 3}})
    feeds.follow("timeline:alice", "user:bob")
    made = [post(feeds, "user:bob") for _ in range(12)]
    first = feeds.read("timeline:alice", limit=4)
    walked = [a.id for a in first.results]
    cursor = first.next
    while cursor:
        post(feeds, "user:bob")  # pushes older entries out of the capped feed
        page = feeds.read("timeline:alice", limit=4, cursor=cursor)
        walked += [a.id for a in page.results]
        cursor = page.next
    assert walked == newest_first(made)


def test_a_feed_is_rebuilt_from_the_canonical_store_when_its_entries_are_lost(
    make_engine: EngineFactory,
) -> None:
    feeds = engine_at_t0(make_engine)
    feeds.follow("timeline:alice", "user:bob")
    made = [post(feeds, "user:bob") for _ in range(4)]
    feeds.timeline.clear(["timeline:alice"])  # e.g. a Redis restart without persistence
    assert walk(feeds, "timeline:alice", 3) == newest_first(made)


def test_many_sources_past_the_cap_and_pulled(make_engine: EngineFactory) -> None:
    # More sources than one SQL statement takes (200): the reads span statements.
    feeds = engine_at_t0(make_engine, groups={"timeline": {"max_length": 5}})
    sources = [f"user:s{i:03}" for i in range(230)]
    feeds.follow_many([("timeline:alice", s) for s in sources], copy_limit=0)
    made = [post(feeds, s) for s in sources]
    assert walk(feeds, "timeline:alice", 100) == newest_first(made)
    assert len(feeds.admin.reclassify(threshold=0)) == len(sources)
    more = [post(feeds, s) for s in sources[::7]]
    assert walk(feeds, "timeline:alice", 100) == newest_first(made + more)


def test_flat_followers_are_pushed_for_a_grace_period_after_the_switch(
    make_engine: EngineFactory,
) -> None:
    # Given a source that has just gone to pull, and readers that looked up
    # "is anything pulled?" before it did (they skip the merge meanwhile)
    feeds = make_engine(pull_grace_seconds=10, pull_threshold=1)
    now = [T0]
    feeds.clock.now = lambda: now[0]
    feeds.follow_many([("timeline:alice", "user:bob"), ("timeline:carol", "user:bob")])
    assert feeds.read("timeline:alice").results == []  # caches "nothing is pulled"
    assert feeds.admin.reclassify() == [("user:bob", "push", "pull")]
    # When bob publishes within the grace period, then followers are still pushed
    # and a reader with the stale view sees the activity.
    now[0] = T0 + timedelta(seconds=9)
    early = post(feeds, "user:bob")
    assert [a.id for a in feeds.read("timeline:alice").results] == [early.id]
    # After it, flat followers are no longer pushed: readers merge bob's feed.
    now[0] = T0 + timedelta(seconds=11)
    late = post(feeds, "user:bob")
    cap = feeds.deliverer.cap("timeline")
    assert feeds.timeline.page("timeline:alice", limit=10, before=None, cap=cap) == [early.id]
    feeds.reads.flat.merges_pulled.expire()  # the reader's view is due (5 s of monotonic time)
    assert [a.id for a in feeds.read("timeline:alice").results] == [late.id, early.id]
