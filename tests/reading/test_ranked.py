"""Ranked feeds through the engine: order by the group's expression, exact pages
from the snapshot while scores change, renewal after the TTL, explain,
author diversity, and the variables (reaction counts, velocity, affinity,
weights, extra fields)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import EngineFactory
from tidings import CursorExpired, InvalidCursor, Settings, Tidings, ValidationError

T0 = datetime(2026, 3, 1, tzinfo=UTC)
_tick = itertools.count()


def ranked(ranking: str, **group: Any) -> dict[str, Any]:
    return {"groups": {"ranked": {"kind": "ranked", "ranking": ranking, **group}}}


def post(engine: Tidings, actor: str = "carol", verb: str = "post", **extra: Any) -> str:
    n = next(_tick)
    return engine.add_activity(
        f"user:{actor}",
        {
            "actor": actor,
            "verb": verb,
            "object": f"note:{n}",
            "time": T0 + timedelta(seconds=n),
            "extra": extra,
        },
    ).id


def walk(engine: Tidings, feed: str, limit: int, **kwargs: Any) -> list[str]:
    """Every page of ``feed`` in order; the ids shown."""
    shown: list[str] = []
    cursor = None
    while True:
        page = engine.read(feed, limit, cursor, **kwargs)
        shown += [a.id for a in page.results]
        cursor = page.next
        if cursor is None:
            return shown


def test_a_ranked_feed_is_read_in_the_order_of_its_expression(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(**ranked("likes"))
    engine.follow("ranked:alice", "user:carol")
    a = [post(engine) for _ in range(5)]
    for user in ("u1", "u2", "u3"):
        engine.reactions.add(a[1], "like", user)
    engine.reactions.add(a[3], "like", "u1")
    page = engine.read("ranked:alice")
    # Equal scores: newest first.
    assert [x.id for x in page.results] == [a[1], a[3], a[4], a[2], a[0]]
    assert page.extras is not None
    assert [e["score"] for e in page.extras] == [3.0, 1.0, 0.0, 0.0, 0.0]
    assert page.next is None


@pytest.mark.parametrize("store", ["memory", "sql", "redis", "postgres"], indirect=True)
def test_pages_come_from_the_snapshot_while_scores_change(make_engine: EngineFactory) -> None:
    engine = make_engine(**ranked("likes"))
    engine.follow("ranked:alice", "user:carol")
    made = [post(engine) for _ in range(30)]
    first = engine.read("ranked:alice", 10)
    shown = [x.id for x in first.results]
    # The last ten jump to the top, and new activities arrive: the pages of
    # this walk do not change.
    for aid in made[:10]:
        for user in ("u1", "u2"):
            engine.reactions.add(aid, "like", user)
    late = [post(engine) for _ in range(3)]
    cursor = first.next
    while cursor is not None:
        page = engine.read("ranked:alice", 10, cursor)
        assert not page.renewed
        shown += [x.id for x in page.results]
        cursor = page.next
    assert shown == made[::-1]
    # A new walk ranks afresh.
    again = walk(engine, "ranked:alice", 10)
    assert again[:10] == made[:10][::-1]
    assert sorted(again) == sorted(made + late)


@pytest.mark.parametrize("store", ["sql", "redis"], indirect=True)
def test_after_the_ttl_the_next_page_is_ranked_afresh_without_what_was_served(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(**ranked("likes", snapshot_seconds=60))
    engine.follow("ranked:alice", "user:carol")
    made = [post(engine) for _ in range(12)]
    now = datetime.now(UTC)
    engine.clock.now = lambda: now
    first = engine.read("ranked:alice", 5)
    served = [x.id for x in first.results]
    engine.reactions.add(made[0], "like", "u1")  # the oldest moves to the top
    engine.clock.now = lambda: now + timedelta(seconds=61)
    renewed = engine.read("ranked:alice", 5, first.next)
    assert renewed.renewed
    assert next(x.id for x in renewed.results) == made[0]
    served += [x.id for x in renewed.results]
    cursor = renewed.next
    while cursor is not None:
        page = engine.read("ranked:alice", 5, cursor)
        served += [x.id for x in page.results]
        cursor = page.next
    assert sorted(served) == sorted(made)
    assert len(served) == len(set(served))


@pytest.mark.parametrize("store", ["memory", "sql"], indirect=True)
def test_a_cursor_past_the_second_ttl_is_refused(make_engine: EngineFactory) -> None:
    engine = make_engine(**ranked("likes", snapshot_seconds=60))
    engine.follow("ranked:alice", "user:carol")
    for _ in range(4):
        post(engine)
    now = datetime.now(UTC)
    engine.clock.now = lambda: now
    first = engine.read("ranked:alice", 2)
    assert first.next is not None
    engine.clock.now = lambda: now + timedelta(seconds=121)
    with pytest.raises(CursorExpired, match="first page"):
        engine.read("ranked:alice", 2, first.next)


@pytest.mark.parametrize("store", ["sql"], indirect=True)
def test_cursors_are_checked(make_engine: EngineFactory) -> None:
    engine = make_engine(**ranked("likes"))
    engine.follow("ranked:alice", "ranked:x")
    engine.follow("ranked:bob", "user:carol")
    engine.follow("ranked:alice", "user:carol")
    for _ in range(4):
        post(engine)
    cursor = engine.read("ranked:bob", 2).next
    assert cursor is not None
    with pytest.raises(InvalidCursor):
        engine.read("ranked:alice", 2, cursor)
    with pytest.raises(InvalidCursor):
        engine.read("ranked:bob", 2, cursor[:-2])
    flat = engine.read("user:carol", 2).next
    with pytest.raises(InvalidCursor):
        engine.read("ranked:bob", 2, flat)


@pytest.mark.parametrize("store", ["sql"], indirect=True)
def test_explain_gives_each_score_and_its_variables(make_engine: EngineFactory) -> None:
    expression = "decay_exp(age_hours, 24) * (1 + likes) * weight(verb) * (1 + extra.boost)"
    engine = make_engine(**ranked(expression, weights={"video": 2.0}))
    engine.follow("ranked:alice", "user:carol")
    video = post(engine, verb="video", boost=1)
    note = post(engine)
    engine.reactions.add(note, "like", "u1")
    page = engine.read("ranked:alice", explain=True)
    assert page.extras is not None
    by_id = {a.id: e for a, e in zip(page.results, page.extras, strict=True)}
    assert set(by_id[video]["explain"]) >= {"age_hours", "likes", "weight(verb)", "extra.boost"}
    assert by_id[video]["explain"]["weight(verb)"] == 2.0
    assert by_id[note]["explain"]["likes"] == 1.0
    assert by_id[note]["explain"]["extra.boost"] == 0.0  # no such field: the default
    for extra in page.extras:
        assert extra["explain"]["score"] == pytest.approx(extra["score"])
    with pytest.raises(ValidationError, match="only ranked feeds"):
        engine.read("user:carol", explain=True)


@pytest.mark.parametrize("store", ["sql"], indirect=True)
def test_author_diversity_limits_each_actor_per_page(make_engine: EngineFactory) -> None:
    engine = make_engine(**ranked("likes", diversity=1))
    for actor in ("a", "b", "c"):
        engine.follow("ranked:alice", f"user:{actor}")
    made = {actor: [post(engine, actor) for _ in range(3)] for actor in ("a", "b", "c")}
    for aid in made["a"]:
        for user in ("u1", "u2"):
            engine.reactions.add(aid, "like", user)
    pages = []
    cursor = None
    while True:
        page = engine.read("ranked:alice", 3, cursor)
        pages.append([x.actor for x in page.results])
        cursor = page.next
        if cursor is None:
            break
    assert [sorted(p) for p in pages] == [["a", "b", "c"]] * 3


@pytest.mark.parametrize("store", ["sql", "postgres"], indirect=True)
def test_affinity_and_velocity(make_engine: EngineFactory) -> None:
    engine = make_engine(**ranked("affinity + velocity / 100"))
    for actor in ("bob", "dave", "erin"):
        engine.follow("ranked:alice", f"user:{actor}")
    engine.follow("ranked:alice", "user:dave")
    old_bob = post(engine, "bob")
    bob, dave, erin = post(engine, "bob"), post(engine, "dave"), post(engine, "erin")
    engine.reactions.add(old_bob, "like", "alice")
    engine.reactions.add(old_bob, "comment", "alice")
    engine.reactions.add(erin, "like", "zed")
    page = engine.read("ranked:alice", explain=True)
    assert page.extras is not None
    scores = {a.id: e["explain"] for a, e in zip(page.results, page.extras, strict=True)}
    # alice reacted twice to bob's activities, and the feed follows user:bob (3).
    assert scores[bob]["affinity"] == pytest.approx(5 / 15)
    assert scores[dave]["affinity"] == pytest.approx(3 / 13)
    assert scores[erin]["velocity"] == 1.0
    assert [a.id for a in page.results][:2] == [old_bob, bob]


def test_a_bad_expression_is_refused_at_start_up_with_its_position() -> None:
    with pytest.raises(ValueError, match="unexpected '\\*' at position 8"):
        Settings(**ranked("likes + * 2"))
    with pytest.raises(ValueError, match="ranked groups only"):
        Settings(**ranked("likes", kind="flat"))
