"""Who reads their feeds (pure): delivery tiers and the read tracker.

Deliveries treat follower feeds by how recently their owner read them:

- ``HIGH`` — read within ``recent_read_hours``: Celery's high queue;
- ``LOW`` — read less recently: the low queue;
- ``IDLE`` — not read for ``inactive_days``: skipped. The materialised feed is
  cleared, and the next read has it regenerated from the canonical store
  (served from the canonical store meanwhile, answered with 206 over HTTP).

Recording every read would put a SQL write on the hottest path. The tracker
keeps, per process, when each feed was last confirmed active; a feed read
again within the window costs a dict lookup, and the reads it notes are
written in batches. The window is far shorter than ``inactive_days``, so a
feed this process holds as active cannot have been marked idle meanwhile by a
sweep working from its recorded reads.
"""

from __future__ import annotations

import threading
from enum import IntEnum, StrEnum

from tidings.core.limits import MAX_READ_WINDOW_MS, MAX_TRACKED


class Tier(IntEnum):
    """A follower feed's delivery tier (stored as its number: lower is sooner)."""

    HIGH = 0
    LOW = 1
    IDLE = 2


class PartTier(StrEnum):
    """Which followers a part of a split delivery covers (stored by value):
    one tier, or ``ALL`` for parts split before tiers existed."""

    HIGH = "high"
    LOW = "low"
    ALL = "all"

    @property
    def tiers(self) -> tuple[Tier, Tier]:
        """The lowest and highest tier the part delivers to."""
        return _PART_TIERS[self]


_PART_TIERS = {
    PartTier.HIGH: (Tier.HIGH, Tier.HIGH),
    PartTier.LOW: (Tier.LOW, Tier.LOW),
    PartTier.ALL: (Tier.HIGH, Tier.LOW),
}


class ReaderState(StrEnum):
    """Where a follower feed stands with its reader (stored by value)."""

    #: Delivered to, by tier.
    ACTIVE = "active"
    #: Not read for ``inactive_days``: skipped by deliveries, cleared.
    IDLE = "idle"
    #: Read again after idling: being rebuilt from the canonical store.
    REGENERATING = "regenerating"


#: A follower whose tier changed less than this before a delivery was split
#: (or any time after) is written by every part covering it, whatever its tier:
#: allowance for clocks of different processes. Writes are idempotent, so
#: twice costs a little; never is what must not happen.
TIER_CHANGE_MARGIN_MS = 60_000


def read_window_ms(inactive_days: float, recent_read_hours: float) -> int:
    """The tracker's window: short next to both thresholds it serves."""
    window = MAX_READ_WINDOW_MS
    if inactive_days > 0:
        window = min(window, int(inactive_days * 86_400_000 / 8))
    if recent_read_hours > 0:
        window = min(window, int(recent_read_hours * 3_600_000 / 8))
    return max(window, 1)


def tier_of(read_ms: int, now_ms: int, recent_ms: int, idle_ms: int | None) -> Tier:
    """The tier of a feed last read at ``read_ms`` (``idle_ms``: None when it
    cannot go idle)."""
    if idle_ms is not None and read_ms < now_ms - idle_ms:
        return Tier.IDLE
    return Tier.HIGH if read_ms >= now_ms - recent_ms else Tier.LOW


class ReadTracker:
    """Feeds confirmed active in this process, and reads not yet recorded."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._confirmed: dict[str, int] = {}
        self._pending: dict[str, int] = {}
        self._lock = threading.Lock()

    def fresh(self, feed: str, now_ms: int) -> bool:
        """Whether ``feed`` was confirmed active within the window (no lookup
        needed). A read of a fresh feed is noted once a quarter of the window has
        passed since the last one noted: the record stays that close to the truth
        without a write per read."""
        at = self._confirmed.get(feed)
        if at is None or now_ms - at >= self.window_ms:
            return False
        if now_ms - at >= self.window_ms // 4:
            self.confirm(feed, now_ms)
        return True

    def confirm(self, feed: str, now_ms: int) -> None:
        """``feed`` is active and was read at ``now_ms``: note the read."""
        with self._lock:
            if len(self._confirmed) >= MAX_TRACKED:
                self._evict(now_ms)
            self._confirmed[feed] = now_ms
            self._pending[feed] = max(now_ms, self._pending.get(feed, 0))

    def forget(self, feeds: list[str]) -> None:
        """``feeds`` are no longer known active here (they were woken up: their
        next reads ask, and see them being rebuilt)."""
        with self._lock:
            for feed in feeds:
                self._confirmed.pop(feed, None)

    def _evict(self, now_ms: int) -> None:
        # Expired entries first; if the window itself holds too many, the older
        # half (those feeds are asked about again on their next read).
        live = {f: at for f, at in self._confirmed.items() if now_ms - at < self.window_ms}
        if len(live) >= MAX_TRACKED:
            cut = sorted(live.values())[len(live) // 2]
            live = {f: at for f, at in live.items() if at >= cut}
        self._confirmed = live

    def take(self) -> dict[str, int]:
        """The reads noted since the last take."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending

    def put_back(self, reads: dict[str, int]) -> None:
        """Reads whose recording failed, to be tried again."""
        with self._lock:
            for feed, at in reads.items():
                self._pending[feed] = max(at, self._pending.get(feed, 0))
