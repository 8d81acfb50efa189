"""The Redis bus: a stream per watched feed, shared by every process.

- ``{ns}:{ev}:<feed>``: the feed's events (XADD; the entry id is the event
  id). Entries older than the retention are trimmed as new ones arrive
  (``MINID ~``) and the key expires a retention after its last event, so a
  client that reconnects to any process within the retention replays what it
  missed, and one that comes back later is told to ``resync``.
- ``{ns}:{ev}:watched``: a sorted set of watched feeds, scored by when they
  stop being watched. Every process reads it at most once a second (so a new
  subscriber on another process is seen within a second); subscriptions of
  this process count at once.
- One reader thread per process XREADs the streams subscribed to here (one
  blocking call for all of them, woken by a private ``poke`` stream when the
  set changes) and hands events to the local subscribers.

Every key carries the hash tag ``{ev}``: on Redis Cluster the events live on
one shard, so one XREAD covers every stream; the event volume is that of the
watched feeds only.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tidings.bus.base import DEFAULT_RETENTION_MS, FIREHOSE_KEPT, Bus, Emit
from tidings.core.events import FIREHOSE, Event, parse_event_id

log = logging.getLogger("tidings.bus.redis")

#: How often the watched set is read again, and subscriptions' marks renewed.
WATCHED_REFRESH_S = 1.0
RENEW_S = 60.0
#: Under redis-py's default socket timeout (5 s).
BLOCK_MS = 2000


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
        self._prefix = f"{namespace}:{{ev}}:"
        self._watched_key = f"{self._prefix}watched"
        self._poke = f"{namespace}:{{ev}}~poke:{uuid.uuid4().hex}"
        self._watching: frozenset[str] = frozenset()
        self._read_at = 0.0
        #: Stream key → the last id read, for the streams subscribed here.
        self._cursors: dict[str, str] = {}
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._renewed = 0.0

    def key(self, feed: str) -> str:
        return self._prefix + feed

    # -- watching ----------------------------------------------------------------------------

    def watching(self) -> frozenset[str]:
        now = time.monotonic()
        if now - self._read_at >= WATCHED_REFRESH_S:
            self._read_at = now
            try:
                found = self.client.zrangebyscore(self._watched_key, self.now_ms(), "+inf")
                self._watching = frozenset(_text(f) for f in found)
            except Exception:
                log.exception("could not read the watched feeds; keeping the last set")
        return self._watching | frozenset(self.subscribed())

    def _mark(self, feeds: Sequence[str]) -> None:
        if feeds:
            until = self.now_ms() + self.retention_ms
            self.client.zadd(self._watched_key, dict.fromkeys(feeds, until))

    def _watch(self, feed: str) -> None:
        self._mark([feed])
        key = self.key(feed)
        try:
            info = self.client.xinfo_stream(key)
            start = _text(info["last-generated-id"])
        except Exception:  # no such stream yet: read it from its first entry
            start = "0-0"
        with self._lock:
            self._cursors.setdefault(key, start)
        self._start_reader()
        self._wake()

    def _unwatch(self, feed: str) -> None:
        with self._lock:
            self._cursors.pop(self.key(feed), None)
        try:
            self._mark([feed])  # kept a retention from now, for its return
        except Exception:
            log.exception("could not mark %s watched", feed)

    def _wake(self) -> None:
        try:
            self.client.xadd(self._poke, {"p": "1"}, maxlen=1)
            self.client.pexpire(self._poke, 60_000)
        except Exception:
            log.exception("could not wake the event reader")

    # -- publishing ----------------------------------------------------------------------------

    def _publish(self, items: Sequence[Emit]) -> None:
        watched = self.watching()
        chosen = [item for item in items if item[0] in watched]
        if not chosen:
            return
        cutoff = max(0, self.now_ms() - self.retention_ms)
        pipe = self.client.pipeline(transaction=False)
        for feed, kind, data in chosen:
            key = self.key(feed)
            fields = {"t": kind, "d": orjson.dumps(data)}
            if feed == FIREHOSE:
                pipe.xadd(key, fields, maxlen=FIREHOSE_KEPT, approximate=True)
            else:
                # Exact: a resync must be told from a complete replay.
                pipe.xadd(key, fields, minid=f"{cutoff}-0", approximate=False)
            pipe.pexpire(key, self.retention_ms)
        pipe.execute()

    def _replay(self, feed: str, after: str) -> list[Event] | None:
        key = self.key(feed)
        ms, seq = parse_event_id(after)
        try:
            info = self.client.xinfo_stream(key)
        except Exception:
            return None  # expired: nothing kept after that id
        deleted = parse_event_id(_text(info.get("max-deleted-entry-id", b"0-0")))
        if deleted > (ms, seq):
            return None
        entries = self.client.xrange(key, min=f"({after}", max="+")
        return [self._event(feed, entry_id, fields) for entry_id, fields in entries]

    @staticmethod
    def _event(feed: str, entry_id: Any, fields: dict[Any, Any]) -> Event:
        return Event(feed, _text(entry_id), _text(fields[b"t"]), orjson.loads(fields[b"d"]))

    # -- reading ----------------------------------------------------------------------------

    def _start_reader(self) -> None:
        with self._lock:
            if self._reader is not None or self._stop.is_set():
                return
            self._reader = threading.Thread(target=self._read, name="tidings-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        poke_at = "0-0"
        while not self._stop.is_set():
            with self._lock:
                streams = dict(self._cursors)
            streams[self._poke] = poke_at
            try:
                found = self.client.xread(streams, count=1000, block=BLOCK_MS)
                self._renew()
            except Exception:
                if not self._stop.is_set():
                    log.exception("reading events failed; retrying in a second")
                    self._stop.wait(1.0)
                continue
            for key, entries in found or ():
                name = _text(key)
                if not entries:
                    continue
                last = _text(entries[-1][0])
                if name == self._poke:
                    poke_at = last
                    continue
                feed = name[len(self._prefix) :]
                self.deliver([self._event(feed, i, f) for i, f in entries])
                with self._lock:
                    if name in self._cursors:
                        self._cursors[name] = last

    def _renew(self) -> None:
        now = time.monotonic()
        if now - self._renewed >= RENEW_S:
            self._renewed = now
            self._mark(self.subscribed())

    def close(self) -> None:
        super().close()
        self._stop.set()
        if self._reader is not None:
            self._wake()
            self._reader.join(timeout=BLOCK_MS / 1000 + 1)
