"""A subscription's bounded buffer, alone: what a slow consumer gets."""

from __future__ import annotations

from tidings.bus.subscription import Subscription
from tidings.core.events import Event, EventType


def event(n: int) -> Event:
    return Event("$firehose", f"{n}-0", EventType.ACTIVITY_ADDED, {"n": n})


def test_a_lossy_buffer_full_for_too_long_ends_the_stream() -> None:
    now = [100.0]
    sub = Subscription(buffer=5, lossy=True, stall_seconds=0.05, monotonic=lambda: now[0])
    for n in range(1, 10):
        sub.put(event(n))  # 5 kept, 4 missed
    assert sub.missed == 4
    now[0] += 0.05
    sub.put(event(10))  # full for the stall, not longer: still open
    assert not sub.closed
    now[0] += 0.01
    sub.put(event(11))  # still full after the stall: cut off
    assert sub.closed
    (only,) = list(sub)
    assert only.type == EventType.ERROR
    assert "full for 0.05 s" in only.data["error"]
    assert sub.finished


def test_a_reader_that_catches_up_hears_of_the_gap_once() -> None:
    sub = Subscription(buffer=3, lossy=True)
    for n in range(1, 6):
        sub.put(event(n))
    got = [sub.get(0) for _ in range(4)]
    assert [e.type for e in got if e] == [EventType.LIMIT, *[EventType.ACTIVITY_ADDED] * 3]
    assert got[0] is not None
    assert got[0].data == {"missed": 2}
    sub.put(event(6))
    later = sub.get(0)
    assert later is not None
    assert later.data == {"n": 6}


def test_memory_stays_bounded_whatever_is_put() -> None:
    sub = Subscription(buffer=100, lossy=True, stall_seconds=3600)
    for n in range(1, 100_001):
        sub.put(event(n))
    assert len(sub._events) == 100
    assert sub.missed == 99_900


def test_repeats_and_older_ids_are_dropped() -> None:
    sub = Subscription()
    for n in (1, 2, 2, 1, 3):
        sub.put(event(n))
    assert [e.data["n"] for e in (sub.get(0), sub.get(0), sub.get(0)) if e] == [1, 2, 3]
    assert sub.get(0) is None


def test_end_gives_a_last_error_event_then_nothing() -> None:
    sub = Subscription(buffer=10)
    sub.put(Event("timeline:a", "1-0", EventType.ACTIVITY_ADDED, {}))
    sub.end("server shutting down")
    sub.put(Event("timeline:a", "2-0", EventType.ACTIVITY_ADDED, {}))
    assert [(e.type, e.data) for e in sub] == [(EventType.ERROR, {"error": "server shutting down"})]
    assert sub.finished
