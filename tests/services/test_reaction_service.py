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
    first, created = engine.reactions.put(aid, "like", "alice")
    again, created_again = engine.reactions.put(aid, "like", "alice", {"ignored": True})
    engine.reactions.add(aid, "like", "bob")
    assert (created, created_again) == (True, False)
    assert again.id == first.id
    assert again.data == {}
    assert engine.reactions.counts([aid]) == {aid: {"like": 2}}


def test_comments_are_not_unique_and_replies_nest_three_deep(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    c1 = engine.reactions.add(aid, "comment", "alice", {"text": "nice"})
    engine.reactions.add(aid, "comment", "alice", {"text": "really"})
    reply = engine.reactions.add(aid, "comment", "bob", {"text": "thanks"}, parent=c1.id)
    deepest = engine.reactions.add(aid, "like", "carol", parent=reply.id)
    assert (c1.depth, reply.depth, deepest.depth) == (1, 2, 3)
    with pytest.raises(ValidationError, match="at most 3 deep"):
        engine.reactions.add(aid, "comment", "dave", parent=deepest.id)
    # Counts of the activity count its own reactions; children are counted on their parent.
    assert engine.reactions.counts([aid]) == {aid: {"comment": 2}}
    assert engine.reactions.get(c1.id).children_counts == {"comment": 1}
    children = engine.reactions.children(c1.id)
    assert [r.id for r in children.results] == [reply.id]
    assert children.results[0].children_counts == {"like": 1}


def test_a_parent_must_answer_the_same_activity(make_engine: EngineFactory) -> None:
    engine = make_engine()
    a, b = photo(engine, n=1), photo(engine, n=2)
    comment = engine.reactions.add(a, "comment", "alice")
    with pytest.raises(ValidationError, match="answers another activity"):
        engine.reactions.add(b, "comment", "bob", parent=comment.id)
    with pytest.raises(ReactionNotFound):
        engine.reactions.add(a, "comment", "bob", parent="0" * 32)


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
        engine.reactions.put(aid, call.pop("kind"), call.pop("user"), **call)
    assert caught.value.field == field
    assert engine.reactions.counts([aid]) == {}
    assert engine.reactions.page(aid).results == []


def test_a_reaction_to_a_missing_activity_is_not_found(make_engine: EngineFactory) -> None:
    engine = make_engine()
    with pytest.raises(ActivityNotFound):
        engine.reactions.add("0" * 32, "like", "alice")
    with pytest.raises(ValidationError, match="not an activity id"):
        engine.reactions.add("nope", "like", "alice")


def test_pages_of_reactions_are_exact_while_more_arrive(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    made = [engine.reactions.add(aid, "comment", f"u{i}", {"i": i}).id for i in range(7)]
    engine.reactions.add(aid, "like", "u0")
    first = engine.reactions.page(aid, "comment", limit=3)
    assert [r.id for r in first.results] == made[::-1][:3]
    engine.reactions.add(aid, "comment", "late")  # newer: not on a later page
    seen = [r.id for r in first.results]
    cursor = first.next
    while cursor is not None:
        page = engine.reactions.page(aid, "comment", limit=3, cursor=cursor)
        seen += [r.id for r in page.results]
        cursor = page.next
    assert seen == made[::-1]
    every = engine.reactions.page(aid, limit=100).results
    assert [r.kind for r in every].count("like") == 1
    assert len(every) == 9


def test_removing_a_reaction_removes_its_children_and_their_counts(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    aid = photo(engine)
    comment = engine.reactions.add(aid, "comment", "alice")
    reply = engine.reactions.add(aid, "comment", "bob", parent=comment.id)
    engine.reactions.add(aid, "like", "carol", parent=reply.id)
    engine.reactions.add(aid, "like", "dave")
    engine.reactions.remove(comment.id)
    assert engine.reactions.counts([aid]) == {aid: {"like": 1}}
    for gone in (comment.id, reply.id):
        with pytest.raises(ReactionNotFound):
            engine.reactions.get(gone)
    with pytest.raises(ReactionNotFound):
        engine.reactions.remove(comment.id)


def test_changing_data(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    comment = engine.reactions.add(aid, "comment", "alice", {"text": "tpyo"})
    changed = engine.reactions.update(comment.id, {"text": "typo"})
    assert changed.data == {"text": "typo"}
    assert changed.updated_us >= comment.updated_us
    assert engine.reactions.get(comment.id).data == {"text": "typo"}
    with pytest.raises(ValidationError):
        engine.reactions.update(comment.id, {"t": "x" * MAX_DATA_BYTES})
    with pytest.raises(ReactionNotFound):
        engine.reactions.update("0" * 32, {})


def test_removing_the_activity_removes_its_reactions(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    comment = engine.reactions.add(aid, "comment", "alice", to=["notification:carol"])
    engine.reactions.add(aid, "like", "bob")
    engine.remove_activity("user:carol", aid)
    assert engine.reactions.counts([aid]) == {}
    with pytest.raises(ReactionNotFound):
        engine.reactions.get(comment.id)
    # The notification it made went with it.
    assert engine.read_aggregates("notification:carol").results == []
    # A like again (by the same user) would be a new reaction, had the activity come back.
    with pytest.raises(ActivityNotFound):
        engine.reactions.add(aid, "like", "bob")


def test_reactions_with_to_notify_and_aggregate_like_activities(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    alice = engine.reactions.add(aid, "like", "alice", to=["notification:carol"])
    engine.reactions.add(aid, "like", "bob", to=["notification:carol"])
    engine.reactions.add(aid, "like", "bob", to=["notification:carol"])  # held: no second notice
    page = engine.read_aggregates("notification:carol")
    assert len(page.results) == 1
    aggregate = page.results[0]
    assert aggregate.activity_count == 2
    assert aggregate.verb == "like"
    assert {a.actor for a in aggregate.activities} == {"alice", "bob"}
    assert {a.object for a in aggregate.activities} == {"photo:17"}
    assert page.unseen == 1
    engine.reactions.remove(alice.id)
    aggregate = engine.read_aggregates("notification:carol").results[0]
    assert [a.actor for a in aggregate.activities] == ["bob"]


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
                engine.reactions.add(aid, "like", user)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    distinct = set().union(*chosen)
    assert engine.reactions.counts([aid]) == {aid: {"like": len(distinct)}}
    assert len(engine.reactions.page(aid, "like", limit=100).results) == len(distinct)


def test_pages_carry_counts_latest_and_own_reactions(make_engine: EngineFactory) -> None:
    engine = make_engine(latest_reactions=2)
    engine.follow("timeline:alice", "user:carol")
    a1, a2 = photo(engine, n=1), photo(engine, n=2)
    for user in ("alice", "bob", "dave"):
        engine.reactions.add(a1, "like", user)
    comment = engine.reactions.add(a1, "comment", "bob", {"text": "hi"})
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
    with engine.live.subscribe("timeline:alice") as sub:
        like = engine.reactions.add(aid, "like", "bob")
        engine.reactions.remove(like.id)
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
                aid = engine.reactions.get(parent).activity_id if parent else rng.choice(aids)
                kind = rng.choice(["like", "comment", "clap"])
                made = engine.reactions.add(
                    aid, kind, f"u{rng.randrange(6)}", {"s": step}, parent=parent
                )
                held.append(made.id)
            elif choice < 0.8:
                engine.reactions.remove(held.pop(rng.randrange(len(held))))
            else:
                engine.reactions.update(rng.choice(held), {"changed": step})
        except ReactionNotFound:
            pass  # went with its parent
        except ValidationError as exc:
            if "deep" not in str(exc):
                raise
    page = engine.read("timeline:reader", 10, reactions="latest,counts")
    assert page.extras is not None
    for activity, extra in zip(page.results, page.extras, strict=True):
        for kind, shown in extra["latest_reactions"].items():
            expected = engine.reactions.page(activity.id, kind, limit=25).results
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
    engine.reactions.add(aid, "like", "keeper")
    comment = engine.reactions.add(aid, "comment", "alice", to=[f"notification:carol{round_}"])
    like = engine.reactions.add(aid, "like", "alice", to=[f"notification:carol{round_}"])
    errors = at_once(
        [
            lambda: engine.reactions.remove(like.id),
            lambda: engine.reactions.remove(like.id),
            lambda: engine.reactions.add(aid, "comment", "bob", parent=comment.id),
        ],
        expected=(ReactionNotFound,),  # the other removal won
    )
    assert errors == []
    assert engine.reactions.counts([aid]) == {aid: {"like": 1, "comment": 1}}
    assert len(engine.reactions.page(aid, "like").results) == 1
    assert engine.reactions.get(comment.id).children_counts == {"comment": 1}


def test_notices_carry_extra_fields_and_pages_start_below_an_id(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    aid = photo(engine)
    extra = {"note": "alice liked it", "reaction": "not this one"}
    like = engine.reactions.add(aid, "like", "alice", to=["timeline:alice"], notice_extra=extra)
    [notice] = engine.read("timeline:alice").results
    # Its own fields keep their values: they link the notice to the reaction.
    assert notice.extra == {"note": "alice liked it", "reaction": like.id, "activity_id": aid}
    with pytest.raises(ValidationError, match="notice_extra"):
        engine.reactions.add(aid, "comment", "bob", notice_extra={"x": "y" * MAX_DATA_BYTES})
    assert engine.reactions.counts([aid]) == {aid: {"like": 1}}  # (nothing written)

    comments = [engine.reactions.add(aid, "comment", f"u{i}").id for i in range(3)]
    below = engine.reactions.page(aid, "comment", before=comments[2])
    assert [r.id for r in below.results] == comments[1::-1]
    replies = [engine.reactions.add(aid, "reply", "bob", parent=comments[0]).id for _ in range(2)]
    assert [r.id for r in engine.reactions.children(comments[0], before=replies[1]).results] == [
        replies[0]
    ]
    with pytest.raises(ValidationError, match="not both"):
        engine.reactions.page(aid, before=comments[2], cursor="anything")


def test_a_users_reactions_are_paged_across_activities(make_engine: EngineFactory) -> None:
    engine = make_engine()
    first, second = photo(engine, n=1), photo(engine, n=2)
    like = engine.reactions.add(first, "like", "alice")
    comment = engine.reactions.add(second, "comment", "alice")
    reply = engine.reactions.add(second, "comment", "alice", parent=comment.id)
    engine.reactions.add(first, "like", "bob")
    page = engine.reactions.by_user("alice", limit=2)
    assert [r.id for r in page.results] == [reply.id, comment.id]
    assert [r.id for r in engine.reactions.by_user("alice", cursor=page.next).results] == [like.id]
    assert [r.id for r in engine.reactions.by_user("alice", "like").results] == [like.id]
    assert [r.id for r in engine.reactions.by_user("alice", before=comment.id).results] == [like.id]
    with pytest.raises(ValidationError, match="cursor"):
        engine.reactions.by_user("bob", cursor=page.next)  # (another user's cursor)
