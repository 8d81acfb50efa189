"""Live events on every store: each event type, emitted once the change is
readable, and resumed by id (also on another engine sharing the Redis bus)."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import EngineFactory
from tidings import Tidings
from tidings.bus.subscription import Subscription
from tidings.core.events import Event, EventType
from tidings.core.hooks import Hook
from waiting import wait_until


def next_event(sub: Subscription, timeout: float = 5.0) -> Event:
    event = sub.get(timeout)
    assert event is not None, "no event arrived"
    return event


def events(sub: Subscription, n: int) -> list[Event]:
    return [next_event(sub) for _ in range(n)]


def drain_events(sub: Subscription, wait: float = 0.3) -> list[Event]:
    """What arrives until nothing more has for ``wait`` seconds."""
    got = []
    while (event := sub.get(wait)) is not None:
        got.append(event)
    return got


def quiet(sub: Subscription) -> None:
    assert sub.get(0.2) is None


def post(engine: Tidings, actor: str, obj: str, **more: Any) -> Any:
    return engine.add_activity(
        f"user:{actor}", {"actor": actor, "verb": "post", "object": obj, **more}
    )


def test_flat_feeds_get_added_updated_and_removed(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.follow("timeline:alice", "user:bob")
    with engine.live.subscribe("timeline:alice") as sub:
        activity = post(engine, "bob", "photo:1")
        added = next_event(sub)
        assert added.type == EventType.ACTIVITY_ADDED
        assert added.feed == "timeline:alice"
        # What the event carries is what a read shows.
        assert added.data == engine.read("timeline:alice").results[0].to_dict() | {
            "time": added.data["time"]
        }
        assert added.data["id"] == activity.id
        engine.update_activity(activity.id, set={"caption": "sunset"})
        updated = next_event(sub)
        assert updated.type == EventType.ACTIVITY_UPDATED
        assert updated.data["extra"] == {"caption": "sunset"}
        engine.remove_activity("user:bob", activity.id)
        removed = next_event(sub)
        assert (removed.type, removed.data) == (EventType.ACTIVITY_REMOVED, {"id": activity.id})
        ids = [added.id, updated.id, removed.id]
        assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
        quiet(sub)


def test_a_removal_is_announced_once_in_the_feed_it_was_removed_from(
    make_engine: EngineFactory,
) -> None:
    # The removal writes its feed at once and its outbox row writes it again:
    # a subscriber of that feed hears of it once.
    engine = make_engine()
    with engine.live.subscribe("user:bob") as sub:
        activity = post(engine, "bob", "photo:1")
        assert next_event(sub).type == EventType.ACTIVITY_ADDED
        engine.remove_activity("user:bob", activity.id)
        removed = next_event(sub)
        assert (removed.type, removed.data) == (EventType.ACTIVITY_REMOVED, {"id": activity.id})
        engine.admin.drain()
        quiet(sub)


def test_an_aggregated_feeds_change_is_announced_once(make_engine: EngineFactory) -> None:
    # As in a flat feed: the write and its outbox row's both write the feed,
    # and a subscriber hears of the member added, then taken out, once.
    engine = make_engine()
    feed = "timeline_aggregated:alice"
    with engine.live.subscribe(feed) as sub:
        activity = engine.add_activity(feed, {"actor": "bob", "verb": "like", "object": "p:1"})
        engine.admin.drain()
        added = [e for e in drain_events(sub) if e.type == EventType.AGGREGATE_UPDATED]
        assert [e.data.get("added") for e in added] == [[activity.id]]
        engine.remove_activity(feed, activity.id)
        engine.admin.drain()
        gone = [e for e in drain_events(sub) if e.type == EventType.AGGREGATE_UPDATED]
        assert [e.data["withdrawn"] for e in gone] == [[activity.id]]
        # and the member delivered again is news again
        engine.add_activity(feed, {"actor": "bob", "verb": "like", "object": "p:1"})
        engine.admin.drain()
        again = [e for e in drain_events(sub) if e.type == EventType.AGGREGATE_UPDATED]
        assert len(again) == 1


def test_unfollowing_takes_back_live(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.follow("timeline:alice", "user:bob")
    activity = post(engine, "bob", "note:1")
    with engine.live.subscribe("timeline:alice") as sub:
        engine.unfollow("timeline:alice", "user:bob")
        removed = next_event(sub)
        assert (removed.type, removed.data) == (EventType.ACTIVITY_REMOVED, {"id": activity.id})


def test_unfollowing_again_after_a_follow_copied_history_takes_it_back_again(
    make_engine: EngineFactory,
) -> None:
    """The follow's copy brings the activity back without an event; the next
    unfollow's removal is still news (it was once told apart for two minutes)."""
    engine = make_engine()
    engine.follow("timeline:alice", "user:bob")
    activity = post(engine, "bob", "note:1")
    with engine.live.subscribe("timeline:alice") as sub:
        for _ in range(2):
            engine.unfollow("timeline:alice", "user:bob")
            removed = next_event(sub)
            assert (removed.type, removed.data) == (EventType.ACTIVITY_REMOVED, {"id": activity.id})
            engine.follow("timeline:alice", "user:bob")  # (its copy: no event)
            engine.settle()
            assert [a.id for a in engine.read("timeline:alice").results] == [activity.id]
            assert drain_events(sub) == []


def test_aggregated_feeds_get_their_aggregates(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.follow("timeline_aggregated:alice", "user:bob")
    with engine.live.subscribe("timeline_aggregated:alice") as sub:
        posted = [
            engine.add_activity(
                "user:bob", {"actor": "bob", "verb": "like", "object": f"photo:{n}"}
            ).id
            for n in range(2)
        ]
        got = events(sub, 2)
        assert [e.type for e in got] == [EventType.AGGREGATE_UPDATED] * 2
        page = engine.read_aggregates("timeline_aggregated:alice")
        assert got[-1].data["group"] == page.results[0].key
        assert got[-1].data["activity_count"] == page.results[0].activity_count
        # Each names the member its write added.
        assert [e.data["added"] for e in got] == [[posted[0]], [posted[1]]]
        # An unfollow takes them back out: the members each aggregate lost.
        engine.unfollow("timeline_aggregated:alice", "user:bob")
        left = events(sub, len({e.data["group"] for e in got}))
        assert sorted(i for e in left for i in e.data["withdrawn"]) == sorted(posted)
        quiet(sub)


def test_notification_feeds_get_aggregates_and_counts_also_on_marks(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    with engine.live.subscribe("notification:alice") as sub:
        engine.add_activity(
            "user:bob",
            {"actor": "bob", "verb": "like", "object": "photo:1", "to": ["notification:alice"]},
        )
        aggregate, counts = events(sub, 2)
        assert aggregate.type == EventType.AGGREGATE_UPDATED
        assert aggregate.data["is_seen"] is False
        assert (counts.type, counts.data) == (
            EventType.COUNTS_CHANGED,
            {"unseen": 1, "unread": 1},
        )
        engine.mark_seen("notification:alice")
        # (what the mark changed: every aggregate, or the keys of those marked)
        assert next_event(sub).data == {"unseen": 0, "unread": 1, "marked": {"seen": True}}
        engine.mark_read("notification:alice")
        every = {"seen": True, "read": True}
        assert next_event(sub).data == {"unseen": 0, "unread": 0, "marked": every}
        engine.add_activity(
            "user:carol",
            {
                "actor": "carol",
                "verb": "follow",
                "object": "user:alice",
                "to": ["notification:alice"],
            },
        )
        events(sub, 2)
        page = engine.read_aggregates("notification:alice", mark_read=True)
        keys = [g.key for g in page.results]
        marked = {"seen": keys, "read": keys}
        assert next_event(sub).data == {"unseen": 0, "unread": 0, "marked": marked}


def left_and_missed(engine: Tidings) -> tuple[str, list[str]]:
    """alice's client saw bob's first post and left; the id of its event, and
    the posts it missed."""
    engine.follow("timeline:alice", "user:bob")
    with engine.live.subscribe("timeline:alice") as sub:
        post(engine, "bob", "note:0")
        last = next_event(sub)
    return last.id, [post(engine, "bob", f"note:{n}").id for n in range(1, 4)]


def test_resume_replays_what_was_missed(make_engine: EngineFactory) -> None:
    engine = make_engine()
    last, missed = left_and_missed(engine)
    with engine.live.subscribe("timeline:alice", last_event_id=last) as again:
        assert [e.data["id"] for e in events(again, 3)] == missed
        quiet(again)


def test_unwatched_feeds_cost_no_events(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.follow("timeline:alice", "user:bob")
    post(engine, "bob", "note:0")
    assert "timeline:alice" not in engine.bus.watching()


def test_the_firehose_filters_and_sends_deletes(make_engine: EngineFactory) -> None:
    engine = make_engine()
    with (
        engine.live.firehose(track="sunset") as hose,
        engine.live.firehose(follow="carol") as carol,
    ):
        kept = post(engine, "bob", "photo:1", extra={"caption": "Sunset!"})
        post(engine, "bob", "photo:2", extra={"caption": "a cat"})
        post(engine, "carol", "note:1")
        got = next_event(hose)
        assert (got.type, got.data["id"]) == (EventType.ACTIVITY_ADDED, kept.id)
        assert got.data["feed"] == "user:bob"  # the feed it was published in
        assert next_event(carol).data["actor"] == "carol"
        engine.remove_activity("user:bob", kept.id)
        deleted = next_event(hose)
        assert (deleted.type, deleted.data) == (
            EventType.DELETE,
            {"id": kept.id, "feed": "user:bob"},
        )
        quiet(hose)


@pytest.mark.parametrize("store", ["redis"], indirect=True)
def test_resume_on_another_engine_sharing_redis(make_engine: EngineFactory) -> None:
    one, two = make_engine(), make_engine()
    last, missed = left_and_missed(one)
    with two.live.subscribe("timeline:alice", last_event_id=last) as again:
        assert [e.data["id"] for e in events(again, 3)] == missed
        # `one` sees the new watcher within a second
        wait_until(lambda: "timeline:alice" in one.bus.watching(), 5, "for the watcher")
        later = post(one, "bob", "note:9")
        assert next_event(again).data["id"] == later.id


# -- big deliveries write the watched followers first ------------------------------------


def _big_source(engine: Tidings, followers: int) -> list[str]:
    """``user:star`` followed by ``followers`` timelines: past the batcher's
    size, so deliveries go chunk by chunk."""
    feeds = [f"timeline:r{n:05d}" for n in range(followers)]
    for start in range(0, followers, 1000):
        engine.follow_many([(f, "user:star") for f in feeds[start : start + 1000]], copy_limit=0)
    return feeds


def test_a_big_delivery_writes_the_watched_followers_first(make_engine: EngineFactory) -> None:
    engine = make_engine(task_runner="manual", delivery_chunk_size=500)
    feeds = _big_source(engine, 2_500)
    watched, late = feeds[-1], "timeline:zz-late"  # both sort after every other follower
    written: list[list[str]] = []
    hook = engine.deliverer.planner.changes
    assert isinstance(hook, Hook)

    def record(kind: Any, items: Any) -> None:
        timelines = [f for _, _, fs in items for f in fs if f.startswith("timeline:")]
        if timelines:  # (not the source's own feed)
            written.append(timelines)

    hook.connect(record)
    with engine.live.subscribe(watched) as sub, engine.live.subscribe(late) as late_sub:
        activity = post(engine, "star", "photo:1")
        # Followed after the activity was accepted: neither written first nor at all.
        engine.follow(late, "user:star", copy_limit=0)
        engine.admin.drain()
        assert written[0] == [watched], "before any chunk of the 2,499 others"
        assert sum(f == watched for batch in written for f in batch) == 1, "written once"
        added = next_event(sub)
        assert (added.type, added.data["id"]) == (EventType.ACTIVITY_ADDED, activity.id)
        quiet(sub)
        quiet(late_sub)
    assert not any(late in batch for batch in written)
    for feed in (feeds[0], feeds[1_234], watched):
        assert [a.id for a in engine.read(feed).results] == [activity.id]


def test_an_unfollow_racing_the_watched_first_write_is_taken_back(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(task_runner="manual", delivery_chunk_size=500)
    feeds = _big_source(engine, 2_100)
    watched = feeds[-1]
    follows = engine.canonical.follows
    reached = follows.followers_among

    def unfollow_meanwhile(source: str, candidates: Any, *, row_id: int | None = None) -> list[str]:
        found = reached(source, candidates, row_id=row_id)
        if row_id is not None:  # the watched-first lookup
            engine.unfollow(watched, "user:star")  # after the lookup, before the write
        return found

    monkeypatch.setattr(follows, "followers_among", unfollow_meanwhile)
    with engine.live.subscribe(watched):
        post(engine, "star", "photo:1")
        engine.admin.drain()
    assert engine.read(watched).results == []
    assert len(engine.read(feeds[0]).results) == 1


def test_feeds_only_kept_for_replay_are_not_written_first(make_engine: EngineFactory) -> None:
    """Watched-first is for feeds with a subscriber now, not those whose events
    are kept for a client that left (up to a day)."""
    engine = make_engine(task_runner="manual", delivery_chunk_size=500)
    feeds = _big_source(engine, 2_100)
    with engine.live.subscribe(feeds[-1]):
        pass  # left: its events are kept a while (it stays among the watched feeds)
    firsts: list[str] = []
    hook = engine.deliverer.planner.changes
    assert isinstance(hook, Hook)

    def record(kind: Any, items: Any) -> None:
        timelines = [f for _, _, fs in items for f in fs if f.startswith("timeline:")]
        if timelines and not firsts:
            firsts.extend(timelines)

    hook.connect(record)
    post(engine, "star", "photo:1")
    engine.admin.drain()
    assert firsts[0] == feeds[0], "in follower order, as before"
