"""The largest of recent values, in constant memory: how late live events
ran lately, for a gauge that is sampled now and then."""

from __future__ import annotations

import threading


class RecentPeak:
    """The largest value noted in the last one to two ``window`` seconds.

    Time is cut into slots of ``window`` seconds; the peak is the largest of
    the current slot and the one before, so a value stays visible for at
    least ``window`` seconds whenever it is sampled, and a quiet spell of two
    windows brings the peak back to 0. Times are given (any monotonic clock),
    so the type holds no clock of its own.
    """

    __slots__ = ("_current", "_lock", "_previous", "_start", "window")

    def __init__(self, window: float) -> None:
        if window <= 0:
            raise ValueError(f"window must be positive, got {window}")
        self.window = window
        self._start: float | None = None
        self._current = 0.0
        self._previous = 0.0
        self._lock = threading.Lock()

    def note(self, value: float, now: float) -> None:
        """A value seen at ``now``."""
        with self._lock:
            self._roll(now)
            if value > self._current:
                self._current = value

    def peak(self, now: float) -> float:
        """The largest value noted in the last one to two windows before ``now`` (0: none)."""
        with self._lock:
            self._roll(now)
            return max(self._current, self._previous)

    def _roll(self, now: float) -> None:
        if self._start is None:
            self._start = now
            return
        slots = int((now - self._start) // self.window)
        if slots <= 0:
            return
        self._previous = self._current if slots == 1 else 0.0
        self._current = 0.0
        self._start += slots * self.window
