"""Changing the ``to`` of a published activity (``feeds.activities.retarget``):
the feeds added receive it, those removed lose it, its own feed and its
followers keep it, and the canonical store (rebuilds, removal) agrees.

The addressed rows live in the canonical store: SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from conftest import EngineFactory
from tidings import ActivityNotFound, Tidings, ValidationError
from tidings.core.limits import MAX_TO

pytestmark = pytest.mark.parametrize("store", ["sql", "postgres"], indirect=True)


def ids(engine: Tidings, feed: str) -> list[str]:
    return [a.id for a in engine.read(feed).results]


def post(engine: Tidings, to: list[str]) -> str:
    activity = {"actor": "carol", "verb": "post", "object": "photo:1", "to": to}
    return engine.add_activity("user:carol", activity).id


def test_added_feeds_receive_it_and_removed_ones_lose_it(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.follow("timeline:fan", "user:carol")
    aid = post(engine, ["timeline:a", "timeline:b"])

    updated, added, retracted = engine.activities.retarget(
        aid, add=["timeline:c"], remove=["timeline:a"]
    )

    assert updated.to == ("timeline:b", "timeline:c")
    assert (added, retracted) == (["timeline:c"], ["timeline:a"])
    assert engine.get_activity(aid).to == ("timeline:b", "timeline:c")
    assert ids(engine, "timeline:a") == []
    assert ids(engine, "timeline:b") == ids(engine, "timeline:c") == [aid]
    assert ids(engine, "user:carol") == ids(engine, "timeline:fan") == [aid]
    # The canonical store agrees: a rebuild gives the same feeds.
    list(engine.admin.rebuild(["timeline:a", "timeline:c"]))
    assert (ids(engine, "timeline:a"), ids(engine, "timeline:c")) == ([], [aid])


def test_a_new_to_replaces_the_old_and_removal_retracts_from_it(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    aid = post(engine, ["timeline:a"])
    engine.activities.retarget(aid, to=["timeline:b", "timeline:b"])
    assert engine.get_activity(aid).to == ("timeline:b",)
    assert (ids(engine, "timeline:a"), ids(engine, "timeline:b")) == ([], [aid])
    engine.remove_activity("user:carol", aid)
    assert ids(engine, "timeline:b") == []


def test_a_follower_removed_from_to_keeps_it_by_its_follow(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.follow("timeline:fan", "user:carol")
    aid = post(engine, ["timeline:fan"])
    _, _, retracted = engine.activities.retarget(aid, remove=["timeline:fan"])
    assert retracted == []
    assert ids(engine, "timeline:fan") == [aid]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"to": ["timeline:a"], "add": ["timeline:b"]}, "not both"),
        ({"add": ["timeline:a"], "remove": ["timeline:a"]}, "both added and removed"),
        ({"add": ["nogroup:a"]}, "nogroup"),
        ({"add": "timeline:a"}, "must be a list"),
        ({"add": [f"timeline:{i}" for i in range(MAX_TO)]}, f"the limit is {MAX_TO}"),
    ],
)
def test_bad_changes_are_refused_and_change_nothing(
    make_engine: EngineFactory, change: dict[str, object], message: str
) -> None:
    engine = make_engine()
    aid = post(engine, ["timeline:x"])
    with pytest.raises(ValidationError, match=message):
        engine.activities.retarget(aid, **change)  # type: ignore[arg-type]
    assert engine.get_activity(aid).to == ("timeline:x",)
    assert ids(engine, "timeline:a") == []


def test_an_unknown_activity_is_not_found(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = post(engine, [])
    engine.remove_activity("user:carol", aid)
    with pytest.raises(ActivityNotFound):
        engine.activities.retarget(aid, add=["timeline:a"])


def test_a_notification_feed_gains_and_loses_its_aggregate(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = post(engine, [])
    engine.activities.retarget(aid, add=["notification:n"])
    page = engine.read_aggregates("notification:n")
    assert [[a.id for a in g.activities] for g in page.results] == [[aid]]
    assert page.unseen == 1
    engine.activities.retarget(aid, remove=["notification:n"])
    assert engine.read_aggregates("notification:n").results == []
