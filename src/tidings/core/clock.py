"""The time every part of an engine reads.

One object, shared: the engine, its deliverer and its readers all ask it,
and replacing :attr:`Clock.now` (tests and benches move time) moves them all.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def utc_now() -> datetime:
    return datetime.now(UTC)


class Clock:
    __slots__ = ("now",)

    def __init__(self, now: Callable[[], datetime] = utc_now) -> None:
        #: The current time, an aware datetime.
        self.now = now

    def ms(self) -> int:
        """Milliseconds since the epoch."""
        return int(self.now().timestamp() * 1000)

    def us(self) -> int:
        """Microseconds since the epoch, exactly (no float rounding)."""
        return (self.now() - _EPOCH) // _MICROSECOND
