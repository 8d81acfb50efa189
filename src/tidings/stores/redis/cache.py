"""The activity cache in Redis, and the format of its values.

Activities are cached once, versioned JSON under their id (``keys.py``), each
with a lifetime, written in version order by ``lua/activity_put.lua``. The
page scripts return cached values as they are, so the timeline and aggregate
stores read them with ``cached_docs`` too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidings.core.limits import DEFAULT_ACTIVITY_CACHE_SECONDS
from tidings.stores.base import no_call
from tidings.stores.redis.keys import RedisKeys
from tidings.stores.redis.transport import is_cluster, lua, scripts_for

#: A cached activity: its version, 8 bytes big-endian, then its JSON (the
#: page scripts return it as it is). Versions stay below 2^56, so a value's
#: first byte is 0, which no JSON starts with.
_VERSION = struct.Struct(">Q")


def cached_value(version: int, doc: bytes) -> bytes:
    return _VERSION.pack(version) + doc


def cached_docs(activity_ids: Sequence[str], values: Sequence[Any]) -> dict[str, bytes]:
    """The JSON of each cached value, by id. Missing values (None) and bare JSON
    cached before versions are left out: misses, which the refill replaces."""
    return {a: v[8:] for a, v in zip(activity_ids, values, strict=False) if v and v[0] == 0}


class RedisActivityCache:
    """Stored activity JSON by id, read in one MGET per page, written in version
    order by ``lua/activity_put.lua``; every entry expires ``ttl_seconds`` after
    its last write.

    Activity keys carry no hash tag, so on a cluster they spread over every
    slot; there redis-py's non-atomic MGET splits the keys by slot and
    pipelines them per node, writes go one script call per node, and DEL is
    split the same way.
    """

    def __init__(
        self,
        client: Any,
        namespace: str = "tidings",
        *,
        ttl_seconds: int = DEFAULT_ACTIVITY_CACHE_SECONDS,
    ) -> None:
        self.client = client
        self.keys = RedisKeys(namespace)
        self.ttl_ms = ttl_seconds * 1000
        self._mget = client.mget_nonatomic if is_cluster(client) else client.mget
        self._scripts = scripts_for(client)
        self._put = self._scripts.load(lua("activity_put.lua"))

    def get_many(self, activity_ids: Sequence[str]) -> dict[str, bytes]:
        if not activity_ids:
            return {}
        return cached_docs(activity_ids, self._mget(self.keys.activities(activity_ids)))

    def put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> None:
        self.prepare_put_many(docs)()

    def prepare_put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> Callable[[], Any]:
        if not docs:
            return no_call
        keys = self.keys.activities(list(docs))
        values = [cached_value(version, doc) for version, doc in docs.values()]
        return self._scripts.prepare(self._put, keys, [self.ttl_ms], values)

    def delete(self, activity_ids: Sequence[str]) -> None:
        if activity_ids:
            self.client.delete(*self.keys.activities(activity_ids))
