"""Live events: one feed's, many feeds' over one stream, and the firehose."""

from __future__ import annotations

from collections.abc import Mapping

from tidings.bus.base import Bus
from tidings.bus.firehose import FirehoseMatcher
from tidings.bus.subscription import Subscription
from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.firehose import Filter
from tidings.core.results import BusFigures


class LiveService:
    """``feeds.live``: subscriptions to events, closed by their holder."""

    def __init__(
        self,
        bus: Bus,
        firehose: FirehoseMatcher,
        feed_groups: Mapping[str, FeedGroup],
        buffer: int,
    ) -> None:
        self._bus = bus
        self._firehose = firehose
        self._feed_groups = feed_groups
        self._buffer = buffer

    def subscribe(self, feed: str, last_event_id: str | None = None) -> Subscription:
        """Live events of ``feed``: iterate it (or ``async for``), close it when done.

        With ``last_event_id``, the events after it are replayed first, in
        order, with no gap and no duplicate; if they are no longer kept, a
        ``resync`` event says to re-read the feed.
        """
        parse_feed_id(feed, self._feed_groups)
        return self._bus.subscribe({feed: last_event_id}, buffer=self._buffer)

    def stream(self) -> Subscription:
        """A subscription to no feed yet: ``add`` and ``remove`` feeds on it (one
        WebSocket's many feeds)."""
        return self._bus.subscribe({}, buffer=self._buffer)

    def firehose(
        self,
        track: str | None = None,
        follow: str | None = None,
        locations: str | None = None,
        sample: str | float | None = None,
    ) -> Subscription:
        """Every activity published from now on that passes the filters (ORed;
        none: all), as ``activity.added`` events, and ``delete`` events for those
        removed. See :mod:`tidings.core.firehose` for the filters."""
        flt = Filter.parse(track, follow, locations, sample)
        return self._firehose.open(flt, buffer=self._buffer)

    def figures(self) -> BusFigures:
        """How far behind the live events run in this process (``/metrics``)."""
        return self._bus.figures()
