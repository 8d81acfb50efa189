"""Reactions removed softly: gone from every read as a removal is, and brought
back exactly by a restore; removed for good after; bad restores refused with
nothing changed.

On SQLite and PostgreSQL, as the other reaction tests (reactions live in the
canonical store)."""

from __future__ import annotations

from typing import Any

import pytest

from concurrency import at_once
from conftest import EngineFactory
from tidings import Tidings, ValidationError
from tidings.core.events import EventType
from tidings.core.reactions import ReactionNotFound
from waiting import wait_until

pytestmark = pytest.mark.parametrize("store", ["sql", "postgres"], indirect=True)


def photo(engine: Tidings, n: int = 17) -> str:
    return engine.add_activity(
        "user:carol", {"actor": "carol", "verb": "post", "object": f"photo:{n}"}
    ).id


def seen(engine: Tidings, aid: str, ids: list[str]) -> dict[str, Any]:
    """Everything a reader can learn of the activity's reactions."""
    reactions = engine.reactions
    page = engine.read("timeline:reader", reactions="counts,latest,own", user="alice")
    notices = engine.read_aggregates("notification:carol").results
    return {
        "counts": reactions.counts([aid]),
        "page": [r.to_dict() for r in reactions.page(aid).results],
        "children": {i: [r.to_dict() for r in reactions.children(i).results] for i in ids},
        "alice": [r.to_dict() for r in reactions.by_user("alice").results],
        "extras": page.extras,
        # (a restore publishes them again as they were, under new ids)
        "notices": sorted(
            (a.actor, a.verb, a.time, a.foreign_id or "") for g in notices for a in g.activities
        ),
    }


def thread(engine: Tidings) -> tuple[str, str, str]:
    """An activity with a comment (notifying carol), a reply to it (notifying
    carol too) and a like of the reply, and a like of the activity."""
    engine.follow("timeline:reader", "user:carol")
    aid = photo(engine)
    comment = engine.reactions.add(aid, "comment", "alice", {"t": "hi"}, to=["notification:carol"])
    reply = engine.reactions.add(
        aid, "comment", "bob", parent=comment.id, to=["notification:carol"]
    )
    engine.reactions.add(aid, "like", "alice", parent=reply.id)
    engine.reactions.add(aid, "like", "dave")
    return aid, comment.id, reply.id


def test_a_soft_removal_reads_as_a_removal_and_a_restore_brings_all_back(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    aid, comment, reply = thread(engine)
    before = seen(engine, aid, [comment, reply])
    assert len(before["notices"]) == 2

    removed = engine.reactions.remove(comment, soft=True)
    assert removed.id == comment
    after = seen(engine, aid, [])
    assert after["counts"] == {aid: {"like": 1}}
    assert [r["user"] for r in after["page"]] == ["dave"]
    assert after["alice"] == []
    assert after["extras"][0]["own_reactions"] == {}
    assert set(after["extras"][0]["latest_reactions"]) == {"like"}
    assert after["notices"] == []
    for gone in (comment, reply):
        with pytest.raises(ReactionNotFound):
            engine.reactions.get(gone)
    assert engine.reactions.get_removed(comment).data == {"t": "hi"}

    with engine.live.subscribe("timeline:reader") as sub:
        restored = engine.reactions.restore(comment)
        events = [sub.get(timeout=5) for _ in range(3)]
    assert restored.to_dict() == before["page"][1]
    # (the notices go out as any activity does: through the runner)
    wait_until(lambda: seen(engine, aid, [comment, reply]) == before, what="all restored")
    assert [e.type for e in events if e is not None] == [EventType.REACTION_ADDED] * 3
    with pytest.raises(ReactionNotFound):
        engine.reactions.get_removed(comment)


def test_bad_soft_removals_and_restores_are_refused_and_change_nothing(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    aid, comment, reply = thread(engine)
    with pytest.raises(ReactionNotFound, match="is not removed"):
        engine.reactions.restore(comment)
    with pytest.raises(ReactionNotFound, match="does not exist"):
        engine.reactions.restore("0" * 32)
    with pytest.raises(ValidationError, match="not a reaction id"):
        engine.reactions.restore("not an id")
    engine.reactions.remove(reply, soft=True)
    engine.reactions.remove(comment, soft=True)
    with pytest.raises(ReactionNotFound, match="removed softly already"):
        engine.reactions.remove(comment, soft=True)
    # The reply went on its own first: its parent must come back before it.
    with pytest.raises(ReactionNotFound, match="restore that one first"):
        engine.reactions.restore(reply)
    like = engine.reactions.page(aid, "like").results[0]
    engine.reactions.remove(like.id, soft=True)
    engine.reactions.add(aid, "like", "dave")  # dave likes it again meanwhile
    before = seen(engine, aid, [])
    with pytest.raises(ValidationError, match="dave has added a 'like'"):
        engine.reactions.restore(like.id)
    assert seen(engine, aid, []) == before
    engine.reactions.restore(comment)
    engine.reactions.restore(reply)
    assert engine.reactions.counts([aid]) == {aid: {"comment": 1, "like": 1}}
    assert engine.reactions.get(reply).children_counts == {"like": 1}


def test_a_reaction_removed_softly_can_be_removed_for_good(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid, comment, reply = thread(engine)
    engine.reactions.remove(reply, soft=True)
    before = seen(engine, aid, [comment])
    assert engine.reactions.remove(reply).id == reply
    assert seen(engine, aid, [comment]) == before
    for gone in (reply,):
        with pytest.raises(ReactionNotFound, match="does not exist"):
            engine.reactions.restore(gone)
    # A parent removed for good takes the replies removed softly under it.
    other = engine.reactions.add(aid, "comment", "bob", parent=comment)
    engine.reactions.remove(other.id, soft=True)
    engine.reactions.remove(comment)
    with pytest.raises(ReactionNotFound):
        engine.reactions.get_removed(other.id)
    # And an activity removed takes every reaction removed softly.
    like = engine.reactions.page(aid, "like").results[0]
    engine.reactions.remove(like.id, soft=True)
    engine.remove_activity("user:carol", aid)
    with pytest.raises(ReactionNotFound):
        engine.reactions.get_removed(like.id)


def test_racing_restores_and_removals_leave_exact_counts(make_engine: EngineFactory) -> None:
    engine = make_engine()
    aid = photo(engine)
    for round_ in range(4):
        _race_restores_and_a_removal(engine, aid, f"u{round_}", soft=round_ % 2 == 0)


def _race_restores_and_a_removal(engine: Tidings, aid: str, user: str, *, soft: bool) -> None:
    """Two restores of one like removed softly and a removal of it, at once:
    whichever order they commit in, the counts are the live likes, and so
    are the notices once the runner has delivered and retracted them."""
    like = engine.reactions.add(aid, "like", user, to=["notification:carol"])
    engine.reactions.remove(like.id, soft=True)
    errors = at_once(
        [
            lambda: engine.reactions.restore(like.id),
            lambda: engine.reactions.restore(like.id),
            lambda: engine.reactions.remove(like.id, soft=soft),
        ],
        expected=(ReactionNotFound,),  # a loser finds it moved already
    )
    assert errors == []
    live = len(engine.reactions.page(aid, "like", limit=10).results)
    assert engine.reactions.counts([aid]).get(aid, {}).get("like", 0) == live

    def notices() -> int:
        return sum(len(g.activities) for g in engine.read_aggregates("notification:carol").results)

    wait_until(lambda: notices() == live, what=f"{live} notices")
