"""Rebuilding timelines from the canonical store (`Tidings.rebuild`, `tidings rebuild`)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import EngineFactory
from servers import RedisServer
from tidings import Activity, Tidings, ValidationError

T0 = datetime(2026, 1, 1, tzinfo=UTC)
_tick = itertools.count(1)


def post(engine: Tidings, feed: str, verb: str = "post", **extra: Any) -> Activity:
    n = next(_tick)
    data: dict[str, Any] = {
        "actor": feed.split(":")[1],
        "verb": verb,
        "object": f"photo:{n % 3}",
        "time": T0 + timedelta(minutes=n),
    }
    data.update(extra)
    return engine.add_activity(feed, data)


FLAT = ["user:bob", "user:carol", "timeline:alice", "timeline:erin"]
AGGREGATED = ["timeline_aggregated:alice", "notification:dave"]


def contents(engine: Tidings) -> dict[str, Any]:
    """What the stores hold for every feed of the scenario, seen/read state included."""
    out: dict[str, Any] = {}
    for feed in FLAT:
        cap = engine.deliverer.cap(feed.split(":")[0])
        out[feed] = engine.timeline.page(feed, limit=1000, before=None, cap=cap)
    for feed in AGGREGATED:
        aggregate_cap = engine.deliverer.aggregate_cap(feed.split(":")[0])
        page = engine.aggregates.page(
            feed, limit=1000, snapshot=None, after=None, cap=aggregate_cap
        )
        out[feed] = [
            (
                g.key,
                g.activity_ids,
                g.activity_count,
                g.actor_count,
                g.oldest,
                g.newest,
                g.is_seen,
                g.is_read,
            )
            for g in page.aggregates
        ]
    return out


class Ticking:
    """A clock one millisecond later at every call, from T0 (before every
    activity's own time, so every follow is older than every activity)."""

    def __init__(self) -> None:
        self.calls = itertools.count()

    def __call__(self) -> datetime:
        return T0 + timedelta(milliseconds=next(self.calls))


def scenario(make_engine: EngineFactory) -> Tidings:
    """Follows (one undone), a capped timeline, `to` notifications and a removal;
    notification aggregates marked read, seen, and seen then joined again."""
    feeds = make_engine(groups={"timeline": {"max_length": 6}})
    feeds.clock.now = Ticking()
    feeds.follow_many(
        [
            ("timeline:alice", "user:bob"),
            ("timeline:alice", "user:carol"),
            ("timeline_aggregated:alice", "user:bob"),
            ("timeline_aggregated:alice", "user:carol"),
            ("timeline:erin", "user:carol"),
        ]
    )
    gone = post(feeds, "user:bob", verb="like", to=["notification:dave"])
    feeds.remove_activity("user:bob", gone.id)
    for i in range(5):
        post(feeds, "user:bob", verb="like", to=["notification:dave"])
        post(feeds, "user:carol", to=["notification:dave"] if i % 2 else [])
    feeds.unfollow("timeline:erin", "user:carol")
    keys = [g.key for g in feeds.read_aggregates("notification:dave").results]
    assert len(keys) >= 2
    feeds.mark_read("notification:dave", keys[-1:])
    feeds.mark_seen("notification:dave")
    # A like joining a seen aggregate makes it unseen again
    post(feeds, "user:bob", verb="like", to=["notification:dave"])
    states = {(g.is_seen, g.is_read) for g in feeds.read_aggregates("notification:dave").results}
    assert {(False, False), (True, True)} <= states
    return feeds


def test_rebuild_restores_every_feed_after_the_stores_are_emptied(
    make_engine: EngineFactory,
) -> None:
    # Given feeds of every kind, then emptied stores (a Redis restart without persistence)
    feeds = scenario(make_engine)
    before = contents(feeds)
    assert before["timeline:alice"]
    assert before["notification:dave"]
    feeds.timeline.clear(FLAT)
    feeds.aggregates.clear(AGGREGATED)
    assert not any(contents(feeds).values())
    # When every feed is rebuilt from the canonical store
    rebuilt = list(feeds.admin.rebuild())
    # Then each holds exactly what it held
    assert set(FLAT + AGGREGATED) - {"timeline:erin"} <= set(rebuilt)
    assert contents(feeds) == before


def test_rebuild_after_flushall(
    make_engine: EngineFactory, redis_server: RedisServer, store: str
) -> None:
    if store != "redis":
        pytest.skip("Redis only")
    feeds = scenario(make_engine)
    before = contents(feeds)
    redis_server.flushall()  # the suite's private server: activities' cache goes too
    assert contents(feeds) != before
    assert list(feeds.admin.rebuild(["timeline:alice"])) == ["timeline:alice"]
    assert len(list(feeds.admin.rebuild())) >= len(FLAT + AGGREGATED) - 1
    assert contents(feeds) == before
    # Reads hydrate from the canonical store again (and walk on past the cap).
    page = feeds.read("timeline:alice", limit=6)
    assert [a.id for a in page.results] == before["timeline:alice"]


def test_a_rebuilt_capped_feed_is_refilled_after_a_removal(make_engine: EngineFactory) -> None:
    # Given a capped feed that lost its newest entry after it was full
    feeds = scenario(make_engine)
    newest = post(feeds, "user:bob")
    held = contents(feeds)["timeline:alice"]
    feeds.remove_activity("user:bob", newest.id)
    assert len(contents(feeds)["timeline:alice"]) == 5
    # When it is rebuilt, then it holds the newest max_length of its history
    # again: what a reader walking past the cap sees anyway.
    list(feeds.admin.rebuild(["timeline:alice"]))
    refilled = contents(feeds)["timeline:alice"]
    assert len(refilled) == 6
    assert refilled[:5] == held[1:]
    walked = [a.id for a in feeds.read("timeline:alice", limit=100).results]
    assert walked[:6] == refilled


def test_rebuild_refuses_unknown_feeds(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    with pytest.raises(ValidationError, match="planet"):
        list(feeds.admin.rebuild(["planet:earth"]))


def test_the_feeds_written_since_a_time_are_those_a_lost_write_reached(
    make_engine: EngineFactory,
) -> None:
    # Given writes before a time (a Redis replica had them) and after it (lost
    # with its master): publishes, an addressed one, a follow, an unfollow
    feeds = make_engine()
    now = [T0]
    feeds.clock.now = lambda: now[0]
    feeds.follow_many([("timeline:alice", "user:bob"), ("timeline:carol", "user:dave")])
    feeds.follow("timeline:hank", "user:erin")
    post(feeds, "user:bob")
    post(feeds, "user:bob", to=["notification:ivy"])
    now[0] = T0 + timedelta(minutes=10)
    post(feeds, "user:dave", to=["notification:gina"])
    feeds.follow("timeline:frank", "user:bob")
    feeds.unfollow("timeline:hank", "user:erin")
    feeds.mark_seen("notification:ivy")
    # When the feeds written since are asked for, then they are every feed those
    # later writes reached (the post's own, its follower's, the addressed one;
    # the new follower's copy; the unfollower's removal; the marks), and no other
    since = int((T0 + timedelta(minutes=5)).timestamp() * 1000)
    expected = [
        "notification:gina",
        "notification:ivy",
        "timeline:carol",
        "timeline:frank",
        "timeline:hank",
    ]
    assert feeds.admin.feeds_written_since(since) == [*expected, "user:dave"]
    assert "timeline:alice" in feeds.admin.feeds_written_since(since - 10 * 60_000)


def walks(engine: Tidings) -> dict[str, Any]:
    """What readers see: every flat feed walked to its end, every aggregated feed's aggregates."""
    out: dict[str, Any] = {}
    for feed in FLAT:
        seen: list[str] = []
        cursor = None
        while True:
            page = engine.read(feed, limit=4, cursor=cursor)
            seen += [a.id for a in page.results]
            cursor = page.next
            if cursor is None:
                break
        out[feed] = seen
    for feed in AGGREGATED:
        aggregates = engine.read_aggregates(feed, limit=100).results
        out[feed] = [(g.key, [a.id for a in g.activities], g.activity_count) for g in aggregates]
    return out


def test_redis_restart_without_persistence_loses_no_activity(
    make_engine: EngineFactory, redis_server: RedisServer, store: str
) -> None:
    if store != "redis":
        pytest.skip("Redis only")
    # Given feeds on Redis, when the server restarts empty (no persistence)
    feeds = scenario(make_engine)
    seen, held = walks(feeds), contents(feeds)
    redis_server.restart()
    # Then flat feeds read the same from the canonical store meanwhile,
    assert {f: v for f, v in walks(feeds).items() if f in FLAT} == {f: seen[f] for f in FLAT}
    # and a rebuild brings every feed back, aggregated ones included.
    list(feeds.admin.rebuild())
    assert contents(feeds) == held
    assert walks(feeds) == seen


def test_marks_survive_a_rebuild_for_any_aggregate_key(make_engine: EngineFactory) -> None:
    # Given a notification aggregate whose key renders empty, marked read by key,
    # and another marked seen only
    feeds = make_engine(groups={"note": {"kind": "notification", "aggregation": "{extra.topic}"}})
    feeds.clock.now = Ticking()
    post(feeds, "user:bob", to=["note:dave"])
    post(feeds, "user:bob", to=["note:dave"], extra={"topic": "t"})
    feeds.mark_read("note:dave", [""])
    feeds.mark_seen("note:dave", ["t"])

    def states() -> dict[str, tuple[bool | None, bool | None]]:
        page = feeds.read_aggregates("note:dave")
        return {g.key: (g.is_seen, g.is_read) for g in page.results}

    before = states()
    assert before == {"": (True, True), "t": (True, False)}
    # When its store is emptied and it is rebuilt, then the marks hold again
    feeds.aggregates.clear(["note:dave"])
    assert list(feeds.admin.rebuild(["note:dave"])) == ["note:dave"]
    assert states() == before
    # And a mark of every aggregate as read replaces the per-aggregate ones
    feeds.mark_read("note:dave")
    every, by_key = feeds.canonical.marks.marks("note:dave")
    assert by_key == {}
    assert every[0] == every[1] > 0
