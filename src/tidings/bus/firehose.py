"""The firehose of one process: every published activity, matched once against
the filters of every connection here (:class:`tidings.core.firehose.FirehoseIndex`)
and handed to those it matches.

The matcher subscribes to the bus's firehose topic while it has clients; each
client is a lossy :class:`Subscription` (one that falls behind is told how
many it missed, then dropped).
"""

from __future__ import annotations

import threading

from tidings.bus.base import Bus
from tidings.bus.subscription import DEFAULT_BUFFER, Subscription
from tidings.core.events import FIREHOSE, Event, EventType
from tidings.core.firehose import Filter, FirehoseIndex


class _Client(Subscription):
    """A firehose client: closing it takes it out of the index."""

    def __init__(self, matcher: FirehoseMatcher, buffer: int) -> None:
        super().__init__(buffer=buffer, lossy=True)
        self._matcher = matcher

    def close(self) -> None:
        super().close()
        self._matcher.drop(self)


class FirehoseMatcher:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.index = FirehoseIndex()
        self._lock = threading.Lock()  # the index (its keys are the clients)
        #: Serialises joining and leaving, bus (un)subscription included.
        self._members = threading.Lock()

    def open(self, flt: Filter, buffer: int = DEFAULT_BUFFER) -> Subscription:
        client = _Client(self, buffer)
        with self._members:
            if not self.index:
                self.bus.add(self, FIREHOSE, None)
            with self._lock:
                self.index.add(client, flt)
        return client

    def drop(self, client: Subscription) -> None:
        with self._members:
            with self._lock:
                if client not in self.index:
                    return
                self.index.remove(client)
                last = not self.index
            if last:
                self.bus.remove(self, FIREHOSE)

    def put(self, event: Event) -> None:
        """One firehose event (the activity's JSON) to the clients it matches."""
        with self._lock:
            matched = self.index.match(event.data)
        if not matched:
            return
        out = event
        if event.type == EventType.DELETE:
            gone = {"id": event.data.get("id"), "feed": event.data.get("feed")}
            out = Event(FIREHOSE, event.id, EventType.DELETE, gone)
        for conn in matched:
            if isinstance(conn, Subscription):
                conn.put(out)
