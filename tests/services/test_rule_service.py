"""Mutes, blocks and keyword filters, enforced where their owner reads:
flat and ranked pages (full pages, exact cursors), aggregates, events, follows."""

from __future__ import annotations

import contextlib
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from concurrency import at_once
from conftest import EngineFactory
from tidings import Tidings, ValidationError
from tidings.core.events import EventType
from tidings.core.rules import Blocked

pytestmark = pytest.mark.parametrize("store", ["sql", "redis", "postgres"], indirect=True)
_n = itertools.count()


def post(engine: Tidings, actor: str, **extra: Any) -> str:
    data = {"actor": actor, "verb": "post", "object": f"note:{next(_n)}", "extra": extra}
    return engine.add_activity(f"user:{actor}", data).id


def walk(engine: Tidings, feed: str, limit: int) -> list[list[str]]:
    pages = []
    cursor = None
    while True:
        page = engine.read(feed, limit, cursor)
        pages.append([a.id for a in page.results])
        cursor = page.next
        if cursor is None:
            return pages


def test_a_mute_hides_an_actor_from_full_pages_with_exact_cursors(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(rules_cache_seconds=0)
    for actor in ("bob", "carol"):
        engine.follow("timeline:alice", f"user:{actor}")
    # Newest first by id (ids of one millisecond sort in any order).
    made = sorted(
        ((post(engine, "bob" if i % 3 else "carol"), i % 3 != 0) for i in range(30)), reverse=True
    )
    engine.rules.mute("alice", "bob")
    pages = walk(engine, "timeline:alice", 4)
    shown = [i for p in pages for i in p]
    assert shown == [aid for aid, by_bob in made if not by_bob]
    assert all(len(p) == 4 for p in pages[:-1])
    assert engine.rules.mutes("alice")[0].target == "bob"
    assert engine.rules.unmute("alice", "bob")
    assert [i for p in walk(engine, "timeline:alice", 4) for i in p] == [a for a, _ in made]
    # Other readers are not affected.
    engine.follow("timeline:dave", "user:bob")
    engine.rules.mute("alice", "bob")
    assert len(engine.read("timeline:dave", 100).results) == 20


def test_a_mute_can_expire_and_spare_notifications(make_engine: EngineFactory) -> None:
    engine = make_engine(rules_cache_seconds=0)
    now = datetime.now(UTC)
    engine.clock.now = lambda: now
    engine.follow("timeline:alice", "user:bob")
    aid = post(engine, "bob")
    engine.add_activity(
        "user:bob",
        {"actor": "bob", "verb": "like", "object": "photo:1", "to": ["notification:alice"]},
    )
    engine.rules.mute("alice", "bob", duration_s=60, notifications=False)
    assert engine.read("timeline:alice").results == []
    assert len(engine.read_aggregates("notification:alice").results) == 1
    assert engine.notification_counts("notification:alice") == (1, 1)
    engine.rules.mute("alice", "bob", duration_s=60)
    page = engine.read_aggregates("notification:alice")
    assert page.results == []
    assert (page.unseen, page.unread) == (0, 0)
    assert engine.notification_counts("notification:alice") == (0, 0)
    engine.clock.now = lambda: now + timedelta(seconds=61)
    assert aid in [a.id for a in engine.read("timeline:alice").results]
    assert engine.rules.mutes("alice") == []


def test_a_block_ends_follows_both_ways_and_refuses_new_ones(make_engine: EngineFactory) -> None:
    engine = make_engine(rules_cache_seconds=0)
    engine.follow("timeline:alice", "user:bob")
    engine.follow("timeline:bob", "user:alice")
    post(engine, "bob")
    post(engine, "alice")
    engine.rules.block("alice", "bob")
    assert engine.following("timeline:alice").results == []
    assert engine.following("timeline:bob").results == []
    assert engine.read("timeline:bob").results == []  # what the follow delivered is gone
    with pytest.raises(Blocked, match="one blocks the other"):
        engine.follow("timeline:bob", "user:alice")
    with pytest.raises(Blocked):
        engine.follow("timeline:alice", "user:bob")
    assert engine.rules.blocks("alice") == ["bob"]
    with pytest.raises(ValidationError, match="themselves"):
        engine.rules.block("alice", "alice")
    assert engine.rules.unblock("alice", "bob")
    assert engine.follow("timeline:bob", "user:alice")


@pytest.mark.parametrize("rule", ["mute", "block"])
def test_muting_or_blocking_oneself_is_refused_alike(make_engine: EngineFactory, rule: str) -> None:
    engine = make_engine(rules_cache_seconds=0)
    engine.follow("timeline:alice", "user:alice")
    mine = post(engine, "alice")
    with pytest.raises(
        ValidationError, match=f"^target: a user cannot {rule} themselves$"
    ) as caught:
        getattr(engine.rules, rule)("alice", "alice")
    assert caught.value.field == "target"
    assert (engine.rules.mutes("alice"), engine.rules.blocks("alice")) == ([], [])
    assert [a.id for a in engine.read("timeline:alice").results] == [mine]


@pytest.mark.parametrize("rule", ["mute", "block"])
@pytest.mark.parametrize("target", ["*", "bob/../x", "", "a b", "user:bob", "x" * 256, 7])
def test_rule_targets_are_user_ids(make_engine: EngineFactory, rule: str, target: object) -> None:
    engine = make_engine(rules_cache_seconds=0)
    with pytest.raises(ValidationError, match="the key of the user's feeds") as caught:
        getattr(engine.rules, rule)("alice", target)
    assert caught.value.field == "target"
    assert (engine.rules.mutes("alice"), engine.rules.blocks("alice")) == ([], [])
    # Removing is not refused for what cannot be held: there is nothing to remove.
    if isinstance(target, str) and target:
        assert not getattr(engine.rules, f"un{rule}")("alice", target[:255])


def test_keyword_filters_by_context_word_and_expiry(make_engine: EngineFactory) -> None:
    engine = make_engine(rules_cache_seconds=0)
    now = datetime.now(UTC)
    engine.clock.now = lambda: now
    engine.follow("timeline:alice", "user:bob")
    spoiler = post(engine, "bob", text="The Finale was great")
    partial = post(engine, "bob", text="finalessss")
    plain = post(engine, "bob", text="nothing here")
    made = engine.rules.add_filter("alice", ["finale"], contexts=["timeline"], duration_s=60)
    # (One clock time: ids of one millisecond, so order is not compared.)
    assert {a.id for a in engine.read("timeline:alice").results} == {plain, partial}
    engine.rules.add_filter("alice", ["NALE"], whole_word=False, contexts=["notification"])
    assert len(engine.read("timeline:alice").results) == 2  # not a timeline filter
    assert made.id in {f.id for f in engine.rules.filters("alice")}
    engine.clock.now = lambda: now + timedelta(seconds=61)
    assert {a.id for a in engine.read("timeline:alice").results} == {plain, partial, spoiler}
    assert engine.rules.delete_filter("alice", made.id)
    assert not engine.rules.delete_filter("alice", made.id)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ({"keywords": []}, "keywords"),
        ({"keywords": ["x" * 101]}, "keywords.0"),
        ({"keywords": ["ok"], "contexts": ["home"]}, "contexts"),
        ({"keywords": ["ok"], "duration_s": 0}, "duration_s"),
        ({"keywords": "ok"}, "keywords"),
    ],
)
def test_bad_filters_are_refused(
    make_engine: EngineFactory, call: dict[str, Any], field: str
) -> None:
    engine = make_engine()
    with pytest.raises(ValidationError) as caught:
        engine.rules.add_filter("alice", **call)
    assert caught.value.field == field
    assert engine.rules.filters("alice") == []


def test_ranked_feeds_leave_hidden_activities_out(make_engine: EngineFactory) -> None:
    engine = make_engine(
        rules_cache_seconds=0, groups={"ranked": {"kind": "ranked", "ranking": "likes"}}
    )
    for actor in ("bob", "carol"):
        engine.follow("ranked:alice", f"user:{actor}")
    bobs = [post(engine, "bob") for _ in range(3)]
    carols = [post(engine, "carol") for _ in range(3)]
    engine.reactions.add(bobs[0], "like", "zed")
    engine.rules.mute("alice", "bob")
    shown = [a.id for a in engine.read("ranked:alice", 10).results]
    assert sorted(shown) == sorted(carols)


def test_events_of_muted_actors_are_not_sent(make_engine: EngineFactory) -> None:
    engine = make_engine(rules_cache_seconds=0)
    for actor in ("bob", "carol"):
        engine.follow("timeline:alice", f"user:{actor}")
    engine.rules.mute("alice", "bob")
    with engine.live.subscribe("timeline:alice") as sub:
        post(engine, "bob")
        carol = post(engine, "carol")
        event = sub.get(timeout=5)
        assert event is not None
        assert event.type == EventType.ACTIVITY_ADDED
        assert event.data["id"] == carol
        assert sub.get(timeout=0.3) is None


def test_pages_of_aggregates_are_refilled_past_hidden_ones(make_engine: EngineFactory) -> None:
    engine = make_engine(rules_cache_seconds=0)
    for n in range(8):
        actor = "bob" if n % 2 else "carol"
        data = {
            "actor": actor,
            "verb": f"v{n}",
            "object": f"photo:{n}",
            "to": ["notification:alice"],
        }
        engine.add_activity(f"user:{actor}", data)
    engine.rules.mute("alice", "bob")
    shown: list[str] = []
    cursor = None
    while True:
        page = engine.read_aggregates("notification:alice", 3, cursor)
        assert len(page.results) == 3 or page.next is None
        shown += [g.key for g in page.results]
        cursor = page.next
        if cursor is None:
            break
    assert len(shown) == 4
    assert len(set(shown)) == 4
    assert all(g.startswith(("v0", "v2", "v4", "v6")) for g in shown)


def test_long_runs_of_hidden_entries_still_give_full_exact_pages(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(rules_cache_seconds=0)
    for actor in ("bob", "carol"):
        engine.follow("timeline:alice", f"user:{actor}")
    shown_first = [post(engine, "carol") for _ in range(3)]
    hidden = [post(engine, "bob") for _ in range(150)]
    shown_last = [post(engine, "carol") for _ in range(4)]
    engine.rules.mute("alice", "bob")
    pages = walk(engine, "timeline:alice", 5)
    assert [len(p) for p in pages] == [5, 2]
    # Newest first by id (ids of one millisecond sort in any order).
    assert [i for p in pages for i in p] == sorted(shown_first + shown_last, reverse=True)
    assert not set(hidden) & {i for p in pages for i in p}


def test_a_follow_racing_a_block_does_not_survive_it(make_engine: EngineFactory) -> None:
    engine = make_engine(rules_cache_seconds=0)
    for n in range(12):
        _race_follow_and_block(engine, f"a{n}", f"b{n}")


def _race_follow_and_block(engine: Tidings, blocker: str, blocked: str) -> None:
    def follow() -> None:
        with contextlib.suppress(Blocked):  # the block came first
            engine.follow(f"timeline:{blocked}", f"user:{blocker}")

    errors = at_once([follow, lambda: engine.rules.block(blocker, blocked)])
    assert errors == []
    assert engine.following(f"timeline:{blocked}").results == []


def test_aggregate_events_show_the_owners_view(make_engine: EngineFactory) -> None:
    engine = make_engine(rules_cache_seconds=0)
    engine.rules.mute("alice", "bob")

    def like(actor: str) -> None:
        data = {"actor": actor, "verb": "like", "object": "photo:1", "to": ["notification:alice"]}
        engine.add_activity(f"user:{actor}", data)

    like("carol")
    with engine.live.subscribe("notification:alice") as sub:
        like("bob")  # joins carol's aggregate: it moves, without bob in it
        events = [sub.get(timeout=5) for _ in range(2)]
    aggregates = [e.data for e in events if e is not None and e.type == EventType.AGGREGATE_UPDATED]
    assert [[a["actor"] for a in g["activities"]] for g in aggregates] == [["carol"]]
    assert [g["added"] for g in aggregates] == [[]]  # bob's like, hidden, is not named
