"""Reactions through the engine: likes held once, comments and replies, exact
counts and cursors, notifications, removal with the activity, page fields.

Reactions live in the canonical store, so these run on SQLite and PostgreSQL
(the Redis store keeps its canonical data in SQLite too)."""

from __future__ import annotations

import random
import threading
from typing import Any

import orjson
import pytest

from concurrency import at_once
from conftest import EngineFactory
from tidings import ActivityNotFound, Tidings, ValidationError
from tidings.core.events import EventType
from tidings.core.reactions import MAX_DATA_BYTES, ReactionNotFound

pytestmark = pytest.mark.parametrize("store", ["sql", "postgres"], indirect=True)


def photo(engine: Tidings, actor: str = "carol", n: int = 17) -> str:
    return engine.add_activity(
        f"user:{actor}", {"actor": actor, "verb": "post", "object": f"photo:{n}"}
    ).id


def test_a_like_is_held_once_per_user(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    first, created = engine.add_reaction(aid, "like", "alice")
    again, created_again = engine.add_reaction(aid, "like", "alice", {"ignored": True})
    engine.react(aid, "like", "bob")
    assert (created, created_again) == (True, False)
    assert again.id == first.id
    assert again.data == {}
    assert engine.reaction_counts([aid]) == {aid: {"like": 2}}


def test_comments_are_not_unique_and_replies_nest_three_deep(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    c1 = engine.react(aid, "comment", "alice", {"text": "nice"})
    engine.react(aid, "comment", "alice", {"text": "really"})
    reply = engine.react(aid, "comment", "bob", {"text": "thanks"}, parent=c1.id)
    deepest = engine.react(aid, "like", "carol", parent=reply.id)
    assert (c1.depth, reply.depth, deepest.depth) == (1, 2, 3)
    with pytest.raises(ValidationError, match="at most 3 deep"):
        engine.react(aid, "comment", "dave", parent=deepest.id)
    # Counts of the activity count its own reactions; children are counted on their parent.
    assert engine.reaction_counts([aid]) == {aid: {"comment": 2}}
    assert engine.get_reaction(c1.id).children_counts == {"comment": 1}
    children = engine.reaction_children(c1.id)
    assert [r.id for r in children.results] == [reply.id]
    assert children.results[0].children_counts == {"like": 1}


def test_a_parent_must_answer_the_same_activity(make_engine: EngineFactory) -> None:
    engine = make_engine()
    a, b = photo(engine, n=1), photo(engine, n=2)
    comment = engine.react(a, "comment", "alice")
    with pytest.raises(ValidationError, match="answers another activity"):
        engine.react(b, "comment", "bob", parent=comment.id)
    with pytest.raises(ReactionNotFound):
        engine.react(a, "comment", "bob", parent="0" * 32)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"kind": "Like"}, "kind"),
        ({"kind": ""}, "kind"),
        ({"kind": "x" * 65}, "kind"),
        ({"user": ""}, "user"),
        ({"user": "  "}, "user"),
        ({"user": "u" * 256}, "user"),
        ({"data": {"t": "x" * MAX_DATA_BYTES}}, "data"),
        ({"data": [1]}, "data"),
        ({"data": {"n": float("nan")}}, "data.n"),
        ({"to": ["nofeed"]}, "to.0"),
        ({"to": ["nope:x"]}, "to.0"),
        ({"to": [f"notification:u{i}" for i in range(101)]}, "to"),
        ({"parent": "not-an-id"}, "parent"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_bad_reactions_are_refused_and_nothing_is_written(
    make_engine: EngineFactory, args: dict[str, Any], field: str
) -> None:
    engine = make_engine()
    aid = photo(engine)
    call: dict[str, Any] = {"kind": "comment", "user": "alice", **args}
    with pytest.raises(ValidationError) as caught:
        engine.add_reaction(aid, call.pop("kind"), call.pop("user"), **call)
    assert caught.value.field == field
    assert engine.reaction_counts([aid]) == {}
    assert engine.reactions(aid).results == []


def test_a_reaction_to_a_missing_activity_is_not_found(make_engine: EngineFactory) -> None:
    engine = make_engine()
    with pytest.raises(ActivityNotFound):
        engine.react("0" * 32, "like", "alice")
    with pytest.raises(ValidationError, match="not an activity id"):
        engine.react("nope", "like", "alice")


def test_pages_of_reactions_are_exact_while_more_arrive(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    made = [engine.react(aid, "comment", f"u{i}", {"i": i}).id for i in range(7)]
    engine.react(aid, "like", "u0")
    first = engine.reactions(aid, "comment", limit=3)
    assert [r.id for r in first.results] == made[::-1][:3]
    engine.react(aid, "comment", "late")  # newer: not on a later page
    seen = [r.id for r in first.results]
    cursor = first.next
    while cursor is not None:
        page = engine.reactions(aid, "comment", limit=3, cursor=cursor)
        seen += [r.id for r in page.results]
        cursor = page.next
    assert seen == made[::-1]
    every = engine.reactions(aid, limit=100).results
    assert [r.kind for r in every].count("like") == 1
    assert len(every) == 9


def test_removing_a_reaction_removes_its_children_and_their_counts(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    aid = photo(engine)
    comment = engine.react(aid, "comment", "alice")
    reply = engine.react(aid, "comment", "bob", parent=comment.id)
    engine.react(aid, "like", "carol", parent=reply.id)
    engine.react(aid, "like", "dave")
    engine.remove_reaction(comment.id)
    assert engine.reaction_counts([aid]) == {aid: {"like": 1}}
    for gone in (comment.id, reply.id):
        with pytest.raises(ReactionNotFound):
            engine.get_reaction(gone)
    with pytest.raises(ReactionNotFound):
        engine.remove_reaction(comment.id)


def test_changing_data(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    comment = engine.react(aid, "comment", "alice", {"text": "tpyo"})
    changed = engine.update_reaction(comment.id, {"text": "typo"})
    assert changed.data == {"text": "typo"}
    assert changed.updated_us >= comment.updated_us
    assert engine.get_reaction(comment.id).data == {"text": "typo"}
    with pytest.raises(ValidationError):
        engine.update_reaction(comment.id, {"t": "x" * MAX_DATA_BYTES})
    with pytest.raises(ReactionNotFound):
        engine.update_reaction("0" * 32, {})


def test_removing_the_activity_removes_its_reactions(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    comment = engine.react(aid, "comment", "alice", to=["notification:carol"])
    engine.react(aid, "like", "bob")
    engine.remove_activity("user:carol", aid)
    assert engine.reaction_counts([aid]) == {}
    with pytest.raises(ReactionNotFound):
        engine.get_reaction(comment.id)
    # The notification it made went with it.
    assert engine.read_groups("notification:carol").results == []
    # A like again (by the same user) would be a new reaction, had the activity come back.
    with pytest.raises(ActivityNotFound):
        engine.react(aid, "like", "bob")


def test_reactions_with_to_notify_and_group_like_activities(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    alice = engine.react(aid, "like", "alice", to=["notification:carol"])
    engine.react(aid, "like", "bob", to=["notification:carol"])
    engine.react(aid, "like", "bob", to=["notification:carol"])  # held: no second notice
    page = engine.read_groups("notification:carol")
    assert len(page.results) == 1
    group = page.results[0]
    assert group.activity_count == 2
    assert group.verb == "like"
    assert {a.actor for a in group.activities} == {"alice", "bob"}
    assert {a.object for a in group.activities} == {"photo:17"}
    assert page.unseen == 1
    engine.remove_reaction(alice.id)
    group = engine.read_groups("notification:carol").results[0]
    assert [a.actor for a in group.activities] == ["bob"]


def test_eight_writers_liking_at_once_count_exactly_the_distinct_users(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    aid = photo(engine)
    users = [f"u{i}" for i in range(30)]
    chosen: list[set[str]] = [set() for _ in range(8)]
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        rng = random.Random(n)
        try:
            for _ in range(100):
                user = rng.choice(users)
                chosen[n].add(user)
                engine.react(aid, "like", user)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    distinct = set().union(*chosen)
    assert engine.reaction_counts([aid]) == {aid: {"like": len(distinct)}}
    assert len(engine.reactions(aid, "like", limit=100).results) == len(distinct)


def test_pages_carry_counts_latest_and_own_reactions(make_engine: EngineFactory) -> None:
    engine = make_engine(latest_reactions=2)
    engine.follow("timeline:alice", "user:carol")
    a1, a2 = photo(engine, n=1), photo(engine, n=2)
    for user in ("alice", "bob", "dave"):
        engine.react(a1, "like", user)
    comment = engine.react(a1, "comment", "bob", {"text": "hi"})
    page = engine.read("timeline:alice", reactions="counts,latest,own")
    assert [a.id for a in page.results] == [a2, a1]
    assert page.extras is not None
    none, some = page.extras
    assert none == {"reaction_counts": {}, "latest_reactions": {}, "own_reactions": {}}
    assert some["reaction_counts"] == {"like": 3, "comment": 1}
    assert [r["user"] for r in some["latest_reactions"]["like"]] == ["dave", "bob"]
    assert [r["id"] for r in some["latest_reactions"]["comment"]] == [comment.id]
    # Built from the stored row, the same JSON as the reaction read alone.
    assert some["latest_reactions"]["comment"][0] == orjson.loads(comment.to_json())
    assert [r["user"] for r in some["own_reactions"]["like"]] == ["alice"]
    # Another reader's own; and only what is asked for.
    other = engine.read("timeline:alice", reactions=["own"], user="bob").extras
    assert other is not None
    assert set(other[1]) == {"own_reactions"}
    assert set(other[1]["own_reactions"]) == {"like", "comment"}
    with pytest.raises(ValidationError, match="allowed: counts, latest, own"):
        engine.read("timeline:alice", reactions="counts,likes")
    # Without it, nothing is added.
    assert engine.read("timeline:alice").extras is None


def test_reaction_events_reach_the_feeds_holding_the_activity(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    engine.follow("timeline:alice", "user:carol")
    aid = photo(engine)
    with engine.subscribe("timeline:alice") as sub:
        like = engine.react(aid, "like", "bob")
        engine.remove_reaction(like.id)
        events = [e for e in (sub.get(timeout=5) for _ in range(2)) if e is not None]
    assert [e.type for e in events] == [EventType.REACTION_ADDED, EventType.REACTION_REMOVED]
    assert events[0].data["id"] == like.id
    assert events[0].data["reaction_counts"] == {"like": 1}
    assert events[1].data["reaction_counts"] == {}


def test_the_newest_reactions_kept_match_the_reactions_after_any_changes(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(latest_reactions=25)
    engine.follow("timeline:reader", "user:carol")
    aids = [photo(engine, n=n) for n in range(3)]
    rng = random.Random(5)
    held: list[str] = []
    for step in range(150):
        choice = rng.random()
        try:
            if choice < 0.55 or not held:
                parent = rng.choice(held) if held and rng.random() < 0.2 else None
                aid = engine.get_reaction(parent).activity_id if parent else rng.choice(aids)
                kind = rng.choice(["like", "comment", "clap"])
                made = engine.react(aid, kind, f"u{rng.randrange(6)}", {"s": step}, parent=parent)
                held.append(made.id)
            elif choice < 0.8:
                engine.remove_reaction(held.pop(rng.randrange(len(held))))
            else:
                engine.update_reaction(rng.choice(held), {"changed": step})
        except ReactionNotFound:
            pass  # went with its parent
        except ValidationError as exc:
            if "deep" not in str(exc):
                raise
    page = engine.read("timeline:reader", 10, reactions="latest,counts")
    assert page.extras is not None
    for activity, extra in zip(page.results, page.extras, strict=True):
        for kind, shown in extra["latest_reactions"].items():
            expected = engine.reactions(activity.id, kind, limit=25).results
            assert shown == [orjson.loads(r.to_json()) for r in expected]
        kinds = {k for k, n in extra["reaction_counts"].items() if n}
        assert set(extra["latest_reactions"]) == kinds


def test_concurrent_removals_of_one_reaction_count_it_once(make_engine: EngineFactory) -> None:
    engine = make_engine()
    for round_ in range(5):
        _race_removals_and_a_reply(engine, round_)


def _race_removals_and_a_reply(engine: Tidings, round_: int) -> None:
    """Two removals of one like (which notified a feed) and a reply to a
    comment, at once: the like is counted out once, the reply counts."""
    aid = photo(engine, n=round_)
    engine.react(aid, "like", "keeper")
    comment = engine.react(aid, "comment", "alice", to=[f"notification:carol{round_}"])
    like = engine.react(aid, "like", "alice", to=[f"notification:carol{round_}"])
    errors = at_once(
        [
            lambda: engine.remove_reaction(like.id),
            lambda: engine.remove_reaction(like.id),
            lambda: engine.react(aid, "comment", "bob", parent=comment.id),
        ],
        expected=(ReactionNotFound,),  # the other removal won
    )
    assert errors == []
    assert engine.reaction_counts([aid]) == {aid: {"like": 1, "comment": 1}}
    assert len(engine.reactions(aid, "like").results) == 1
    assert engine.get_reaction(comment.id).children_counts == {"comment": 1}
