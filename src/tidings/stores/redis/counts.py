"""Feed counts cached in Redis: ``ns:stats:<feed>`` holds ``followers,following,activities``.

The canonical store keeps the counts, in the transactions that move them;
this cache only spares it the reads. Each write that moves a feed's counts
deletes its entry after committing, and entries expire after
``TTL_SECONDS``, which bounds how stale one can be: a reader that fetched
the old counts just before a write may store them just after the write's
delete, and a process may die between its commit and the delete.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidings.core.results import FeedStats
from tidings.stores.base import no_call
from tidings.stores.redis.keys import stats_prefix
from tidings.stores.redis.transport import ServerScripts, scripts_for

#: A counts entry's lifetime: short, because a read that fetched the counts
#: just before a write committed may put them back just after its delete.
TTL_SECONDS = 10


class RedisCountsCache:
    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self._prefix = stats_prefix(namespace)
        self._scripts = scripts_for(client)

    def get_many(self, feeds: Sequence[str]) -> dict[str, FeedStats]:
        if not feeds:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for feed in feeds:
            pipe.get(self._prefix + feed)
        out: dict[str, FeedStats] = {}
        for feed, raw in zip(feeds, pipe.execute(), strict=True):
            if raw:
                followers, following, published = (int(x) for x in raw.split(b","))
                out[feed] = FeedStats(followers, following, published)
        return out

    def put_many(self, stats: Mapping[str, FeedStats]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for feed, s in stats.items():
            value = f"{s.followers},{s.following},{s.activities}"
            pipe.set(self._prefix + feed, value, ex=TTL_SECONDS)
        pipe.execute()

    def forget(self, feeds: Sequence[str]) -> None:
        self.prepare_forget(feeds)()

    def prepare_forget(self, feeds: Sequence[str]) -> Callable[[], Any]:
        if not feeds:
            return no_call
        keys = [self._prefix + feed for feed in feeds]
        if isinstance(self._scripts, ServerScripts):
            return self._scripts.command("DEL", *keys)
        # A cluster: one DEL per key (their slots differ), pipelined per node.
        return functools.partial(self._delete_each, keys)

    def _delete_each(self, keys: Sequence[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.delete(key)
        pipe.execute()
