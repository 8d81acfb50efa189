"""Placing an activity in feeds (``feeds.activities.place``, getstream's
``add_to_many``): one activity in each feed named, reaching no follower of any
of them, by delivery, by a follow's copy, by a rebuild or by a pulled merge;
taken out of one feed, it stays in the others.

The placed mark lives in the canonical store (SQLite, PostgreSQL); the feeds
in each timeline store."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import EngineFactory
from tidings import ActivityNotFound, Tidings, ValidationError
from tidings.core.limits import MAX_TO

pytestmark = pytest.mark.parametrize("store", ["sql", "postgres", "redis"], indirect=True)

NOTE = {"actor": "ann", "verb": "post", "object": "note:1", "foreign_id": "note:1"}


def ids(engine: Tidings, feed: str) -> list[str]:
    return [a.id for a in engine.read(feed).results]


def test_a_placed_activity_is_in_each_feed_named_and_reaches_no_follower(
    make_engine: EngineFactory,
) -> None:
    # Given followers of both feeds an activity is placed in
    engine = make_engine(pull_grace_seconds=0)
    engine.follow("timeline:fan", "user:ann")
    engine.follow("timeline:other", "timeline:box")
    # When it is placed in them
    placed, created = engine.activities.place(["user:ann", "timeline:box"], NOTE)
    engine.settle()
    # Then each feed shows the one activity, and no follower has it
    assert created
    assert ids(engine, "user:ann") == ids(engine, "timeline:box") == [placed.id]
    assert ids(engine, "timeline:fan") == ids(engine, "timeline:other") == []
    # nor one following later (its copy), nor one rebuilt from the canonical store
    engine.follow("timeline:late", "user:ann")
    list(engine.admin.rebuild(["timeline:fan", "user:ann", "timeline:box"]))
    assert ids(engine, "timeline:late") == ids(engine, "timeline:fan") == []
    assert ids(engine, "user:ann") == ids(engine, "timeline:box") == [placed.id]
    # nor when the source is pulled (its followers merge it at read time)
    assert engine.admin.reclassify(threshold=1) == [("user:ann", "push", "pull")]
    engine.reads.flat.merges_pulled.expire()
    published = engine.add_activity("user:ann", {**NOTE, "foreign_id": "note:2"})
    assert ids(engine, "timeline:fan") == [published.id]
    # Placed again with its foreign_id: the one stored, nothing changed.
    again, created = engine.activities.place(["user:ann", "timeline:box"], NOTE)
    assert (again.id, created) == (placed.id, False)


def test_taken_out_of_one_feed_it_stays_in_the_others(make_engine: EngineFactory) -> None:
    engine = make_engine()
    feeds = ["user:ann", "timeline:a", "timeline:b"]
    placed, _ = engine.activities.place(feeds, NOTE)
    # By id from its own (first) feed, by foreign_id from another
    engine.remove_activity("user:ann", placed.id)
    assert ids(engine, "user:ann") == []
    assert ids(engine, "timeline:a") == ids(engine, "timeline:b") == [placed.id]
    engine.remove_activity("timeline:a", foreign_id="note:1")
    assert (ids(engine, "timeline:a"), ids(engine, "timeline:b")) == ([], [placed.id])
    with pytest.raises(ActivityNotFound):
        engine.remove_activity("timeline:a", foreign_id="note:1")
    list(engine.admin.rebuild(feeds))
    assert [ids(engine, f) for f in feeds] == [[], [], [placed.id]]


@pytest.mark.parametrize(
    ("feeds", "activity", "field"),
    [
        ([], NOTE, "feeds"),
        ("user:ann", NOTE, "feeds"),
        ([f"timeline:{i}" for i in range(MAX_TO + 1)], NOTE, "feeds"),
        (["user:ann", "nope:1"], NOTE, "feeds.1"),
        (["user:ann"], {**NOTE, "to": ["timeline:x"]}, "to"),
        (["user:ann"], {**NOTE, "verb": ""}, "verb"),
    ],
)
def test_bad_placements_are_refused_and_write_nothing(
    make_engine: EngineFactory, feeds: Any, activity: dict[str, Any], field: str
) -> None:
    engine = make_engine()
    with pytest.raises(ValidationError) as refused:
        engine.activities.place(feeds, activity)
    assert refused.value.field == field
    assert ids(engine, "user:ann") == []
    with pytest.raises(ActivityNotFound):
        engine.remove_activity("user:ann", foreign_id="note:1")


def test_taken_out_of_every_feed_it_is_removed_and_may_be_placed_again(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    feeds = ["user:ann", "timeline:a"]
    placed, _ = engine.activities.place(feeds, NOTE)
    engine.remove_activity("timeline:a", foreign_id="note:1")
    engine.remove_activity("user:ann", foreign_id="note:1")
    engine.settle()
    # Out of its last feed, the activity is gone, not only hidden ...
    with pytest.raises(ActivityNotFound):
        engine.get_activity(placed.id)
    # ... so its foreign_id places a new one, shown in each feed again.
    again, created = engine.activities.place(feeds, NOTE)
    engine.settle()
    assert created
    assert again.id != placed.id
    assert ids(engine, "user:ann") == ids(engine, "timeline:a") == [again.id]


def test_its_first_feeds_followers_neither_see_it_nor_keep_it_on_a_retarget(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    # timeline:box is owner-only; timeline:other and timeline:ann follow it.
    engine.follow("timeline:other", "timeline:box")
    engine.follow("timeline:ann", "timeline:box")
    placed, _ = engine.activities.place(["timeline:box", "timeline:ann"], NOTE)
    engine.settle()
    # A follower of its first feed does not hold it, so may not see it by id.
    assert engine.access.activity_refusal(placed, "other") is not None
    assert engine.access.activity_refusal(placed, "ann") is None
    # Taken out of timeline:ann by a retarget, it leaves it, follower or not.
    engine.activities.retarget(placed.id, remove=["timeline:ann"])
    engine.settle()
    assert ids(engine, "timeline:ann") == []
    assert ids(engine, "timeline:box") == [placed.id]
