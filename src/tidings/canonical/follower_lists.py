"""Follower lists kept in this process, each valid while its source's
followers version is unchanged: deliveries from sources that publish often
skip reading the same followers again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from tidings.core.clock import real_monotonic

#: ``(follower, since_row)`` of a source's followers, sorted.
FollowerList = tuple[tuple[str, int], ...]
#: Follower entries :class:`FollowerLists` keeps (~120 B each in memory).
FOLLOWER_LISTS_KEPT = 200_000
#: How long a kept list is used at most, whatever its version: bounds how
#: stale a list can get when a writer does not bump versions (a process of
#: an earlier release, during a rolling upgrade, or a hand-made change).
FOLLOWER_LIST_MAX_AGE_S = 60.0


class FollowerLists:
    """Follower lists of sources, each under the followers version it was read
    at (``feed_stats.follows_version``, bumped in the transaction of every
    change to them), so a list is used only while no follow, unfollow or move
    into or out of idle of its source happened since, in any process, and for
    at most :data:`FOLLOWER_LIST_MAX_AGE_S`.

    Most deliveries come from sources that published recently (popularity is
    skewed), and reading their followers was a third of a batch's time.
    Bounded by entries; the least recently used lists go first.
    """

    def __init__(
        self,
        limit: int = FOLLOWER_LISTS_KEPT,
        *,
        max_age_s: float = FOLLOWER_LIST_MAX_AGE_S,
        clock: Callable[[], float] = real_monotonic,
    ) -> None:
        #: source -> (version, when read, followers)
        self._lists: OrderedDict[str, tuple[int, float, FollowerList]] = OrderedDict()
        self._entries = 0
        self._limit = limit
        self._max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()

    def get(self, source: str, version: int) -> FollowerList | None:
        with self._lock:
            kept = self._lists.get(source)
            if kept is None or kept[0] != version:
                return None
            if self._clock() - kept[1] > self._max_age_s:
                return None
            self._lists.move_to_end(source)
            return kept[2]

    def put(self, source: str, version: int, followers: FollowerList) -> None:
        with self._lock:
            old = self._lists.get(source)
            if old is not None and old[0] > version:
                return  # a batch that read a newer list already kept it
            if old is not None:
                del self._lists[source]
                self._entries -= _weight(old[2])
            if _weight(followers) > self._limit:
                return
            self._lists[source] = (version, self._clock(), followers)
            self._entries += _weight(followers)
            while self._entries > self._limit:
                _, (_, _, dropped) = self._lists.popitem(last=False)
                self._entries -= _weight(dropped)

    def __len__(self) -> int:
        return len(self._lists)


def _weight(followers: FollowerList) -> int:
    """What a kept list counts against the limit: an empty one too."""
    return len(followers) + 1
