"""Feeds in Redis: one compact string per feed, written by server-side Lua.

Each feed is a sorted array of 16-byte ids in one string (layout in
``lua/add.lua``): about 36 bytes per entry at ``max_length`` 800 once Redis
has doubled the string's allocation, against ~126 for a sorted set. A new
newest entry costs two O(1) commands (GETRANGE, APPEND) inside one script
call that writes a whole chunk of follower feeds. Feed keys carry the feed id
as a hash tag, so every feed lives in one Redis Cluster slot.

Activities are cached once, as JSON, under their text id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

import redis
from hiredis import pack_command as hiredis_pack
from redis.exceptions import NoScriptError

from tidings import ids
from tidings.stores.base import Cap


def _script(name: str) -> str:
    return resources.files("tidings.stores").joinpath("lua", name).read_text()


def connect(url: str) -> Any:
    """A Redis client for ``url``."""
    return redis.Redis.from_url(url)


class RedisKeys:
    """Every Redis key tidings uses, in one place."""

    def __init__(self, namespace: str) -> None:
        self._feed = f"{namespace}:feed:{{"
        self._activity = f"{namespace}:act:".encode()

    def feed(self, feed: str) -> str:
        # The braces make the feed id the hash tag: all of a feed's keys in one slot.
        return self._feed + feed + "}"

    def feeds(self, feeds: Sequence[str]) -> list[str]:
        prefix = self._feed
        return [prefix + feed + "}" for feed in feeds]

    @property
    def activity_prefix(self) -> bytes:
        return self._activity

    def activity(self, activity_id: str) -> bytes:
        # Under the raw id: the page script builds these keys from feed entries.
        return self._activity + bytes.fromhex(activity_id)


def _nothing() -> None:
    return None


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
        self.cluster = cluster
        self._add = client.register_script(_script("add.lua"))
        self._remove = client.register_script(_script("remove.lua"))
        self._page = client.register_script(_script("page.lua"))

    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        self.prepare_add(feeds, activity_ids, cap)()

    def prepare_add(
        self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap
    ) -> Callable[[], None]:
        """Encode the write now (in a read-ahead thread), send it when called.

        Packing a 5,000-key command costs about as much Python time as Redis
        spends running it, so doing it while Redis runs the previous chunk is
        what lets a delivery keep Redis busy.
        """
        if not feeds or not activity_ids:
            return _nothing
        raw = sorted({ids.decode(a) for a in activity_ids})
        args: list[Any] = [
            cap.max_length,
            slack(cap.max_length),
            ids.decode(cap.floor) if cap.floor else b"",
            cap.ttl_ms if cap.ttl_ms is not None else "",
            *raw,
        ]
        write: Callable[[], None] = self._prepare(self._add, self.keys.feeds(feeds), args)
        return write

    def _prepare(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Callable[[], Any]:
        """A script call encoded now, sent when called.

        On the driver's connection directly: redis-py's command path costs
        tens of microseconds per call, a visible share of a page read.
        """
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        packed = hiredis_pack(command)
        return lambda: self._send(script, packed, command)

    def _send(self, script: Any, packed: bytes, command: tuple[Any, ...]) -> Any:
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command([packed])
            return conn.read_response()
        except NoScriptError:
            # The server lost its script cache (restart, SCRIPT FLUSH): load and retry.
            script.sha = self.client.script_load(script.script)
            return self.client.execute_command("EVALSHA", script.sha, *command[2:])
        except BaseException:
            # A half-read reply would poison the connection for the next user.
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

    def remove(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        if not feeds or not activity_ids:
            return
        args = [cap.max_length, *[ids.decode(a) for a in activity_ids]]
        self._remove(keys=self.keys.feeds(feeds), args=args)

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
        args = [
            limit,
            cap.max_length,
            bytes.fromhex(before) if before else b"",
            bytes.fromhex(cap.floor) if cap.floor else b"",
            prefix,
        ]
        reply = self._prepare(self._page, [self.keys.feed(feed)], args)()
        page = ids.encode_many(reply[0])
        docs = {aid: doc for aid, doc in zip(page, reply[1:], strict=False) if doc}
        return page[::-1], docs

    def clear(self, feeds: Sequence[str]) -> None:
        if feeds:
            self.client.delete(*self.keys.feeds(feeds))

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
        prefix = self.keys.activity_prefix
        docs = self.client.mget([prefix + bytes.fromhex(a) for a in activity_ids])
        return {a: d for a, d in zip(activity_ids, docs, strict=True) if d is not None}

    def put_many(self, docs: Mapping[str, bytes]) -> None:
        if docs:
            key = self.keys.activity
            self.client.mset({key(a): d for a, d in docs.items()})

    def delete(self, activity_ids: Sequence[str]) -> None:
        if activity_ids:
            self.client.delete(*[self.keys.activity(a) for a in activity_ids])
