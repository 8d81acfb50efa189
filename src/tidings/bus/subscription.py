"""A subscriber's end of the bus: a bounded buffer read by a thread or a coroutine.

Events are put in by whichever thread the bus delivers on (a delivery thread,
the Redis reader) and taken out by the subscriber, blocking (a Python
iterator, the CLI) or awaiting (SSE, WebSocket). The buffer is bounded, so a
subscriber that stops reading costs a fixed amount of memory:

- a **feed** subscription that overflows ends with an ``error`` event: its
  client resumes from the last id it got (``Last-Event-ID``) and misses
  nothing, which a dropped event would break;
- a **firehose** subscription drops what does not fit and says so with a
  ``limit`` event (``{"missed": n}``) when it next reads; still full after
  ``stall_seconds``, it ends with an ``error`` event.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Protocol

from tidings.core.clock import Deadline, real_monotonic
from tidings.core.events import Event, EventType, parse_event_id

DEFAULT_BUFFER = 1000


class Hub(Protocol):
    """What a subscription asks of its bus (:class:`tidings.bus.base.Bus`)."""

    def add(self, subscription: Subscription, feed: str, last_event_id: str | None) -> None: ...

    def remove(self, subscription: Subscription, feed: str) -> None: ...

    def closed(self, subscription: Subscription) -> None: ...


DEFAULT_STALL_SECONDS = 10.0


class Subscription:
    """Events for one subscriber, of one or more feeds (or the firehose)."""

    def __init__(
        self,
        *,
        buffer: int = DEFAULT_BUFFER,
        lossy: bool = False,
        stall_seconds: float = DEFAULT_STALL_SECONDS,
        bus: Hub | None = None,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        self.buffer = buffer
        #: Measures how long a lossy buffer has been full (the engine's clock).
        self.monotonic = monotonic
        self.lossy = lossy
        self.stall_seconds = stall_seconds
        self._bus = bus
        self._events: deque[Event] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        #: The last id given out per feed: replayed and live events meet without
        #: a duplicate.
        self._last: dict[str, tuple[int, int]] = {}
        self._held: dict[str, list[Event]] = {}
        self._missed = 0
        self._full_since: float | None = None
        self.closed = False
        #: Whether the bus has been told to forget this subscription.
        self._detached = False

    # -- the bus's side ---------------------------------------------------------------

    def start_after(self, feed: str, event_id: str | None) -> None:
        """Give out only events of ``feed`` after ``event_id`` (what was replayed)."""
        if event_id is not None:
            with self._lock:
                key = parse_event_id(event_id)
                if key > self._last.get(feed, (-1, -1)):
                    self._last[feed] = key

    def hold(self, feed: str) -> None:
        """Keep live events of ``feed`` aside while its replay is read."""
        with self._lock:
            self._held.setdefault(feed, [])

    def release(self, feed: str, replayed: list[Event]) -> None:
        """Queue the replayed events of ``feed``, then the live ones held meanwhile
        (those the replay already had are dropped by id), in one step: a live
        event arriving now waits behind them."""
        with self._lock:
            held = self._held.pop(feed, [])
            for event in [*replayed, *held]:
                self._put_locked(event)
        self._wake()

    def put(self, event: Event) -> None:
        """Queue ``event`` (a repeat of an id already given out is dropped)."""
        with self._lock:
            held = self._held.get(event.feed)
            if held is not None and not self.closed:
                held.append(event)
                return
            self._put_locked(event)
        self._wake()

    def _put_locked(self, event: Event) -> None:
        if self.closed:
            return
        if event.type not in (EventType.RESYNC, EventType.ERROR):
            key = parse_event_id(event.id)
            if key <= self._last.get(event.feed, (-1, -1)):
                return
            self._last[event.feed] = key
        if len(self._events) >= self.buffer:
            self._overflow()
            if self.closed or self.lossy:
                return
        self._events.append(event)

    def _overflow(self) -> None:
        # (under the lock)
        now = self.monotonic()
        if not self.lossy:
            self._end_locked(f"slow consumer: more than {self.buffer} events unread")
            return
        self._missed += 1
        if self._full_since is None:
            self._full_since = now
        elif now - self._full_since > self.stall_seconds:
            self._end_locked(
                f"slow consumer: buffer of {self.buffer} events full for "
                f"{self.stall_seconds:g} s ({self._missed} missed)"
            )

    def _end_locked(self, error: str) -> None:
        self.closed = True
        self._missed = 0  # (the error says it)
        self._events.clear()
        self._events.append(Event("", "0-0", EventType.ERROR, {"error": error}))

    def _wake(self) -> None:
        self._ready.set()
        for loop, ready in list(self._waiters):
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # its loop closed
                self._waiters.remove((loop, ready))

    def end(self, error: str) -> None:
        """Stop with an ``error`` event, the last a reader gets (events not yet
        read are dropped: a feed's client resumes by id); the bus forgets this
        subscriber at :meth:`close`."""
        with self._lock:
            if not self.closed:
                self._end_locked(error)
        self._wake()

    def close(self) -> None:
        """Stop: the bus forgets this subscriber; readers return."""
        with self._lock:
            detach, self._detached = not self._detached, True
            self.closed = True
        if detach and self._bus is not None:
            self._bus.closed(self)
        self._wake()

    def add(self, feed: str, last_event_id: str | None = None) -> None:
        """Receive ``feed``'s events too (after ``last_event_id``, replayed)."""
        if self._bus is not None:
            self._bus.add(self, feed, last_event_id)

    def remove(self, feed: str) -> None:
        """Stop receiving ``feed``'s events."""
        if self._bus is not None:
            self._bus.remove(self, feed)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the subscriber's side ----------------------------------------------------------

    def _take(self) -> Event | None:
        with self._lock:
            if self._missed:
                missed, self._missed, self._full_since = self._missed, 0, None
                return Event("", "0-0", EventType.LIMIT, {"missed": missed})
            if self._events:
                return self._events.popleft()
            self._ready.clear()
            return None

    @property
    def missed(self) -> int:
        """Events dropped since the last ``limit`` event (lossy subscriptions)."""
        return self._missed

    @property
    def finished(self) -> bool:
        """Closed, and every event given out."""
        with self._lock:
            return self.closed and not self._events and not self._missed

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, waiting up to ``timeout`` seconds; None on timeout or when closed."""
        deadline = Deadline(timeout)  # (a real wait, whatever the clock says)
        while True:
            event = self._take()
            if event is not None:
                return event
            if self.closed:
                return None
            if deadline.passed:
                return None
            self._ready.wait(deadline.left())

    async def aget(self, timeout: float | None = None) -> Event | None:
        """:meth:`get` for a coroutine."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        entry = (loop, ready)
        self._waiters.append(entry)
        try:
            deadline = None if timeout is None else loop.time() + timeout
            while True:
                ready.clear()
                event = self._take()
                if event is not None:
                    return event
                if self.closed:
                    return None
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    return None
                try:
                    await asyncio.wait_for(ready.wait(), left)
                except TimeoutError:
                    return None
        finally:
            self._waiters.remove(entry)

    def __iter__(self) -> Iterator[Event]:
        while True:
            event = self.get()
            if event is None:
                return
            yield event
            if event.type == EventType.ERROR:
                return

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            event = await self.aget()
            if event is None:
                return
            yield event
            if event.type == EventType.ERROR:
                return
