"""Snapshots of ranked pages in Redis: one string a snapshot, with its TTL.

Keys are ``ns:snap:<key>`` (``keys.py``); no hash tag, so on a cluster they
spread over every slot.
"""

from __future__ import annotations

from typing import Any

from tidings.stores.redis.keys import snapshot_prefix


class RedisSnapshotStore:
    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self._prefix = snapshot_prefix(namespace)

    def put(self, key: str, body: bytes, ttl_ms: int) -> None:
        self.client.set(self._prefix + key, body, px=max(1, int(ttl_ms)))

    def get(self, key: str) -> bytes | None:
        found: bytes | None = self.client.get(self._prefix + key)
        return found
