"""The reference timeline store: plain Python, exact, used by property tests."""

from __future__ import annotations

import bisect
import functools
import threading
from collections.abc import Callable, Sequence

from tidings.stores.base import Cap


class MemoryTimelineStore:
    def __init__(self) -> None:
        self._feeds: dict[str, list[str]] = {}  # ascending ids
        self._lock = threading.Lock()

    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        with self._lock:
            for feed in feeds:
                entries = self._feeds.setdefault(feed, [])
                for aid in activity_ids:
                    i = bisect.bisect_left(entries, aid)
                    if i == len(entries) or entries[i] != aid:
                        entries.insert(i, aid)
                if len(entries) > cap.max_length:
                    del entries[: len(entries) - cap.max_length]
                if cap.floor is not None:
                    del entries[: bisect.bisect_left(entries, cap.floor)]
                if not entries:
                    del self._feeds[feed]

    def prepare_add(
        self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap
    ) -> Callable[[], None]:
        return functools.partial(self.add, feeds, activity_ids, cap)

    def remove(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        drop = set(activity_ids)
        with self._lock:
            for feed in feeds:
                entries = self._feeds.get(feed)
                if entries is None:
                    continue
                entries[:] = [e for e in entries if e not in drop]
                if not entries:
                    del self._feeds[feed]

    def page(self, feed: str, *, limit: int, before: str | None, cap: Cap) -> list[str]:
        with self._lock:
            entries = self._feeds.get(feed, [])
            end = len(entries) if before is None else bisect.bisect_left(entries, before)
            start = 0 if cap.floor is None else bisect.bisect_left(entries, cap.floor)
            start = max(start, end - limit)
            return entries[start:end][::-1]

    def page_docs(
        self, feed: str, *, limit: int, before: str | None, cap: Cap
    ) -> tuple[list[str], dict[str, bytes]]:
        return self.page(feed, limit=limit, before=before, cap=cap), {}

    def clear(self, feeds: Sequence[str]) -> None:
        with self._lock:
            for feed in feeds:
                self._feeds.pop(feed, None)

    def close(self) -> None:
        return None
