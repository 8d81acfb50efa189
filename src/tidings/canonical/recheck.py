"""A yes/no fact of the canonical store, asked again at most every so often:
whether any user has rules, any source is pulled, any feed is unsettled.
Nearly always the answer is no, and then the per-feed lookups are skipped."""

from __future__ import annotations

import math
from collections.abc import Callable

from tidings.core.clock import real_monotonic


class Recheck:
    """A yes/no fact of the canonical store, looked up at most every ``seconds``;
    until first looked up (or after :meth:`expire`), it is asked again.
    ``monotonic`` tells the seconds (the engine's clock)."""

    __slots__ = ("_ask", "_checked", "_monotonic", "_seconds", "_value")

    def __init__(
        self,
        ask: Callable[[], bool],
        seconds: float,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        self._ask, self._seconds, self._monotonic = ask, seconds, monotonic
        self._checked = -math.inf
        self._value = True

    def __call__(self) -> bool:
        now = self._monotonic()
        if now >= self._checked + self._seconds:
            self._value = self._ask()
            self._checked = now
        return self._value

    def expire(self) -> None:
        self._checked = -math.inf
