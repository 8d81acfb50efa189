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
- ``{ns}:added:{ev:<shard>}:<feed>``, beside each stream: the activities
  announced as added there, scored by when; an ``activity.added`` of one of
  them is not written again (two processes that both write an activity's own
  feed, or a delivery redone, announce it once per feed).
- ``{ns}:{ev}:watched``: a sorted set of watched feeds, scored by when they
  stop being watched (a retention after their last subscriber left, renewed
  while one stays), and ``{ns}:{ev}:watched:version``, moved by every change.
  A process's copy of the set is never more than ``FRESH_S`` old when a write
  chooses which events to make (older, the version is read again: one small
  round trip per process that often at most; the set too when it moved), and
  a new subscription starts ``STARTS_AFTER_S`` after marking its feed: so a
  subscription that began on any process, or before this process started,
  gets the events of every write made after it. While Redis does not answer,
  the last copy serves, and every watched feed gets a ``resync`` once it
  does (events may have been left out meanwhile).
- One reader thread per process holds a pub/sub connection subscribed to the
  channels of the feeds its clients watch, and hands messages to them. A
  subscription starts with the channel subscribed, then replays the stream,
  so nothing falls between; if the connection drops, the reader subscribes
  again, marks its feeds watched again (Redis may have come back empty) and
  reads each stream from the last id it delivered, or sends ``resync``
  where those events are gone.

A feed's stream lives under one of ``SHARDS`` hash tags (``{ev:0}`` …), by a
hash of the feed id: on Redis Cluster the streams, and the work of appending
to them, spread over the masters, and a batch costs one script call per
shard it touches. The channels are ordinary (not sharded) pub/sub: a
message reaches every node, so a reader needs one connection to any of them.
The event volume is that of the watched feeds only.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tidings.bus.base import (
    BACK,
    DEFAULT_RETENTION_MS,
    FIREHOSE_KEPT,
    Bus,
    Emit,
    news_key,
)
from tidings.core.clock import Deadline, real_monotonic, wall_ms
from tidings.core.events import FIREHOSE, Event, EventType, parse_event_id

log = logging.getLogger("tidings.bus.redis")

#: Events waiting for the writer thread, at most: beyond (Redis slow or
#: down), the feeds concerned get a ``resync`` marker instead of their events.
MAX_PENDING = 100_000
#: Hash tags the feeds' streams are spread over (a cluster's masters share them).
SHARDS = 16
#: How often the watched set is read again, and subscriptions' marks renewed
#: (a quarter of the retention if that is shorter: they must not lapse).
WATCHED_REFRESH_S = 1.0
RENEW_S = 60.0
#: How old a process's copy of the watched set may be when a write chooses
#: its events (it is checked again when older: one small round trip per
#: process this often at most), and how long after marking its feed watched
#: a new subscription waits before it starts: longer, so that any write made
#: after the start is chosen with a copy that has the feed.
FRESH_S = 0.05
STARTS_AFTER_S = 2 * FRESH_S
#: After a failed read of the watched set, how long its last copy serves
#: before Redis is asked again (a delivery waits for no more than one timeout
#: in this long).
DOUBT_S = 1.0
#: The reader waits this long for a message before it looks at its queue of
#: (un)subscriptions.
POLL_S = 0.02

_EMIT = """
-- KEYS[i], i <= n: the feeds' streams (and channels); KEYS[n + i]: what was
-- announced in each (activity ids added, '-' .. ids taken out), scored by
-- when (ms). ARGV: the trim id, the firehose's cap, 4 per event (type, data,
-- how: '1' capped, '2' recorded only (base.BACK), '0' else; news key or
-- ''), the retention (ms), now (ms).
-- An event that announces only what the feed announced within the retention
-- is skipped (its id is false): two processes that both write a feed (an
-- activity's own write, and a runner elsewhere that claimed its outbox row),
-- or a delivery redone, announce a change once. Its news key (base.news_key)
-- is '+' or '-' and activity ids: an addition is kept as the id, a removal
-- as '-' .. the id, and each forgets the other, so an activity taken out and
-- delivered again (or brought back by a follow's copy) is news again.
local out = {}
local n = #KEYS / 2
local retention = ARGV[3 + 4 * n]
local now = tonumber(ARGV[4 + 4 * n])
for i = 1, n do
  local kind, data, capped, news = ARGV[4 * i - 1], ARGV[4 * i], ARGV[4 * i + 1], ARGV[4 * i + 2]
  local announced = KEYS[n + i]
  local skip = false
  if news ~= '' then
    local kept, forgotten = {}, {}
    for one in string.gmatch(string.sub(news, 2), '[^,]+') do
      if string.sub(news, 1, 1) == '+' then
        kept[#kept + 1], forgotten[#forgotten + 1] = one, '-' .. one
      else
        kept[#kept + 1], forgotten[#forgotten + 1] = '-' .. one, one
      end
    end
    skip = true
    for _, member in ipairs(kept) do
      if redis.call('ZSCORE', announced, member) == false then
        skip = false
      end
    end
    if not skip then
      for j, member in ipairs(kept) do
        redis.call('ZREM', announced, forgotten[j])
        redis.call('ZADD', announced, now, member)
      end
      redis.call('ZREMRANGEBYSCORE', announced, '-inf', now - tonumber(retention))
      redis.call('PEXPIRE', announced, retention)
    end
  end
  if skip or capped == '2' then
    out[i] = false
  else
    local id
    if capped == '1' then
      id = redis.call('XADD', KEYS[i], 'MAXLEN', '~', ARGV[2], '*', 't', kind, 'd', data)
    else
      id = redis.call('XADD', KEYS[i], 'MINID', ARGV[1], '*', 't', kind, 'd', data)
    end
    redis.call('PEXPIRE', KEYS[i], retention)
    redis.call('PUBLISH', KEYS[i], id .. ' ' .. kind .. ' ' .. data)
    out[i] = id
  end
end
return out
"""

_MARK = """
-- KEYS[1]: the watched set (feed -> until, ms); KEYS[2]: its version, moved
-- by every mark so that a process holding an older copy reads it again.
-- ARGV: until (ms), now (ms), the feeds. Returns the feeds that were not
-- watched until now (their events were not all kept).
local lapsed = {}
for i = 3, #ARGV do
  local was = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if not was or tonumber(was) <= tonumber(ARGV[2]) then
    table.insert(lapsed, ARGV[i])
  end
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
redis.call('INCR', KEYS[2])
return lapsed
"""

_WATCHED = """
-- KEYS[1]: the watched set; KEYS[2]: its version. ARGV: now (ms), the version
-- the caller holds (or ''). Returns the version, and the feeds watched now
-- unless the caller's copy is that version.
local version = redis.call('GET', KEYS[2]) or '0'
if version == ARGV[2] then
  return {version}
end
return {version, redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')}
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisBus(Bus):
    def __init__(
        self,
        client: Any,
        namespace: str = "tidings",
        retention_ms: int = DEFAULT_RETENTION_MS,
        now_ms: Callable[[], int] = wall_ms,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        # now_ms: the wall time Redis and every process share (ids, marks).
        super().__init__(retention_ms, monotonic)
        self.client = client
        self.now_ms = now_ms
        self._namespace = namespace
        #: The watched set and its version (see ``_MARK``).
        watched = f"{namespace}:{{ev}}:watched"
        self._watched_keys = [watched, f"{watched}:version"]
        self._emit = client.register_script(_EMIT)
        self._mark_watched = client.register_script(_MARK)
        self._read_watched = client.register_script(_WATCHED)
        #: When the last check that Redis answered began (monotonic s), and
        #: the version of the copy of the set (-1 before the first).
        self._checked = -math.inf
        self._version = -1
        #: Until when a check that failed is not tried again (monotonic s),
        #: and whether one failed since Redis last answered.
        self._doubt_until = -math.inf
        self._doubted = False
        self._read_at = -math.inf
        #: Channel → the last id delivered from it (refills after a reconnect).
        self._last: dict[str, str] = {}
        #: Channel → set once its subscription is confirmed.
        self._live: dict[str, threading.Event] = {}
        #: Channel → when (monotonic s) its subscriptions may start.
        self._starts: dict[str, float] = {}
        self._ops: queue.SimpleQueue[tuple[bool, str, threading.Event]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._renewed = -math.inf
        #: Batches for the writer thread: a delivery hands its events over and
        #: goes on, whatever Redis is doing.
        self._pending: queue.Queue[list[Emit]] = queue.Queue()
        #: Feeds whose events were dropped: a resync marker goes first.
        self._gaps: set[str] = set()
        self._writer: threading.Thread | None = None

    def key(self, feed: str) -> str:
        """The stream (and channel) of ``feed``."""
        return f"{self._namespace}:{{ev:{zlib.crc32(feed.encode()) % SHARDS}}}:{feed}"

    def announced_key(self, feed: str) -> str:
        """The activities announced as added to ``feed`` (beside its stream)."""
        return f"{self._namespace}:added:{{ev:{zlib.crc32(feed.encode()) % SHARDS}}}:{feed}"

    @staticmethod
    def feed_of(key: str) -> str:
        return key.split("}:", 1)[1]

    # -- watching ----------------------------------------------------------------------------

    def watching(self) -> frozenset[str]:
        # Never older than FRESH_S: a write made after a subscription started
        # (which waits longer than that after marking its feed, see _watch)
        # is seen to be watched. One small round trip (the set's version)
        # per FRESH_S at most while writes come; the set itself is read
        # again only when it changed.
        self._start_writer()
        if self.monotonic() - self._checked > FRESH_S:
            self._check()
        return self._watched

    def refresh_watched(self) -> None:
        self._start_writer()
        self._refresh_watched(force=True)

    def _refresh_watched(self, *, force: bool = False) -> None:
        # (The writer thread, once a second: marks that expired go.)
        now = self.monotonic()
        if force or now - self._read_at >= WATCHED_REFRESH_S:
            self._read_at = now
            self._check(whole=True)

    def _check(self, *, whole: bool = False) -> None:
        """Read the watched set if it changed (``whole``: in any case). While
        Redis does not answer, the last copy serves (asked again after
        :data:`DOUBT_S`), and once it answers every watched feed gets a
        ``resync``: events of feeds watched meanwhile may have been left out.

        No lock is held while Redis is asked: the client may first wait for
        the writes behind, whose thread may itself be here (announcing)."""
        started = self.monotonic()
        if self._doubt_until > started:
            return
        known = "" if whole or self._doubted else str(self._version)
        try:
            found = self._read_watched(keys=self._watched_keys, args=[self.now_ms(), known])
        except Exception:
            log.exception("could not read the watched feeds; their events may resync")
            with self._lock:
                self._doubt_until = self.monotonic() + DOUBT_S
                self._doubted = True
            return
        version = int(found[0])
        with self._lock:
            self._checked = max(self._checked, started)
            # (Checks of several threads may be answered out of order: the
            # versions only grow.)
            if len(found) == 1 or version < self._version:
                return
            self._version = version
            self._others = frozenset(_text(f) for f in found[1])
            self._watched = self._local | self._others
            if self._doubted:
                self._doubted = False
                self._gaps.update(f for f in self._others if f != FIREHOSE)

    def _mark(self, feeds: Sequence[str]) -> None:
        if feeds:
            now = self.now_ms()
            until = now + self.retention_ms
            lapsed = self._mark_watched(keys=self._watched_keys, args=[until, now, *feeds])
            for feed in map(_text, lapsed):
                # Its stream (if it outlived the mark) misses the events of
                # the writes since: a replay from before resyncs.
                self.client.delete(self.key(feed), self.announced_key(feed))

    def _prepare(self, feeds: Sequence[str]) -> None:
        # One mark, and one wait, for a subscription's feeds.
        if len(feeds) > 1:
            self._mark(feeds)
            starts = self.monotonic() + STARTS_AFTER_S
            with self._lock:
                self._starts.update((self.key(feed), starts) for feed in feeds)

    def _watch(self, feed: str) -> None:
        key = self.key(feed)
        done = threading.Event()
        now = self.monotonic()
        with self._lock:
            self._live[key] = done
            # Marked just now for this subscription (_prepare), or not yet:
            # until then another subscriber here waits for this start.
            marked = now - 1.0 < self._starts.get(key, 0.0) < float("inf")
            if not marked:
                self._starts[key] = float("inf")
        if not marked:
            try:
                self._mark([feed])
            finally:
                with self._lock:
                    # Every process's copy of the watched set is read again by then.
                    self._starts[key] = self.monotonic() + STARTS_AFTER_S
        self._start_reader()
        self._ops.put((True, key, done))
        self._ready(feed)

    def _ready(self, feed: str) -> None:
        # The channel is subscribed before the caller replays the stream, and
        # the subscription starts once every process knows the feed watched.
        key = self.key(feed)
        with self._lock:
            done = self._live.get(key)
        if done is not None and not done.wait(10.0):
            raise TimeoutError(f"the event reader did not subscribe to {feed} within 10 s")
        with self._lock:
            starts = self._starts.get(key, 0.0)
        left = starts - self.monotonic()
        if left > 0:
            self._stop.wait(left)

    def _unwatch(self, feed: str) -> None:
        with self._lock:
            self._live.pop(self.key(feed), None)
            self._starts.pop(self.key(feed), None)
        self._ops.put((False, self.key(feed), threading.Event()))
        try:
            self._mark([feed])  # kept a retention from now, for its return
        except Exception:
            log.exception("could not mark %s watched", feed)

    # -- publishing ----------------------------------------------------------------------------

    def _publish(self, items: Sequence[Emit]) -> None:
        # (Its callers chose the watched feeds: the copy they read will do.)
        self._start_writer()
        watched = self._watched
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
            with self._lock:
                gaps, self._gaps = self._gaps, set()
            if not batch and not gaps:
                continue
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
        now = self.now_ms()
        cutoff = max(0, now - self.retention_ms)
        shards: dict[str, tuple[list[str], list[str], list[Any]]] = {}
        for feed, kind, data in items:
            key = self.key(feed)
            streams, announced, args = shards.setdefault(key.split("}", 1)[0], ([], [], []))
            streams.append(key)
            announced.append(self.announced_key(feed))
            capped = feed == FIREHOSE
            news = "" if capped else news_key(kind, data)
            how = "1" if capped else "2" if kind == BACK else "0"
            args += [kind, orjson.dumps(data), how, news]
        for streams, announced, args in shards.values():
            self._emit(
                keys=[*streams, *announced],
                args=[f"{cutoff}-0", FIREHOSE_KEPT, *args, self.retention_ms, now],
            )

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
        deadline = Deadline(5.0)
        while not deadline.passed:
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
        """After a reconnect: what each stream got since the last id delivered,
        or a ``resync`` where some of it is gone (trimmed, or lost with a
        Redis that restarted empty: its feeds are marked watched again
        first, and every process knows it before the streams are read)."""
        if channels:
            self._mark([self.feed_of(c) for c in channels])
            self._stop.wait(STARTS_AFTER_S)
        for channel in channels:
            last = self._last.get(channel, "0-0")
            feed = self.feed_of(channel)
            if last == "0-0":  # (nothing delivered yet: all the stream holds)
                entries = self.client.xrange(channel, min="-", max="+")
                events: list[Event] | None = [self._entry(feed, i, f) for i, f in entries]
            else:
                events = self._replay(feed, last)
            if events is None:
                self._last[channel] = self._newest(channel)
                self.deliver([Event(feed, "0-0", EventType.RESYNC, {"after": last})])
            elif events:
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
        now = self.monotonic()
        if now - self._renewed >= min(RENEW_S, self.retention_ms / 4000):
            self._renewed = now
            self._mark(self.subscribed())

    def close(self) -> None:
        super().close()
        self._stop.set()
        self._pending.put([])  # wakes the writer: it sends what is left and stops
        for thread in (self._writer, self._reader):
            if thread is not None:
                thread.join(timeout=5)  # (the writer sends what is pending first)
