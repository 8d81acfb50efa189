"""The limits the stores apply to each feed group's feeds, as of now: what
deliveries write and reads page within (one answer for both sides)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tidings.core import ids
from tidings.core.aggregation import AggregateCap
from tidings.core.feeds import FeedGroup
from tidings.stores.base import Cap


class Caps:
    """Caps of the configured feed groups; ``now_ms`` is the engine's clock."""

    def __init__(self, feed_groups: Mapping[str, FeedGroup], now_ms: Callable[[], int]) -> None:
        self.feed_groups = feed_groups
        self.now_ms = now_ms

    def cap(self, feed_group: str) -> Cap:
        """The limits of a flat feed group's feeds, its age floor as of now."""
        config = self.feed_groups[feed_group]
        ttl = config.ttl_ms
        floor = None if ttl is None else ids.floor_id(self.now_ms() - ttl)
        return Cap(config.max_length, floor, ttl)

    def aggregate_cap(self, feed_group: str) -> AggregateCap:
        """The limits of an aggregated feed group's feeds."""
        config = self.feed_groups[feed_group]
        return AggregateCap(config.max_length, config.max_aggregate_size)
