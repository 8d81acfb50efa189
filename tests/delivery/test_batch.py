"""Deliveries of many activities at once, and publishing a batch in one
transaction, on every store."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import EngineFactory
from tidings import Tidings, ValidationError
from tidings.core.limits import MAX_BATCH
from tidings.delivery.batch import SMALL_SOURCE
from tidings.stores.base import Cap, TimelineStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def activity(actor: str, n: int, **extra: Any) -> dict[str, Any]:
    return {
        "actor": actor,
        "verb": "post",
        "object": f"note:{n}",
        "time": T0 + timedelta(seconds=n),
        **extra,
    }


def feed_ids(engine: Tidings, feed: str) -> list[str]:
    return [a.id for a in engine.read(feed, limit=100).results]


def follow_big(engine: Tidings) -> None:
    """``user:big``: one follower more than a batched delivery takes."""
    big = [(f"timeline:b{i:05d}", "user:big") for i in range(SMALL_SOURCE + 1)]
    for start in range(0, len(big), 1000):
        engine.follow_many(big[start : start + 1000], copy_limit=0)


def test_a_backlog_of_small_deliveries_reaches_exactly_the_followers(
    make_engine: EngineFactory,
) -> None:
    # A random graph; everything published before the runner runs, so the
    # runner claims it as batches.
    engine = make_engine(task_runner="manual")
    rng = random.Random(7)
    users = [f"u{i}" for i in range(30)]
    follows = {(f"timeline:{a}", f"user:{b}") for a in users for b in users if rng.random() < 0.2}
    engine.follow_many(sorted(follows), copy_limit=0)
    expected: dict[str, list[str]] = {}
    for n in range(200):
        author = rng.choice(users)
        stored = engine.add_activity(f"user:{author}", activity(author, n))
        for follower, source in follows:
            if source == f"user:{author}":
                expected.setdefault(follower, []).append(stored.id)
        expected.setdefault(f"user:{author}", []).append(stored.id)
    assert engine.admin.drain() == 200
    for feed, ids in expected.items():
        assert feed_ids(engine, feed) == sorted(ids, reverse=True)[:100], feed


def test_a_batch_mixes_sources_big_and_small_and_addressed_feeds(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(task_runner="manual")
    follow_big(engine)
    engine.follow_many([("timeline:alice", "user:bob"), ("timeline:carl", "user:bob")])
    a = engine.add_activity("user:big", activity("big", 1))
    b = engine.add_activity("user:bob", activity("bob", 2, to=["notification:dan"]))
    c = engine.add_activity("user:bob", activity("bob", 3))
    assert engine.admin.drain() == 3
    assert feed_ids(engine, "timeline:b00000") == [a.id]
    assert feed_ids(engine, f"timeline:b{SMALL_SOURCE:05d}") == [a.id]
    assert feed_ids(engine, "timeline:alice") == [c.id, b.id]
    assert feed_ids(engine, "user:bob") == [c.id, b.id]
    assert [g.activity_count for g in engine.read_aggregates("notification:dan").results] == [1]


class _UnfollowBeforeWrite:
    """A timeline store that runs ``hook`` once, just before the first batched
    write lands: an unfollow racing the delivery, deterministically."""

    def __init__(self, inner: TimelineStore, hook: Callable[[], None]) -> None:
        self.inner = inner
        self.hook: Callable[[], None] | None = hook

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[str]], cap: Cap
    ) -> Callable[[], None]:
        write = self.inner.prepare_add_each(entries, cap)

        def run() -> None:
            hook, self.hook = self.hook, None
            if hook is not None:
                hook()
            write()

        return run

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_an_unfollow_while_a_batch_writes_leaves_nothing_behind(
    make_engine: EngineFactory,
) -> None:
    # The unfollow finishes (follow deleted, feed cleaned) before the batch's
    # write lands: the delivery must take its entry back out.
    engine = make_engine(task_runner="manual")
    engine.follow_many([("timeline:alice", "user:bob"), ("timeline:carl", "user:bob")])
    posted = engine.add_activity("user:bob", activity("bob", 1))

    def unfollow() -> None:
        assert engine.unfollow("timeline:alice", "user:bob")

    deliverer = engine.parts.deliverer
    deliverer.timeline = _UnfollowBeforeWrite(deliverer.timeline, unfollow)
    assert engine.admin.drain() == 1
    assert feed_ids(engine, "timeline:alice") == []
    assert feed_ids(engine, "timeline:carl") == [posted.id]


def test_an_unfollowed_feed_named_in_to_keeps_the_activity(make_engine: EngineFactory) -> None:
    engine = make_engine(task_runner="manual")
    engine.follow("timeline:alice", "user:bob")
    posted = engine.add_activity("user:bob", activity("bob", 1, to=["timeline:alice"]))

    def unfollow() -> None:
        engine.unfollow("timeline:alice", "user:bob")

    deliverer = engine.parts.deliverer
    deliverer.timeline = _UnfollowBeforeWrite(deliverer.timeline, unfollow)
    engine.admin.drain()
    assert feed_ids(engine, "timeline:alice") == [posted.id]


# -- publishing a batch --------------------------------------------------------


def test_publish_many_stores_and_delivers_all(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.follow("timeline:alice", "user:bob")
    results = engine.activities.publish_many("user:bob", [activity("bob", n) for n in range(5)])
    assert [created for _, created in results] == [True] * 5
    ids = [a.id for a, _ in results]
    assert feed_ids(engine, "timeline:alice") == sorted(ids, reverse=True)
    assert feed_ids(engine, "user:bob") == sorted(ids, reverse=True)
    assert engine.add_activities("user:bob", []) == []


def test_publish_many_returns_the_first_of_a_repeated_foreign_id(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    first = engine.add_activity("user:bob", activity("bob", 1, foreign_id="p1"))
    results = engine.activities.publish_many(
        "user:bob",
        [
            activity("bob", 2, foreign_id="p1"),
            activity("bob", 3, foreign_id="p2"),
            activity("bob", 4, foreign_id="p2"),
        ],
    )
    assert [(a.object, created) for a, created in results] == [
        ("note:1", False),
        ("note:3", True),
        ("note:3", False),
    ]
    assert results[0][0].id == first.id
    assert len(feed_ids(engine, "user:bob")) == 2


@pytest.mark.parametrize("store", ["sql"], indirect=True)
@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([activity("bob", 1), {"actor": "bob"}], "activities.1"),
        ([activity("bob", 1)] * (MAX_BATCH + 1), f"the limit is {MAX_BATCH}"),
        (
            [activity("bob", n, to=[f"notification:n{i}" for i in range(100)]) for n in range(11)],
            "the limit is 1,000",
        ),
        ("not a list", "must be a list of activities"),
    ],
)
def test_publish_many_refuses_bad_input_and_writes_nothing(
    make_engine: EngineFactory, items: Any, message: str
) -> None:
    engine = make_engine()
    with pytest.raises(ValidationError, match=message):
        engine.activities.publish_many("user:bob", items)
    assert feed_ids(engine, "user:bob") == []
    assert engine.admin.stats().pending == 0


@pytest.mark.parametrize("store", ["sql", "postgres"], indirect=True)
def test_publish_each_writes_many_feeds_in_one_call(make_engine: EngineFactory) -> None:
    # An importer's batch: rows going to many feeds, foreign ids repeated
    # across feeds (one activity each) and within one (the first stands).
    engine = make_engine()
    engine.follow("timeline:alice", "user:bob")
    engine.follow("timeline:alice", "user:dan")
    there = engine.add_activity("user:carl", activity("carl", 0, foreign_id="a0"))
    results = engine.activities.publish_each(
        [
            ("user:bob", activity("bob", 1, foreign_id="a1")),
            ("user:dan", activity("bob", 1, foreign_id="a1")),
            ("user:carl", activity("carl", 2, foreign_id="a0")),
            ("user:carl", activity("carl", 3, foreign_id="a3")),
            ("user:carl", activity("carl", 4, foreign_id="a3")),
        ]
    )
    assert [(a.foreign_id, created) for a, created in results] == [
        ("a1", True),
        ("a1", True),
        ("a0", False),
        ("a3", True),
        ("a3", False),
    ]
    assert results[2][0].id == there.id
    assert results[0][0].id != results[1][0].id
    assert feed_ids(engine, "timeline:alice") == sorted(
        [results[0][0].id, results[1][0].id], reverse=True
    )
    assert len(feed_ids(engine, "user:carl")) == 2
    assert engine.activities.publish_each([]) == []


@pytest.mark.parametrize("store", ["sql"], indirect=True)
@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([("user:bob", activity("bob", 1)), ("user:bob",)], "activities.1: must be a"),
        ([("user:bob", activity("bob", 1)), ("nosuch:x", activity("bob", 2))], "nosuch"),
        ([("user:bob", activity("bob", 1)), ("user:bob", {"actor": "bob"})], "activities.1"),
        ("not a list", "must be a list of"),
    ],
)
def test_publish_each_refuses_bad_input_and_writes_nothing(
    make_engine: EngineFactory, items: Any, message: str
) -> None:
    engine = make_engine()
    with pytest.raises(ValidationError, match=message):
        engine.activities.publish_each(items)
    assert feed_ids(engine, "user:bob") == []


# -- follows racing deliveries in flight -------------------------------------


@pytest.mark.parametrize("copy_limit", [0, 3])
def test_a_follow_while_deliveries_are_pending_gets_its_copy_and_no_more(
    make_engine: EngineFactory, copy_limit: int
) -> None:
    # Five activities accepted (not yet delivered) before the follow: the
    # follow's copy gives the newest `copy_limit`; their deliveries must not
    # add the rest. One accepted after the follow is delivered.
    engine = make_engine(task_runner="manual")
    engine.follow("timeline:carl", "user:bob")
    before = [engine.add_activity("user:bob", activity("bob", n)) for n in range(5)]
    engine.follow("timeline:alice", "user:bob", copy_limit=copy_limit)
    after = engine.add_activity("user:bob", activity("bob", 9))
    engine.admin.drain()
    copied = sorted((a.id for a in before), reverse=True)[:copy_limit]
    assert feed_ids(engine, "timeline:alice") == [after.id, *copied]
    assert len(feed_ids(engine, "timeline:carl")) == 6


def test_a_follow_while_a_big_delivery_is_pending_is_left_to_its_copy(
    make_engine: EngineFactory,
) -> None:
    # The chunked path (a source too big to batch) honours the follow's mark too.
    engine = make_engine(task_runner="manual")
    follow_big(engine)
    posted = engine.add_activity("user:big", activity("big", 1))
    engine.follow("timeline:zed", "user:big", copy_limit=0)
    engine.admin.drain()
    assert feed_ids(engine, "timeline:b00000") == [posted.id]
    assert feed_ids(engine, "timeline:zed") == []
