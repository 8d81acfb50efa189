"""Idle followers: skipped by deliveries after ``inactive_days`` without a read,
served from the canonical store and rebuilt when read again; delivery tiers."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from conftest import EngineFactory
from tidings import Activity, Tidings
from tidings.canonical.rows import Part
from tidings.canonical.schema import follows
from tidings.core.readers import Tier
from tiers import add_follows, set_tier

T0 = datetime(2026, 3, 1, tzinfo=UTC)
_tick = itertools.count(1)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def post(engine: Tidings, feed: str, verb: str = "post", **extra: Any) -> Activity:
    n = next(_tick)
    data: dict[str, Any] = {"actor": feed.split(":")[1], "verb": verb, "object": f"p:{n}"}
    data["time"] = engine.clock.now() + timedelta(milliseconds=n)
    data.update(extra)
    return engine.add_activity(feed, data)


def held(engine: Tidings, feed: str) -> list[str]:
    """What the timeline store itself holds for a flat feed."""
    cap = engine.deliverer.cap(feed.split(":")[0])
    return engine.timeline.page(feed, limit=1000, before=None, cap=cap)


def walk(engine: Tidings, feed: str, limit: int = 3) -> tuple[list[str], set[bool]]:
    """Every id of ``feed`` page by page, and the regenerating flags seen."""
    out: list[str] = []
    flags: set[bool] = set()
    cursor = None
    while True:
        page = engine.read(feed, limit=limit, cursor=cursor)
        out += [a.id for a in page.results]
        flags.add(page.regenerating)
        if page.next is None:
            return out, flags
        cursor = page.next


def tiers(engine: Tidings) -> dict[tuple[str, str], int]:
    with engine.db.read() as conn:
        rows = conn.execute(select(follows.c.follower, follows.c.source, follows.c.tier))
        return {(r.follower, r.source): r.tier for r in rows}


def setup(make_engine: EngineFactory, **settings: Any) -> tuple[Tidings, Clock]:
    clock = Clock()
    engine = make_engine(task_runner=settings.pop("task_runner", "manual"), **settings)
    engine.clock.now = clock
    return engine, clock


def idle_alice(make_engine: EngineFactory) -> Tidings:
    """An engine where timeline:alice follows user:bob and has just been idled."""
    feeds, clock = setup(make_engine)
    feeds.follow("timeline:alice", "user:bob")
    feeds.read("timeline:alice")
    clock.advance(days=31)
    assert feeds.admin.sweep_readers() == ["timeline:alice"]
    return feeds


def test_an_idle_follower_is_skipped_then_served_and_rebuilt(make_engine: EngineFactory) -> None:
    # Given alice and carl following bob; alice stops reading, carl does not
    feeds, clock = setup(make_engine, groups={"timeline": {"max_length": 4}})
    feeds.follow_many([("timeline:alice", "user:bob"), ("timeline:carl", "user:bob")])
    old = [post(feeds, "user:bob").id for _ in range(3)]
    feeds.admin.drain()
    walk(feeds, "timeline:alice")
    clock.advance(days=31)
    walk(feeds, "timeline:carl")
    # When the sweep runs
    assert feeds.admin.sweep_readers() == ["timeline:alice"]
    # Then alice's feed is cleared and skipped by deliveries; carl's is not
    assert held(feeds, "timeline:alice") == []
    assert tiers(feeds)[("timeline:alice", "user:bob")] == Tier.IDLE
    new = [post(feeds, "user:bob").id for _ in range(3)]
    feeds.admin.drain()
    assert held(feeds, "timeline:alice") == []
    assert held(feeds, "timeline:carl") == (new[::-1] + old[::-1])[:4]
    expected = new[::-1] + old[::-1]
    # When alice reads again, her pages come from the canonical store, complete,
    # flagged as regenerating (a cursor walk past the cap included)
    assert walk(feeds, "timeline:alice") == (expected, {True})
    # And once the runner has rebuilt her feed it holds its newest entries again
    feeds.admin.drain()
    assert held(feeds, "timeline:alice") == expected[:4]
    assert walk(feeds, "timeline:alice") == (expected, {False})
    # And deliveries reach her again
    assert tiers(feeds)[("timeline:alice", "user:bob")] == Tier.HIGH
    latest = post(feeds, "user:bob").id
    feeds.admin.drain()
    assert held(feeds, "timeline:alice")[0] == latest


def test_a_sync_runner_rebuilds_during_the_first_read(make_engine: EngineFactory) -> None:
    feeds, clock = setup(make_engine, task_runner="sync")
    feeds.follow("timeline:alice", "user:bob")
    first = post(feeds, "user:bob").id
    feeds.read("timeline:alice")
    clock.advance(days=40)
    feeds.admin.sweep_readers()
    second = post(feeds, "user:bob").id
    page = feeds.read("timeline:alice")
    assert [a.id for a in page.results] == [second, first]
    assert not page.regenerating
    assert held(feeds, "timeline:alice") == [second, first]


def test_tiers_follow_reads_and_notification_feeds_never_idle(make_engine: EngineFactory) -> None:
    feeds, clock = setup(make_engine)
    feeds.follow_many(
        [
            ("timeline:recent", "user:bob"),
            ("timeline:lapsed", "user:bob"),
            ("timeline:gone", "user:bob"),
            ("timeline:never", "user:bob"),
            ("notification:gone", "user:bob"),
            ("timeline_aggregated:gone", "user:bob"),
        ]
    )
    for feed in ("timeline:gone", "notification:gone", "timeline_aggregated:gone"):
        feeds.read_aggregates(feed) if feeds.reads.is_aggregated(feed) else feeds.read(feed)
    clock.advance(days=20)
    feeds.read("timeline:lapsed")
    clock.advance(days=11)
    feeds.read("timeline:recent")
    assert feeds.admin.sweep_readers() == ["timeline:gone", "timeline_aggregated:gone"]
    assert tiers(feeds) == {
        ("timeline:recent", "user:bob"): Tier.HIGH,
        ("timeline:lapsed", "user:bob"): Tier.LOW,
        ("timeline:gone", "user:bob"): Tier.IDLE,
        # never read: tracked from the first sweep on, as if read then
        ("timeline:never", "user:bob"): Tier.HIGH,
        ("notification:gone", "user:bob"): Tier.LOW,
        ("timeline_aggregated:gone", "user:bob"): Tier.IDLE,
    }
    assert feeds.canonical.readers.reader_counts() == {"active": 4, "idle": 2}
    # A sweep changes nothing more until time passes
    assert feeds.admin.sweep_readers() == []
    clock.advance(days=31)
    assert feeds.admin.sweep_readers() == ["timeline:lapsed", "timeline:never", "timeline:recent"]


def test_inactive_days_zero_never_idles(make_engine: EngineFactory) -> None:
    feeds, clock = setup(make_engine, inactive_days=0)
    feeds.follow("timeline:alice", "user:bob")
    feeds.read("timeline:alice")
    clock.advance(days=3650)
    assert feeds.admin.sweep_readers() == []
    assert tiers(feeds) == {("timeline:alice", "user:bob"): Tier.LOW}


def test_an_idle_aggregated_feed_is_rebuilt_with_its_aggregates(make_engine: EngineFactory) -> None:
    feeds, clock = setup(make_engine)
    feed = "timeline_aggregated:alice"
    feeds.follow(feed, "user:bob")
    for _ in range(3):
        post(feeds, "user:bob", verb="like")
    feeds.admin.drain()
    before = feeds.read_aggregates(feed)
    clock.advance(days=31)
    assert feeds.admin.sweep_readers() == [feed]
    post(feeds, "user:bob", verb="like")
    feeds.admin.drain()
    page = feeds.read_aggregates(feed)
    assert page.regenerating
    assert page.results == []
    feeds.admin.drain()
    page = feeds.read_aggregates(feed)
    assert not page.regenerating
    # (the default template aggregates by day: the new like starts an aggregate of its own)
    assert [g.activity_count for g in before.results] == [3]
    assert [g.activity_count for g in page.results] == [1, 3]


def test_a_read_racing_the_sweeps_clear_is_rebuilt_again(make_engine: EngineFactory) -> None:
    # Given alice idle enough to be swept
    feeds, clock = setup(make_engine, task_runner="sync")
    feeds.follow("timeline:alice", "user:bob")
    ids = [post(feeds, "user:bob").id for _ in range(3)]
    feeds.read("timeline:alice")
    clock.advance(days=31)
    # When she reads (and her feed is rebuilt) between the sweep's commit and
    # its clearing her store
    clear = feeds.timeline.clear

    def read_then_clear(feeds_: Sequence[str]) -> None:
        page = feeds.read("timeline:alice")
        assert [a.id for a in page.results] == ids[::-1]
        clear(feeds_)

    feeds.timeline.clear = read_then_clear  # type: ignore[method-assign,assignment]
    assert feeds.admin.sweep_readers() == ["timeline:alice"]
    feeds.timeline.clear = clear  # type: ignore[method-assign]
    # Then her feed is rebuilt again, not left empty
    assert held(feeds, "timeline:alice") == ids[::-1]
    assert feeds.canonical.readers.reader_state("timeline:alice") == "active"


def test_reads_recorded_late_still_wake_an_idle_feed(make_engine: EngineFactory) -> None:
    # A read noted in memory but written only after a sweep idled the feed
    feeds, clock = setup(make_engine)
    feeds.follow("timeline:alice", "user:bob")
    feeds.read("timeline:alice")
    feeds.admin.flush_reads()
    clock.advance(days=31)
    feeds.reads.flat.gate.reads.confirm("timeline:alice", feeds.clock.ms())  # read, not yet written
    taken = feeds.reads.flat.gate.reads.take()
    assert feeds.admin.sweep_readers() == ["timeline:alice"]
    feeds.reads.flat.gate.reads.put_back(taken)
    feeds.admin.flush_reads()
    assert feeds.canonical.readers.reader_state("timeline:alice") == "regenerating"
    feeds.admin.drain()
    assert feeds.canonical.readers.reader_state("timeline:alice") == "active"


def test_a_failed_regeneration_is_retried(make_engine: EngineFactory) -> None:
    feeds, clock = setup(make_engine)
    feeds.follow("timeline:alice", "user:bob")
    first = post(feeds, "user:bob").id
    feeds.admin.drain()
    feeds.read("timeline:alice")
    clock.advance(days=31)
    feeds.admin.sweep_readers()
    assert feeds.read("timeline:alice").regenerating
    regenerations = feeds.deliverer.regenerations
    rebuild = regenerations.rebuild
    calls: list[str] = []

    def failing(feed: str) -> None:
        calls.append(feed)
        raise ConnectionError("store away")

    regenerations.rebuild = failing
    # When the rebuild fails, deliveries still go on (it is logged, not raised)
    later = post(feeds, "user:carl")
    feeds.follow("timeline:dave", "user:carl")
    feeds.admin.drain()
    assert held(feeds, "timeline:dave") == [later.id]
    assert calls == ["timeline:alice"]
    # Then it is tried again once its retry time has come, not before
    regenerations.rebuild = rebuild
    feeds.admin.drain()
    assert feeds.read("timeline:alice").regenerating
    clock.advance(seconds=11)
    feeds.admin.drain()
    assert held(feeds, "timeline:alice") == [first]
    assert not feeds.read("timeline:alice").regenerating


# -- parts by tier -------------------------------------------------------------


def dispatch(engine: Tidings) -> list[Part]:
    sent: list[Part] = []
    engine.deliverer.distributed.dispatch_pending(sent.extend, 60_000)
    return sent


def test_parts_go_by_tier_and_idle_followers_get_none(make_engine: EngineFactory) -> None:
    feeds, _ = setup(make_engine, delivery_chunk_size=2)
    add_follows(feeds, "user:bob", {f"timeline:h{i}": Tier.HIGH for i in range(3)})
    add_follows(feeds, "user:bob", {f"timeline:l{i}": Tier.LOW for i in range(3)})
    add_follows(feeds, "user:bob", {"timeline:z": Tier.IDLE})
    activity = post(feeds, "user:bob")
    parts = dispatch(feeds)
    assert [(p.tier, p.after, p.last) for p in parts] == [
        ("high", "", "timeline:h1"),
        ("high", "timeline:h1", None),
        ("low", "", "timeline:l1"),
        ("low", "timeline:l1", None),
    ]
    # A task carries no split time: the recorded part has it
    done = [
        feeds.deliverer.distributed.run_part(Part(p.row_id, p.after, p.last, p.tier)) for p in parts
    ]
    assert done == [False, False, False, True]
    for feed in [*(f"timeline:h{i}" for i in range(3)), *(f"timeline:l{i}" for i in range(3))]:
        assert held(feeds, feed) == [activity.id]
    assert held(feeds, "timeline:z") == []


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (Tier.HIGH, Tier.LOW),
        (Tier.LOW, Tier.HIGH),
        (Tier.IDLE, Tier.HIGH),
        (Tier.HIGH, Tier.IDLE),
        (Tier.LOW, Tier.IDLE),
        (Tier.IDLE, Tier.LOW),
    ],
)
@pytest.mark.parametrize("order", ["high first", "low first"])
def test_a_follower_changing_tier_between_parts_is_not_missed(
    make_engine: EngineFactory, start: int, end: int, order: str
) -> None:
    # Given a delivery split while x is in one tier
    feeds, clock = setup(make_engine, delivery_chunk_size=100)
    add_follows(
        feeds, "user:bob", {"timeline:a": Tier.HIGH, "timeline:x": start, "timeline:z": Tier.LOW}
    )
    activity = post(feeds, "user:bob")
    parts = dispatch(feeds)
    high = [p for p in parts if p.tier == "high"]
    low = [p for p in parts if p.tier == "low"]
    first, second = (high, low) if order == "high first" else (low, high)
    # When x moves to another between its parts' runs
    clock.advance(seconds=5)
    run: Callable[[Part], bool] = feeds.deliverer.distributed.run_part
    for part in first:
        run(part)
    set_tier(feeds, "timeline:x", end)
    for part in second:
        run(part)
    # Then x holds the activity unless it was idle when split and is still idle
    # (an idle feed read again is rebuilt from the canonical store)
    assert held(feeds, "timeline:x") == [activity.id]
    assert held(feeds, "timeline:a") == held(feeds, "timeline:z") == [activity.id]
    assert feeds.admin.pending() == 0


# -- review cases: follows of idle feeds, tokens, chunks, bounded turns ------------


def test_a_follow_takes_its_followers_tier_and_a_wake_moves_every_follow(
    make_engine: EngineFactory,
) -> None:
    feeds = idle_alice(make_engine)
    # A follow made while alice is idle is idle too: deliveries skip it
    feeds.follow("timeline:alice", "user:carl")
    assert tiers(feeds)[("timeline:alice", "user:carl")] == Tier.IDLE
    carl = post(feeds, "user:carl").id
    feeds.admin.drain()
    assert held(feeds, "timeline:alice") == []
    # Her next read wakes every follow of hers, and the rebuild has carl's post
    assert feeds.read("timeline:alice").regenerating
    assert set(tiers(feeds).values()) == {Tier.HIGH}
    feeds.admin.drain()
    assert held(feeds, "timeline:alice") == [carl]


def test_a_newer_rebuild_request_outlives_an_older_one_in_the_same_ms(
    make_engine: EngineFactory,
) -> None:
    feeds = idle_alice(make_engine)
    feeds.read("timeline:alice")  # wakes her: a rebuild is requested
    [first] = feeds.canonical.readers.claim_regenerations(feeds.clock.ms(), 60_000)
    # The clock has not moved: the second request still gets a newer token
    assert feeds.canonical.readers.regenerate(["timeline:alice"], feeds.clock.ms()) == [
        "timeline:alice"
    ]
    assert not feeds.canonical.readers.regenerated(first, feeds.clock.ms())
    [second] = feeds.canonical.readers.claim_regenerations(feeds.clock.ms(), 60_000)
    assert second.token > first.token
    assert feeds.canonical.readers.regenerated(second, feeds.clock.ms())
    assert feeds.canonical.readers.reader_state("timeline:alice") == "active"


def test_the_sweep_gives_the_same_result_in_any_chunk_size(make_engine: EngineFactory) -> None:
    feeds, clock = setup(make_engine)
    readers = [f"timeline:r{i}" for i in range(7)]
    feeds.follow_many([(r, "user:bob") for r in readers])
    for n, reader in enumerate(readers):
        clock.advance(days=5)
        feeds.read(reader)
        feeds.admin.flush_reads()
        assert n >= 0
    # r0 read 35 days ago, r1 30, r2 25, … r6 five days ago
    clock.advance(days=5)
    idled = list(
        feeds.canonical.readers.sweep_readers(
            feeds.clock.ms,
            recent_ms=3 * 86_400_000,
            idle_ms=28 * 86_400_000,
            can_idle=lambda feed: True,
            chunk=2,
        )
    )
    assert [f for part in idled for f in part] == ["timeline:r0", "timeline:r1"]
    assert len(idled) == 4  # chunks of two feeds
    assert [tiers(feeds)[(r, "user:bob")] for r in readers] == [
        Tier.IDLE,
        Tier.IDLE,
        Tier.LOW,
        Tier.LOW,
        Tier.LOW,
        Tier.LOW,
        Tier.LOW,
    ]


def test_rebuilds_share_the_runner_with_deliveries(make_engine: EngineFactory) -> None:
    feeds, clock = setup(make_engine)
    readers = [f"timeline:r{i}" for i in range(5)]
    feeds.follow_many([(r, "user:bob") for r in readers])
    for reader in readers:
        feeds.read(reader)
    clock.advance(days=31)
    feeds.admin.sweep_readers()
    for reader in readers:
        assert feeds.read(reader).regenerating
    assert feeds.deliverer.regenerations.run(limit=2) == 2
    assert feeds.canonical.readers.reader_counts() == {"active": 2, "regenerating": 3}
    feeds.admin.drain()
    assert feeds.canonical.readers.reader_counts() == {"active": 5}


def test_with_nothing_idle_a_first_read_asks_no_state(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    feeds, _ = setup(make_engine, inactive_days=0)
    feeds.follow("timeline:alice", "user:bob")
    feeds.admin.sweep_readers()

    def no_lookups(feed: str) -> str:
        raise AssertionError(f"looked up {feed}")

    monkeypatch.setattr(feeds.canonical.readers, "reader_state", no_lookups)
    for n in range(3):
        assert not feeds.read(f"timeline:u{n}").regenerating


def test_a_tiers_last_part_runs_to_the_end(make_engine: EngineFactory) -> None:
    # Given exactly two parts' worth of high followers: the last part is open,
    # so a follower joining the tier past them is still covered
    feeds, _ = setup(make_engine, delivery_chunk_size=2)
    add_follows(feeds, "user:bob", {f"timeline:h{i}": Tier.HIGH for i in range(4)})
    add_follows(feeds, "user:bob", {"timeline:z9": Tier.LOW})
    activity = post(feeds, "user:bob")
    parts = dispatch(feeds)
    assert [(p.tier, p.after, p.last) for p in parts] == [
        ("high", "", "timeline:h1"),
        ("high", "timeline:h1", None),
        ("low", "", None),
    ]
    set_tier(feeds, "timeline:z9", Tier.HIGH)
    for part in parts:
        feeds.deliverer.distributed.run_part(part)
    assert held(feeds, "timeline:z9") == [activity.id]


def test_only_follower_feeds_go_idle(make_engine: EngineFactory) -> None:
    feeds, clock = setup(make_engine)
    feeds.follow("timeline:alice", "user:bob")
    mine = post(feeds, "user:bob").id
    feeds.read("user:bob")
    feeds.read("timeline:alice")
    clock.advance(days=31)
    assert feeds.admin.sweep_readers() == ["timeline:alice"]
    assert held(feeds, "user:bob") == [mine]


def test_a_slow_sweep_is_redone_in_smaller_pieces(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    feeds, clock = setup(make_engine)
    readers = [f"timeline:r{i}" for i in range(5)]
    feeds.follow_many([(r, "user:bob") for r in readers])
    for reader in readers[:3]:
        feeds.read(reader)
    clock.advance(days=31)
    for reader in readers[3:]:
        feeds.read(reader)
    # Every transaction of more than one feed counts as too slow
    monkeypatch.setattr("tidings.canonical.readers._SWEEP_MAX_SECONDS", -1.0)
    assert feeds.admin.sweep_readers() == readers[:3]
    assert [tiers(feeds)[(r, "user:bob")] for r in readers] == [Tier.IDLE] * 3 + [Tier.HIGH] * 2


def test_a_woken_feed_is_no_longer_known_active(make_engine: EngineFactory) -> None:
    feeds = idle_alice(make_engine)
    # This process still took alice for active (say, from before the sweep)
    feeds.reads.flat.gate.reads.confirm("timeline:alice", feeds.clock.ms())
    feeds.admin.flush_reads()  # her read wakes her
    assert not feeds.reads.flat.gate.reads.fresh("timeline:alice", feeds.clock.ms())
    assert feeds.read("timeline:alice").regenerating
