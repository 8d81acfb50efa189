"""The time every part of an engine reads.

One object, shared: the engine, its deliverer, its readers, its bus and its
runner all ask it, and replacing :attr:`Clock.now` or :attr:`Clock.monotonic`
(tests and benches move time) moves them all. No other module reads the
time: a part built outside an engine takes the real readings below.

:class:`Deadline` is apart: it bounds a real wait (for a lock, a reply, an
event), whose length is the world's time whatever a test made of the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def utc_now() -> datetime:
    """The real time, an aware datetime."""
    return datetime.now(UTC)


def real_monotonic() -> float:
    """Real seconds from an arbitrary start, never going back."""
    return time.monotonic()


def wall_ms() -> int:
    """Real milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class Clock:
    __slots__ = ("monotonic", "now")

    def __init__(
        self,
        now: Callable[[], datetime] = utc_now,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        #: The current time, an aware datetime.
        self.now = now
        #: Seconds from an arbitrary start, for "how long since" (caches,
        #: ages, stalls); only differences of two readings mean anything.
        self.monotonic = monotonic

    def ms(self) -> int:
        """Milliseconds since the epoch."""
        return int(self.now().timestamp() * 1000)

    def us(self) -> int:
        """Microseconds since the epoch, exactly (no float rounding)."""
        return (self.now() - _EPOCH) // _MICROSECOND

    def timestamp(self) -> float:
        """Seconds since the epoch (as ``time.time()``; token expiries)."""
        return self.now().timestamp()


class Deadline:
    """The end of a real wait of ``seconds`` (None: no end), from now."""

    __slots__ = ("_end",)

    def __init__(self, seconds: float | None) -> None:
        self._end = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float | None:
        """Real seconds left (0 once passed); None without an end."""
        return None if self._end is None else max(0.0, self._end - time.monotonic())

    @property
    def passed(self) -> bool:
        return self._end is not None and time.monotonic() >= self._end
