"""Feeds in Redis: one compact string per feed, written by server-side Lua.

Each feed is a sorted array of 16-byte ids in a padded string (layout in
``lua/add.lua``): ~20 bytes per entry at ``max_length`` 800, against ~126
for a sorted set, and an append is three O(1) commands inside one script
call that writes a whole chunk of follower feeds. Feed keys carry the feed id
as a hash tag, so every feed lives in one Redis Cluster slot.

Activities are cached once, as JSON, under their raw id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from tidings import ids
from tidings.errors import ConfigurationError
from tidings.stores.base import Cap


def _script(name: str) -> str:
    return resources.files("tidings.stores").joinpath("lua", name).read_text()


def connect(url: str) -> Any:
    """A Redis client for ``url``; the driver is an optional dependency."""
    try:
        import redis
    except ModuleNotFoundError:
        raise ConfigurationError(
            "the Redis store needs the driver: pip install 'tidings[redis]'"
        ) from None
    return redis.Redis.from_url(url)


class RedisKeys:
    """Every Redis key tidings uses, in one place."""

    def __init__(self, namespace: str) -> None:
        self._feed = f"{namespace}:feed:{{"
        self._activity = f"{namespace}:act:".encode()

    def feed(self, feed: str) -> str:
        # The braces make the feed id the hash tag: all of a feed's keys in one slot.
        return self._feed + feed + "}"

    def activity(self, raw_id: bytes) -> bytes:
        return self._activity + raw_id


def slack(max_length: int) -> int:
    """Trimmed slots a feed may hold before it is compacted (amortises the copy)."""
    return max(16, max_length // 4)


class RedisTimelineStore:
    def __init__(self, client: Any, namespace: str = "tidings") -> None:
        self.client = client
        self.keys = RedisKeys(namespace)
        self._add = client.register_script(_script("add.lua"))
        self._remove = client.register_script(_script("remove.lua"))
        self._page = client.register_script(_script("page.lua"))

    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        if not feeds or not activity_ids:
            return
        raw = sorted({ids.decode(a) for a in activity_ids})
        args: list[Any] = [
            cap.max_length,
            cap.max_length + slack(cap.max_length),
            ids.decode(cap.floor) if cap.floor else b"",
            cap.ttl_ms if cap.ttl_ms is not None else "",
            *raw,
        ]
        key = self.keys.feed
        self._add(keys=[key(f) for f in feeds], args=args)

    def remove(self, feeds: Sequence[str], activity_ids: Sequence[str]) -> None:
        if not feeds or not activity_ids:
            return
        key = self.keys.feed
        self._remove(keys=[key(f) for f in feeds], args=[ids.decode(a) for a in activity_ids])

    def page(self, feed: str, *, limit: int, before: str | None, cap: Cap) -> list[str]:
        raw: bytes = self._page(
            keys=[self.keys.feed(feed)],
            args=[
                limit,
                ids.decode(before) if before else b"",
                ids.decode(cap.floor) if cap.floor else b"",
            ],
        )
        encode = ids.encode
        return [encode(raw[i : i + 16]) for i in range(len(raw) - 16, -1, -16)]

    def clear(self, feeds: Sequence[str]) -> None:
        if feeds:
            self.client.delete(*[self.keys.feed(f) for f in feeds])

    def close(self) -> None:
        return None


class RedisActivityCache:
    """Stored activity JSON by id, read in one MGET per page."""

    def __init__(self, client: Any, namespace: str = "tidings") -> None:
        self.client = client
        self.keys = RedisKeys(namespace)

    def get_many(self, activity_ids: Sequence[str]) -> dict[str, bytes]:
        if not activity_ids:
            return {}
        key = self.keys.activity
        docs = self.client.mget([key(ids.decode(a)) for a in activity_ids])
        return {a: d for a, d in zip(activity_ids, docs, strict=True) if d is not None}

    def put_many(self, docs: Mapping[str, bytes]) -> None:
        if docs:
            key = self.keys.activity
            self.client.mset({key(ids.decode(a)): d for a, d in docs.items()})

    def delete(self, activity_ids: Sequence[str]) -> None:
        if activity_ids:
            self.client.delete(*[self.keys.activity(ids.decode(a)) for a in activity_ids])
