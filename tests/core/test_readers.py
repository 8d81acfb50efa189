"""The pure part of idle followers and delivery tiers: tiers, the tracker's window
and what it notes."""

from __future__ import annotations

import pytest

from tidings.core.limits import MAX_READ_WINDOW_MS
from tidings.core.readers import (
    ReadTracker,
    Tier,
    read_window_ms,
    tier_of,
)

DAY = 86_400_000
HOUR = 3_600_000
NOW = 1_000 * DAY


@pytest.mark.parametrize(
    ("read_ms", "idle_ms", "tier"),
    [
        (NOW, 30 * DAY, Tier.HIGH),
        (NOW - 23 * HOUR, 30 * DAY, Tier.HIGH),
        (NOW - 24 * HOUR, 30 * DAY, Tier.HIGH),  # the boundary is still recent
        (NOW - 24 * HOUR - 1, 30 * DAY, Tier.LOW),
        (NOW - 30 * DAY, 30 * DAY, Tier.LOW),  # not read for *more* than 30 days: idle
        (NOW - 30 * DAY - 1, 30 * DAY, Tier.IDLE),
        (NOW - 400 * DAY, None, Tier.LOW),  # groups that never go idle
    ],
)
def test_tier_of(read_ms: int, idle_ms: int | None, tier: int) -> None:
    assert tier_of(read_ms, NOW, 24 * HOUR, idle_ms) == tier


@pytest.mark.parametrize(
    ("inactive_days", "recent_hours", "window"),
    [
        (30, 24, MAX_READ_WINDOW_MS),
        (0, 24, MAX_READ_WINDOW_MS),  # idling off: only the recent threshold counts
        (30, 0.5, int(0.5 * HOUR / 8)),
        (0.001, 24, int(0.001 * DAY / 8)),
        (1e-12, 1e-12, 1),  # never zero
    ],
)
def test_the_window_is_short_next_to_both_thresholds(
    inactive_days: float, recent_hours: float, window: int
) -> None:
    assert read_window_ms(inactive_days, recent_hours) == window


def test_a_tracker_notes_reads_once_a_quarter_window() -> None:
    tracker = ReadTracker(window_ms=1000)
    # Unknown feeds are not fresh: the caller asks the database
    assert not tracker.fresh("timeline:a", 0)
    tracker.confirm("timeline:a", 0)
    assert tracker.take() == {"timeline:a": 0}
    # Reads within a quarter window are not noted again
    assert tracker.fresh("timeline:a", 249)
    assert tracker.take() == {}
    # Past it, the read is noted (and the window starts over)
    assert tracker.fresh("timeline:a", 250)
    assert tracker.take() == {"timeline:a": 250}
    assert tracker.fresh("timeline:a", 1249)
    # A whole window without a read: ask again
    assert not tracker.fresh("timeline:a", 2249)


def test_reads_put_back_keep_the_latest() -> None:
    tracker = ReadTracker(window_ms=1000)
    tracker.confirm("timeline:a", 5)
    taken = tracker.take()
    tracker.confirm("timeline:a", 9)
    tracker.put_back(taken)
    tracker.put_back({"timeline:b": 3})
    assert tracker.take() == {"timeline:a": 9, "timeline:b": 3}


def test_a_full_tracker_drops_expired_then_older_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tidings.core.readers.MAX_TRACKED", 4)
    tracker = ReadTracker(window_ms=100)
    for n, at in enumerate([0, 10, 150, 160]):
        tracker.confirm(f"timeline:{n}", at)
    # Full: the two expired (read at 0 and 10, now 170) go
    tracker.confirm("timeline:new", 170)
    assert [tracker.fresh(f"timeline:{n}", 171) for n in range(4)] == [False, False, True, True]
    tracker.confirm("timeline:x", 172)
    tracker.confirm("timeline:y", 173)
    # Full of live entries: the older half goes
    tracker.confirm("timeline:z", 174)
    live = ["timeline:2", "timeline:3", "timeline:new", "timeline:x", "timeline:y"]
    assert [tracker.fresh(f, 175) for f in live] == [False, False, True, True, True]
