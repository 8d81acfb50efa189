"""Feeds in Redis: one compact string per feed, written by server-side Lua.

Each feed is a sorted array of 16-byte ids in one string (layout in
``lua/add.lua``): about 36 bytes per entry at ``max_length`` 800 once Redis
has doubled the string's allocation, against ~126 for a sorted set. A new
newest entry costs two O(1) commands (GETRANGE, APPEND) inside one script
call that writes a whole chunk of follower feeds; an older one (concurrent
deliveries write out of order) reads and rewrites only the feed's tail from
where it goes (GETRANGE, STRLEN, SETRANGE), not the whole feed. Feed keys
carry the feed id as a hash tag, so every feed lives in one Redis Cluster
slot (``keys.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidings.core import ids
from tidings.stores.base import Cap, no_call
from tidings.stores.redis.aio import AsyncScripts, async_options
from tidings.stores.redis.cache import cached_docs
from tidings.stores.redis.keys import RedisKeys
from tidings.stores.redis.transport import is_cluster, lua, scripts_for


def slack(max_length: int) -> int:
    """Trimmed ids a feed value may carry before it is compacted.

    APPEND doubles a string's allocation when it outgrows it, so after a
    compaction to ``max_length`` ids there is room for as many again at no
    extra memory: compacting only then makes the copy rare and free.
    """
    return max(16, max_length)


class RedisTimelineStore:
    def __init__(self, client: Any, namespace: str = "tidings", *, cluster: bool = False) -> None:
        self.client = client
        self.keys = RedisKeys(namespace)
        #: On a cluster, page reads leave activities to the cache's MGET.
        self.cluster = cluster or is_cluster(client)
        self._scripts = scripts_for(client)
        self._add = self._scripts.load(lua("add.lua"))
        self._remove = self._scripts.load(lua("remove.lua"))
        self._page = self._scripts.load(lua("page.lua"))
        # Page reads awaited on the event loop; None on a cluster (its keys live on
        # several nodes) and for clients it cannot speak for: those read blocking.
        options = None if self.cluster else async_options(client)
        self._async = AsyncScripts(options) if options is not None else None

    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        self.prepare_add(feeds, activity_ids, cap)()

    def prepare_add(
        self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap
    ) -> Callable[[], None]:
        """Encode the write now (in a read-ahead thread), send it when called.

        Packing a 5,000-key command costs about as much Python time as Redis
        spends running it, so doing it while Redis runs the previous chunk is
        what lets a delivery keep Redis busy. The ids travel once, as one
        argument shared by every key.
        """
        if not feeds or not activity_ids:
            return no_call
        packed = b"".join(sorted({ids.decode(a) for a in activity_ids}))
        args = [*_cap_args(cap), packed]
        write: Callable[[], None] = self._scripts.prepare(
            self._add, self.keys.feeds(feeds), args, split=True
        )
        return write

    def add_each(self, entries: Mapping[str, Sequence[str]], cap: Cap) -> None:
        self.prepare_add_each(entries, cap)()

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[str]], cap: Cap
    ) -> Callable[[], None]:
        """Each feed's ids as one argument of the same script (one call per node).

        A feed's ids are sorted and de-duplicated here, so the script merges
        them into the feed in one pass; each distinct id is decoded once
        however many feeds get it.
        """
        raw: dict[str, bytes] = {}
        feeds, packed = [], []
        for feed, activity_ids in entries.items():
            if not activity_ids:
                continue
            for a in activity_ids:
                if a not in raw:
                    raw[a] = ids.decode(a)
            feeds.append(feed)
            # Text ids sort as their bytes do (lowercase hex).
            packed.append(b"".join([raw[a] for a in sorted(set(activity_ids))]))
        if not feeds:
            return no_call
        keys = self.keys.feeds(feeds)
        write: Callable[[], None] = self._scripts.prepare(
            self._add, keys, _cap_args(cap), packed, split=True
        )
        return write

    def remove(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        if not feeds or not activity_ids:
            return
        args = [cap.max_length, *[ids.decode(a) for a in activity_ids]]
        self._scripts.prepare(self._remove, self.keys.feeds(feeds), args)()

    def page(self, feed: str, *, limit: int, before: str | None, cap: Cap) -> list[str]:
        return self._read(feed, limit, before, cap, b"")[0]

    def page_docs(
        self, feed: str, *, limit: int, before: str | None, cap: Cap
    ) -> tuple[list[str], dict[str, bytes]]:
        prefix = b"" if self.cluster else self.keys.activity_prefix
        return self._read(feed, limit, before, cap, prefix)

    def _read(
        self, feed: str, limit: int, before: str | None, cap: Cap, prefix: bytes
    ) -> tuple[list[str], dict[str, bytes]]:
        args = _page_args(limit, before, cap, prefix)
        reply = self._scripts.prepare(self._page, [self.keys.feed(feed)], args)()
        return _page_reply(reply)

    async def page_docs_async(
        self, feed: str, *, limit: int, before: str | None, cap: Cap
    ) -> tuple[list[str], dict[str, bytes]]:
        """``page_docs`` awaited on the event loop instead of blocking it.

        Clients it cannot speak for (a connection class of their own, say) get the
        blocking call.
        """
        scripts = self._async
        if scripts is None:
            return self.page_docs(feed, limit=limit, before=before, cap=cap)
        prefix = b"" if self.cluster else self.keys.activity_prefix
        args = _page_args(limit, before, cap, prefix)
        return _page_reply(await scripts.call(self._page, [self.keys.feed(feed)], args))

    def clear(self, feeds: Sequence[str]) -> None:
        if feeds:
            self.client.delete(*self.keys.feeds(feeds))

    def close(self) -> None:
        if self._async is not None:
            self._async.close()


def _cap_args(cap: Cap) -> list[Any]:
    """The leading arguments of ``add.lua``."""
    return [
        cap.max_length,
        slack(cap.max_length),
        ids.decode(cap.floor) if cap.floor else b"",
        cap.ttl_ms if cap.ttl_ms is not None else "",
    ]


def _page_args(limit: int, before: str | None, cap: Cap, prefix: bytes) -> list[Any]:
    return [
        limit,
        cap.max_length,
        bytes.fromhex(before) if before else b"",
        bytes.fromhex(cap.floor) if cap.floor else b"",
        prefix,
    ]


def _page_reply(reply: Any) -> tuple[list[str], dict[str, bytes]]:
    page = ids.encode_many(reply[0])
    return page[::-1], cached_docs(page, reply[1:])
