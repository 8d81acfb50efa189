"""Where feed counts are looked up before the canonical store: the interface
the canonical store asks of a cache (Redis implements it, in
:mod:`tidings.stores.redis.counts`), and the cache that holds nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tidings.core.results import FeedStats


def _nothing() -> None:
    return None


class CountsCache(Protocol):
    """Where feed counts are looked up before the canonical store."""

    def get_many(self, feeds: Sequence[str]) -> dict[str, FeedStats]: ...

    def put_many(self, stats: Mapping[str, FeedStats]) -> None: ...

    def forget(self, feeds: Sequence[str]) -> None:
        """Drop the entries of feeds whose counts a committed write moved."""

    def prepare_forget(self, feeds: Sequence[str]) -> Callable[[], Any]:
        """:meth:`forget` encoded now, done when called."""


class NoCountsCache:
    """Counts read from the canonical store every time (no Redis)."""

    def get_many(self, feeds: Sequence[str]) -> dict[str, FeedStats]:
        return {}

    def put_many(self, stats: Mapping[str, FeedStats]) -> None:
        return None

    def forget(self, feeds: Sequence[str]) -> None:
        return None

    def prepare_forget(self, feeds: Sequence[str]) -> Callable[[], Any]:
        return _nothing
