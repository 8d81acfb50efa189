"""The Redis bus: a stream per watched feed for replay, pub/sub for the live path.

- ``{ns}:{ev:<shard>}:<feed>``: the feed's events (XADD; the entry id is the event
  id). Entries older than the retention are trimmed as new ones arrive
  (``MINID``) and the key expires a retention after its last event, so a
  client that reconnects to any process within the retention replays what it
  missed, and one that comes back later is told to ``resync``.
- The same name as a pub/sub channel: one script call appends a batch's
  events to their streams and publishes each (id, type, data), so the order
  of a channel's messages is the order of the stream's ids.
- A writer thread sends the events: a delivery hands them over and goes on,
  so a slow or absent Redis never holds one up. Events it cannot send (or
  beyond ``MAX_PENDING`` waiting) are dropped and their feeds get a
  ``resync`` event when Redis answers again: a gap is always announced.
- ``{ns}:{ev}:watched``: a sorted set of watched feeds, scored by when they
  stop being watched. Every process reads it at most once a second (so a new
  subscriber on another process is seen within a second); subscriptions of
  this process count at once.
- One reader thread per process holds a pub/sub connection subscribed to the
  channels of the feeds its clients watch, and hands messages to them. A
  subscription starts with the channel subscribed, then replays the stream,
  so nothing falls between; if the connection drops, the reader subscribes
  again and reads each stream from the last id it delivered.

A feed's stream lives under one of ``SHARDS`` hash tags (``{ev:0}`` …), by a
hash of the feed id: on Redis Cluster the streams, and the work of appending
to them, spread over the masters, and a batch costs one script call per
shard it touches. The channels are ordinary (not sharded) pub/sub: a
message reaches every node, so a reader needs one connection to any of them.
The event volume is that of the watched feeds only.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tidings.bus.base import DEFAULT_RETENTION_MS, FIREHOSE_KEPT, Bus, Emit
from tidings.core.events import FIREHOSE, Event, EventType, parse_event_id

log = logging.getLogger("tidings.bus.redis")

#: Events waiting for the writer thread, at most: beyond (Redis slow or
#: down), the feeds concerned get a ``resync`` marker instead of their events.
MAX_PENDING = 100_000
#: Hash tags the feeds' streams are spread over (a cluster's masters share them).
SHARDS = 16
#: How often the watched set is read again, and subscriptions' marks renewed.
WATCHED_REFRESH_S = 1.0
RENEW_S = 60.0
#: The reader waits this long for a message before it looks at its queue of
#: (un)subscriptions.
POLL_S = 0.02

_EMIT = """
local out = {}
local n = #KEYS
for i = 1, n do
  local kind, data, capped = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
  local id
  if capped == '1' then
    id = redis.call('XADD', KEYS[i], 'MAXLEN', '~', ARGV[2], '*', 't', kind, 'd', data)
  else
    id = redis.call('XADD', KEYS[i], 'MINID', ARGV[1], '*', 't', kind, 'd', data)
  end
  redis.call('PEXPIRE', KEYS[i], ARGV[2 + 3 * n + 1])
  redis.call('PUBLISH', KEYS[i], id .. ' ' .. kind .. ' ' .. data)
  out[i] = id
end
return out
"""


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisBus(Bus):
    def __init__(
        self,
        client: Any,
        namespace: str = "tidings",
        retention_ms: int = DEFAULT_RETENTION_MS,
        now_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        super().__init__(retention_ms)
        self.client = client
        self.now_ms = now_ms
        self._namespace = namespace
        self._watched_key = f"{namespace}:{{ev}}:watched"
        self._emit = client.register_script(_EMIT)
        self._read_at = 0.0
        #: Channel → the last id delivered from it (refills after a reconnect).
        self._last: dict[str, str] = {}
        #: Channel → set once its subscription is confirmed.
        self._live: dict[str, threading.Event] = {}
        self._ops: queue.SimpleQueue[tuple[bool, str, threading.Event]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._renewed = 0.0
        #: Batches for the writer thread: a delivery hands its events over and
        #: goes on, whatever Redis is doing.
        self._pending: queue.Queue[list[Emit]] = queue.Queue()
        self._pending_events = 0
        #: Feeds whose events were dropped: a resync marker goes first.
        self._gaps: set[str] = set()
        self._writer: threading.Thread | None = None

    def key(self, feed: str) -> str:
        """The stream (and channel) of ``feed``."""
        return f"{self._namespace}:{{ev:{zlib.crc32(feed.encode()) % SHARDS}}}:{feed}"

    @staticmethod
    def feed_of(key: str) -> str:
        return key.split("}:", 1)[1]

    # -- watching ----------------------------------------------------------------------------

    def watching(self) -> frozenset[str]:
        # Other processes' watchers are read by the writer thread once a
        # second: no Redis call here.
        if self._writer is None:
            self._start_writer()
        return self._watched

    def refresh_watched(self) -> None:
        self._start_writer()
        self._refresh_watched(force=True)

    def _refresh_watched(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._read_at >= WATCHED_REFRESH_S:
            self._read_at = now
            try:
                found = self.client.zrangebyscore(self._watched_key, self.now_ms(), "+inf")
                self._watch_others(frozenset(_text(f) for f in found))
            except Exception:
                log.exception("could not read the watched feeds; keeping the last set")

    def _mark(self, feeds: Sequence[str]) -> None:
        if feeds:
            now = self.now_ms()
            self.client.zadd(self._watched_key, dict.fromkeys(feeds, now + self.retention_ms))
            self.client.zremrangebyscore(self._watched_key, "-inf", now)  # the expired

    def _watch(self, feed: str) -> None:
        self._mark([feed])
        self._start_reader()
        done = threading.Event()
        with self._lock:
            self._live[self.key(feed)] = done
        self._ops.put((True, self.key(feed), done))
        self._ready(feed)

    def _ready(self, feed: str) -> None:
        # The channel is subscribed before the caller replays the stream.
        with self._lock:
            done = self._live.get(self.key(feed))
        if done is not None and not done.wait(10.0):
            raise TimeoutError(f"the event reader did not subscribe to {feed} within 10 s")

    def _unwatch(self, feed: str) -> None:
        with self._lock:
            self._live.pop(self.key(feed), None)
        self._ops.put((False, self.key(feed), threading.Event()))
        try:
            self._mark([feed])  # kept a retention from now, for its return
        except Exception:
            log.exception("could not mark %s watched", feed)

    # -- publishing ----------------------------------------------------------------------------

    def _publish(self, items: Sequence[Emit]) -> None:
        watched = self.watching()
        chosen = [item for item in items if item[0] in watched]
        if not chosen:
            return
        with self._lock:
            if self._pending_events + len(chosen) > MAX_PENDING:
                self._gaps.update(feed for feed, _, _ in chosen)
                return
            self._pending_events += len(chosen)
        self._pending.put(chosen)

    def _start_writer(self) -> None:
        if self._writer is not None:
            return
        with self._lock:
            if self._writer is not None or self._stop.is_set():
                return
            self._writer = threading.Thread(
                target=self._write_loop, name="tidings-events-out", daemon=True
            )
        self._writer.start()

    def _write_loop(self) -> None:
        self._refresh_watched()
        while not (self._stop.is_set() and self._pending.empty()):
            try:
                batch = self._pending.get(timeout=0.2 if self._stop.is_set() else 1.0)
            except queue.Empty:
                self._refresh_watched()
                continue
            if not batch:
                continue
            with self._lock:
                gaps, self._gaps = self._gaps, set()
            lost = [(feed, str(EventType.RESYNC), {"reason": "events lost"}) for feed in gaps]
            try:
                self._write([*lost, *batch])
            except Exception:
                log.exception("%d events not published; their feeds will resync", len(batch))
                with self._lock:
                    self._gaps.update(gaps, (feed for feed, _, _ in batch))
                self._stop.wait(0.5)
            finally:
                with self._lock:
                    self._pending_events -= len(batch)
            self._refresh_watched()

    def _write(self, items: Sequence[Emit]) -> None:
        """Append to the streams and publish: one script call per shard."""
        cutoff = max(0, self.now_ms() - self.retention_ms)
        shards: dict[str, tuple[list[str], list[Any]]] = {}
        for feed, kind, data in items:
            key = self.key(feed)
            keys, args = shards.setdefault(key.split("}", 1)[0], ([], []))
            keys.append(key)
            args += [kind, orjson.dumps(data), "1" if feed == FIREHOSE else "0"]
        for keys, args in shards.values():
            self._emit(keys=keys, args=[f"{cutoff}-0", FIREHOSE_KEPT, *args, self.retention_ms])

    def _replay(self, feed: str, after: str) -> list[Event] | None:
        key = self.key(feed)
        ms, seq = parse_event_id(after)
        try:
            info = self.client.xinfo_stream(key)
        except Exception:
            return None  # expired: nothing kept after that id
        deleted = parse_event_id(_text(info.get("max-deleted-entry-id", b"0-0")))
        first = info.get("first-entry")
        if deleted > (ms, seq) or (first and parse_event_id(_text(first[0])) > (ms, seq)):
            # Trimmed past it, or the stream began after it (it expired while
            # nobody watched and was made again): events between are not kept.
            return None
        entries = self.client.xrange(key, min=f"({after}", max="+")
        return [self._entry(feed, entry_id, fields) for entry_id, fields in entries]

    @staticmethod
    def _entry(feed: str, entry_id: Any, fields: dict[Any, Any]) -> Event:
        return Event(feed, _text(entry_id), _text(fields[b"t"]), orjson.loads(fields[b"d"]))

    # -- reading ----------------------------------------------------------------------------

    def _start_reader(self) -> None:
        with self._lock:
            if self._reader is not None or self._stop.is_set():
                return
            self._reader = threading.Thread(target=self._read, name="tidings-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        channels: set[str] = set()
        pubsub: Any = None
        while not self._stop.is_set():
            try:
                if pubsub is None:
                    pubsub = self.client.pubsub()
                    for channel in channels:
                        pubsub.subscribe(channel)
                        self._confirm(pubsub, channel)
                    self._refill(channels)
                self._apply_ops(pubsub, channels)
                message = pubsub.get_message(timeout=POLL_S)
                while message is not None:
                    self._handle(message)
                    message = pubsub.get_message(timeout=0)
                self._renew()
            except Exception:
                if self._stop.is_set():
                    break
                log.exception("the event connection failed; subscribing again in a second")
                self._close(pubsub)
                pubsub = None
                self._stop.wait(1.0)
        self._close(pubsub)

    def _apply_ops(self, pubsub: Any, channels: set[str]) -> None:
        while True:
            try:
                subscribe, channel, done = self._ops.get_nowait()
            except queue.Empty:
                return
            try:
                if subscribe:
                    if channel not in channels:
                        channels.add(channel)  # (subscribed again after a reconnect)
                        pubsub.subscribe(channel)
                        self._confirm(pubsub, channel)
                        self._last.setdefault(channel, self._newest(channel))
                elif channel in channels and self.feed_of(channel) not in self.subscribed():
                    pubsub.unsubscribe(channel)
                    channels.discard(channel)
                    self._last.pop(channel, None)
            finally:
                done.set()

    def _newest(self, key: str) -> str:
        """The stream's last id (where a refill after a reconnect starts)."""
        try:
            return _text(self.client.xinfo_stream(key)["last-generated-id"])
        except Exception:  # no stream yet: from its first entry
            return "0-0"

    def _confirm(self, pubsub: Any, channel: str) -> None:
        """Wait for Redis to confirm the subscription (messages meanwhile are
        handled): only then may the subscriber replay the stream."""
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.5)
            if message is None:
                continue
            if message.get("type") == "subscribe" and _text(message["channel"]) == channel:
                return
            self._handle(message)
        raise TimeoutError(f"Redis did not confirm the subscription to {channel}")

    def _handle(self, message: dict[str, Any]) -> None:
        if message.get("type") != "message":
            return
        channel = _text(message["channel"])
        entry_id, kind, data = _text(message["data"]).split(" ", 2)
        self._last[channel] = entry_id
        self.deliver([Event(self.feed_of(channel), entry_id, kind, orjson.loads(data))])

    def _refill(self, channels: set[str]) -> None:
        """After a reconnect: what each stream got since the last id delivered."""
        for channel in channels:
            last = self._last.get(channel, "0-0")
            feed = self.feed_of(channel)
            entries = self.client.xrange(channel, min=f"({last}", max="+")
            events = [self._entry(feed, i, f) for i, f in entries]
            if events:
                self._last[channel] = events[-1].id
                self.deliver(events)

    @staticmethod
    def _close(pubsub: Any) -> None:
        if pubsub is not None:
            try:
                pubsub.close()
            except Exception:
                log.debug("closing the event connection failed", exc_info=True)

    def _renew(self) -> None:
        now = time.monotonic()
        if now - self._renewed >= RENEW_S:
            self._renewed = now
            self._mark(self.subscribed())

    def close(self) -> None:
        super().close()
        self._stop.set()
        self._pending.put([])  # wakes the writer: it sends what is left and stops
        for thread in (self._writer, self._reader):
            if thread is not None:
                thread.join(timeout=5)  # (the writer sends what is pending first)
