"""What every bus does the same way: who is subscribed here, and how a
subscription starts (live events held while the replay is read).

A bus keeps a feed's events only while the feed is **watched**: subscribed to
now, or within the retention after its last subscriber left (so that
subscriber can come back and replay what it missed). Most feeds have no live
reader at any moment; an event costs nothing for them.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tidings.bus.subscription import DEFAULT_BUFFER, Subscription
from tidings.core.clock import real_monotonic
from tidings.core.events import FIREHOSE, Event, EventType, parse_event_id
from tidings.core.peaks import RecentPeak
from tidings.core.results import BusFigures

log = logging.getLogger("tidings.bus")

DEFAULT_RETENTION_MS = 24 * 3600 * 1000
#: The firehose keeps this many recent events (it is not replayed by id).
FIREHOSE_KEPT = 10_000
#: The bus lag reported is the longest of the last 5 to 10 seconds: a
#: scrape every 15 s still sees most spikes, and a quiet bus reads 0 soon.
LAG_WINDOW_S = 5.0

#: ``(feed, type, data)``: an event to publish.
Emit = tuple[str, str, dict[str, Any]]


#: Not an event: a record that activities are in a feed again though no event
#: said so (a follow's copy of history brings them back silently). Emitted
#: like an event, in order with the feed's events, it is sent to no one and
#: kept nowhere; it only makes each activity named (``ids``) count as
#: announced there, so that its next removal is news again.
BACK = "activities.back"


def news_key(kind: str, data: Mapping[str, Any]) -> str:
    """What makes an event news to a feed, as the buses tell repeats: ``+`` and
    the ids of the activities it announces as added, ``-`` and those it
    announces as taken out (comma-separated), or ``''`` for an event that is
    always news. An ``activity.added`` / ``activity.removed`` names its
    activity; a ``group.updated`` the members its change ``added`` or
    ``withdrawn``. Two processes that both write a feed (an activity's own
    write, and a runner elsewhere that claimed its outbox row), or a delivery
    redone, so announce a change once, in flat and aggregated feeds alike."""
    if kind in (EventType.ACTIVITY_ADDED, EventType.ACTIVITY_REMOVED):
        found = data.get("id")
        if not isinstance(found, str):
            return ""
        return ("+" if kind == EventType.ACTIVITY_ADDED else "-") + found
    if kind == BACK:
        ids = data.get("ids")
        if isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids):
            return "+" + ",".join(ids)
        return ""
    if kind == EventType.AGGREGATE_UPDATED:
        for sign, field in (("+", "added"), ("-", "withdrawn")):
            ids = data.get(field)
            if isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids):
                return sign + ",".join(ids)
    return ""


def announced_members(key: str) -> tuple[list[str], list[str]]:
    """For a :func:`news_key`: the members an announcement records, and those it
    forgets (an activity taken out and added again is news again). An addition
    is kept as the activity's id, a removal as ``-`` and the id."""
    ids = key[1:].split(",")
    added, removed = ids, [f"-{i}" for i in ids]
    return (added, removed) if key[0] == "+" else (removed, added)


class Receiver(Protocol):
    """What takes a feed's events: a :class:`Subscription`, or the firehose's matcher."""

    def put(self, event: Event) -> None: ...


class Bus(ABC):
    """The base of :class:`tidings.bus.memory.MemoryBus` and
    :class:`tidings.bus.redis.RedisBus`: local subscriptions and their start,
    and the set of watched feeds every write consults."""

    #: The wall time event ids are made of (ms), set by each bus.
    now_ms: Callable[[], int]

    def __init__(
        self,
        retention_ms: int = DEFAULT_RETENTION_MS,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        self.retention_ms = retention_ms
        #: "How long since" for the bus and its subscriptions (the engine's clock).
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._subscribers: dict[str, set[Receiver]] = {}
        #: Feeds subscribed to in this process, and those watched beyond them
        #: (kept for clients that left; other processes' subscriptions). Their
        #: union is rebuilt when either changes, not on every write.
        self._local: frozenset[str] = frozenset()
        self._others: frozenset[str] = frozenset()
        self._watched: frozenset[str] = frozenset()
        #: How late events reached this process's subscribers lately.
        self.lag = RecentPeak(LAG_WINDOW_S)
        #: Events made here and not yet sent (by a bus that sends on a thread).
        self._pending_events = 0

    def watching(self) -> frozenset[str]:
        """The feeds (and :data:`FIREHOSE`) whose events are kept now: every
        feed whose subscription began, on any process, before this call (a
        write made after a subscription began is announced to it)."""
        return self._watched

    def watches_firehose(self) -> bool:
        """Whether the firehose is watched: it is not replayed by id, so the
        last copy of the watched set will do (no round trip per publish)."""
        return FIREHOSE in self._watched

    def figures(self) -> BusFigures:
        """How far behind the events run in this process."""
        lag = self.lag.peak(self.monotonic())
        return BusFigures(lag_seconds=lag, backlog=self._pending_events)

    def refresh_watched(self) -> None:
        """Read now which feeds other processes watch (a bus of one process
        has none to read)."""
        return None

    # -- what a bus implements ----------------------------------------------------------

    @abstractmethod
    def _publish(self, items: Sequence[Emit]) -> None:
        """Keep (the watched ones of) ``items`` and hand them to subscribers."""

    @abstractmethod
    def _replay(self, feed: str, after: str) -> list[Event] | None:
        """The kept events of ``feed`` after ``after``, oldest first; None if some
        after it are no longer kept (the subscriber must re-read the feed)."""

    @abstractmethod
    def _watch(self, feed: str) -> None:
        """``feed`` got its first subscriber here."""

    @abstractmethod
    def _ready(self, feed: str) -> None:
        """Return once ``feed``'s live events reach this process (another
        subscriber here started watching it)."""

    def _prepare(self, feeds: Sequence[str]) -> None:
        """``feeds`` are about to be watched here, together: what
        :meth:`_watch` makes ready for each may be made for all at once."""
        return None

    @abstractmethod
    def _unwatch(self, feed: str) -> None:
        """``feed`` lost its last subscriber here."""

    def close(self) -> None:
        with self._lock:
            subscriptions = {s for subs in self._subscribers.values() for s in subs}
        for subscription in subscriptions:
            if isinstance(subscription, Subscription):
                subscription.close()

    # -- shared -----------------------------------------------------------------------------

    def emit(self, items: Sequence[Emit]) -> None:
        """Publish events; never raises (a delivery must not fail for its events)."""
        if not items:
            return
        try:
            self._publish(items)
        except Exception:
            log.exception("%d events not published", len(items))

    def subscribe(
        self,
        feeds: Mapping[str, str | None],
        *,
        buffer: int = DEFAULT_BUFFER,
        lossy: bool = False,
    ) -> Subscription:
        """A subscription to ``feeds`` (feed → the last event id seen, or None to
        start from now)."""
        subscription = Subscription(buffer=buffer, lossy=lossy, bus=self, monotonic=self.monotonic)
        try:
            self._prepare([f for f in feeds if f not in self._local])
            for feed, last_event_id in feeds.items():
                self.add(subscription, feed, last_event_id)
        except Exception:
            subscription.close()
            raise
        return subscription

    def add(self, subscription: Receiver, feed: str, last_event_id: str | None) -> None:
        """Add ``feed`` to ``subscription``, replaying what came after ``last_event_id``."""
        if last_event_id is not None:
            parse_event_id(last_event_id)
        # (The firehose's matcher is a receiver that never replays.)
        sub = subscription if isinstance(subscription, Subscription) else None
        after = last_event_id if sub is not None else None
        if sub is not None and after is not None:
            sub.hold(feed)
        with self._lock:
            subs = self._subscribers.setdefault(feed, set())
            first = not subs
            subs.add(subscription)
            if first:
                self._local = self._local | {feed}
                self._watched = self._watched | {feed}
        try:
            if first:
                self._watch(feed)
            else:
                self._ready(feed)
            replayed = None if sub is None or after is None else self._replay(feed, after)
        except Exception:
            if sub is not None:
                sub.release(feed, [])
            self.remove(subscription, feed)
            raise
        if sub is None or after is None:
            return
        if replayed is None or len(replayed) >= sub.buffer:
            # Gone, or more than the client may have unread: it re-reads the
            # feed, and live events start after what the replay saw.
            if replayed:
                sub.start_after(feed, replayed[-1].id)
            sub.release(feed, [Event(feed, "0-0", EventType.RESYNC, {"after": after})])
            return
        sub.start_after(feed, after)
        sub.release(feed, replayed)

    def remove(self, subscription: Receiver, feed: str) -> None:
        with self._lock:
            subs = self._subscribers.get(feed)
            if subs is None or subscription not in subs:
                return
            subs.discard(subscription)
            last = not subs
            if last:
                del self._subscribers[feed]
                self._local = self._local - {feed}
                self._watched = self._local | self._others
        if last:
            self._unwatch(feed)

    def closed(self, subscription: Receiver) -> None:
        """Forget ``subscription`` on every feed."""
        with self._lock:
            feeds = [f for f, subs in self._subscribers.items() if subscription in subs]
        for feed in feeds:
            self.remove(subscription, feed)

    def subscribed(self) -> list[str]:
        """The feeds subscribed to in this process."""
        return list(self._local)

    def deliver(self, events: Sequence[Event]) -> None:
        """Hand published events to this process's subscribers."""
        self._note_lag(events)
        with self._lock:
            targets = [(e, list(self._subscribers.get(e.feed, ()))) for e in events]
        for event, subs in targets:
            for subscription in subs:
                subscription.put(event)

    def _note_lag(self, events: Sequence[Event]) -> None:
        # An id's first part is when the event was stamped: by Redis (its
        # clock: on one machine, or clocks kept in step, the time from there
        # to here), or by this process (about 0). The first is the oldest.
        for event in events:
            stamped_ms = int(event.id.partition("-")[0])
            if stamped_ms:  # ("0-0": a resync marker, stamped by nobody)
                self.lag.note(max(0, self.now_ms() - stamped_ms) / 1000, self.monotonic())
                return
