"""Feeds in Redis: one compact string per feed, written by server-side Lua.

Each feed is a sorted array of 16-byte ids in one string (layout in
``lua/add.lua``): about 36 bytes per entry at ``max_length`` 800 once Redis
has doubled the string's allocation, against ~126 for a sorted set. A new
newest entry costs two O(1) commands (GETRANGE, APPEND) inside one script
call that writes a whole chunk of follower feeds. Feed keys carry the feed id
as a hash tag, so every feed lives in one Redis Cluster slot.

Activities are cached once, versioned JSON under their id, with a lifetime
(``lua/activity_put.lua``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

import redis
from hiredis import pack_command as hiredis_pack
from redis.exceptions import NoScriptError

from tidings.core import ids
from tidings.core.aggregation import (
    EXACT_ACTORS,
    GroupCap,
    GroupsPage,
    Member,
    Position,
    StoredGroup,
    actor_tag,
)
from tidings.stores.base import Cap
from tidings.stores.redis.aio import AsyncScripts, async_options
from tidings.stores.redis.transport import ClusterScripts


def _script(name: str) -> str:
    return resources.files("tidings.stores.redis").joinpath("lua", name).read_text()


CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


def connect(url: str) -> Any:
    """A Redis client for ``url``; a Redis Cluster client for ``redis+cluster://``.

    A cluster URL names any one node (``redis+cluster://host:6379``); the
    client discovers the others and the slot map from it. ``rediss+cluster://``
    is the same over TLS.
    """
    for scheme in CLUSTER_SCHEMES:
        if url.startswith(scheme):
            plain = scheme.replace("+cluster", "") + url[len(scheme) :]
            return redis.RedisCluster.from_url(plain)
    return redis.Redis.from_url(url)


def disconnect(client: Any) -> None:
    """Close ``client`` and its sockets. A cluster client's ``close`` leaves its
    nodes' connection pools open (each node's client was handed its pool, so
    it does not own it): those are disconnected here."""
    nodes = client.get_nodes() if is_cluster(client) else []
    client.close()
    for node in nodes:
        if node.redis_connection is not None:
            node.redis_connection.connection_pool.disconnect()


def is_cluster(client: Any) -> bool:
    return isinstance(client, redis.RedisCluster)


def _scripts(client: Any) -> Any:
    """How scripts reach ``client``: packed on its one connection, or grouped per node."""
    if is_cluster(client):
        return ClusterScripts(client, _script("cluster.lua"))
    return _Scripts(client)


class RedisKeys:
    """Every Redis key tidings uses, in one place.

    Keys of an aggregated feed other than its own (records, member ids) are
    derived from it inside the scripts; ``lua/groups.lua`` lists them.
    """

    def __init__(self, namespace: str) -> None:
        self._feed = f"{namespace}:feed:{{"
        self._groups = f"{namespace}:agg:{{"
        self._activity = f"{namespace}:act:".encode()

    def feed(self, feed: str) -> str:
        # The braces make the feed id the hash tag: all of a feed's keys in one slot.
        return self._feed + feed + "}"

    def feeds(self, feeds: Sequence[str]) -> list[str]:
        prefix = self._feed
        return [prefix + feed + "}" for feed in feeds]

    def grouped(self, feed: str) -> str:
        return self._groups + feed + "}"

    def grouped_many(self, feeds: Sequence[str]) -> list[str]:
        prefix = self._groups
        return [prefix + feed + "}" for feed in feeds]

    @property
    def activity_prefix(self) -> bytes:
        return self._activity

    def activity(self, activity_id: str) -> bytes:
        # Under the raw id: the page script builds these keys from feed entries.
        return self._activity + bytes.fromhex(activity_id)


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


def _nothing() -> None:
    return None


def slack(max_length: int) -> int:
    """Trimmed ids a feed value may carry before it is compacted.

    APPEND doubles a string's allocation when it outgrows it, so after a
    compaction to ``max_length`` ids there is room for as many again at no
    extra memory: compacting only then makes the copy rare and free.
    """
    return max(16, max_length)


class _Scripts:
    """Script calls packed ahead and sent on the driver's connection.

    redis-py's command path costs tens of microseconds per call, a visible
    share of a page read; and packing a 5,000-key command costs about as much
    Python time as Redis spends running it, so deliveries pack the next chunk
    while Redis runs the current one.
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def load(self, body: str) -> Any:
        return self.client.register_script(body)

    def prepare(
        self, script: Any, keys: Sequence[Any], args: Sequence[Any], paired: Sequence[Any] = ()
    ) -> Callable[[], Any]:
        """A script call encoded now, sent when called; ``paired`` (one value per
        key, in the same order) follows ``args``."""
        command = ("EVALSHA", script.sha, len(keys), *keys, *args, *paired)
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


class RedisTimelineStore:
    def __init__(self, client: Any, namespace: str = "tidings", *, cluster: bool = False) -> None:
        self.client = client
        self.keys = RedisKeys(namespace)
        #: On a cluster, page reads leave activities to the cache's MGET.
        self.cluster = cluster or is_cluster(client)
        self._scripts = _scripts(client)
        self._add = self._scripts.load(_script("add.lua"))
        self._remove = self._scripts.load(_script("remove.lua"))
        self._page = self._scripts.load(_script("page.lua"))
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
        write: Callable[[], None] = self._scripts.prepare(self._add, self.keys.feeds(feeds), args)
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


class RedisGroupStore:
    """Aggregated and notification feeds, aggregated inside Redis by Lua.

    Layout and costs in ``lua/groups.lua``; one script call writes a whole
    chunk of follower feeds, and one reads a page of groups with their
    newest activities.
    """

    def __init__(self, client: Any, namespace: str = "tidings", *, cluster: bool = False) -> None:
        self.client = client
        self.keys = RedisKeys(namespace)
        self.cluster = cluster or is_cluster(client)
        self._scripts = _scripts(client)
        shared = _script("groups.lua")
        load = self._scripts.load
        self._add = load(shared + "\n" + _script("group_add.lua"))
        self._remove = load(shared + "\n" + _script("group_remove.lua"))
        self._page = load(shared + "\n" + _script("group_page.lua"))
        self._admin = load(shared + "\n" + _script("group_admin.lua"))

    @staticmethod
    def _members(members: Sequence[Member]) -> list[bytes]:
        args: list[bytes] = []
        for m in dict.fromkeys(members):
            args += [ids.decode(m.id), m.group.encode(), actor_tag(m.actor)]
        return args

    def add(self, feeds: Sequence[str], members: Sequence[Member], cap: GroupCap) -> None:
        self.prepare_add(feeds, members, cap)()

    def prepare_add(
        self, feeds: Sequence[str], members: Sequence[Member], cap: GroupCap
    ) -> Callable[[], None]:
        if not feeds or not members:
            return _nothing
        args = [cap.max_length, EXACT_ACTORS, *self._members(members)]
        write: Callable[[], None] = self._scripts.prepare(
            self._add, self.keys.grouped_many(feeds), args
        )
        return write

    def remove(self, feeds: Sequence[str], members: Sequence[Member], cap: GroupCap) -> None:
        if feeds and members:
            keys = self.keys.grouped_many(feeds)
            self._scripts.prepare(self._remove, keys, self._members(members))()

    def page(
        self,
        feed: str,
        *,
        limit: int,
        snapshot: str | None,
        after: Position | None,
        cap: GroupCap,
        docs: bool = False,
    ) -> GroupsPage:
        args = [
            limit,
            cap.max_group_size,
            ids.decode(snapshot) if snapshot else b"",
            after.ms if after else b"",
            after.key.encode() if after else b"",
            self.keys.activity_prefix if docs and not self.cluster else b"",
        ]
        reply = self._scripts.prepare(self._page, [self.keys.grouped(feed)], args)()
        raw_snapshot, unseen, unread, count = reply[:4]
        groups: list[StoredGroup] = []
        shown: list[str] = []
        end = 4 + 7 * count
        for at in range(4, end, 7):
            key, position, flags, n, actors, raw_ids, oldest = reply[at : at + 7]
            newest_first = ids.encode_many(raw_ids)[::-1]
            shown += newest_first
            groups.append(
                StoredGroup(
                    key=key.decode(),
                    activity_ids=newest_first,
                    activity_count=n,
                    actor_count=actors,
                    oldest=ids.encode(oldest),
                    newest=newest_first[0],
                    position=position,
                    is_seen=bool(flags & 1),
                    is_read=bool(flags & 2),
                )
            )
        found = cached_docs(shown, reply[end:])
        snap = ids.encode(raw_snapshot) if raw_snapshot else snapshot
        return GroupsPage(groups, snap, int(unseen), int(unread), found)

    def member_ids(self, feed: str) -> list[str]:
        raw = self._scripts.prepare(self._admin, [self.keys.grouped(feed)], ["ids"])()
        return ids.encode_many(raw)

    def mark(self, feed: str, groups: Sequence[str] | None, *, read: bool) -> None:
        if groups is not None and not groups:
            return
        args = ["read" if read else "seen", *(groups or [])]
        self._scripts.prepare(self._admin, [self.keys.grouped(feed)], args)()

    def clear(self, feeds: Sequence[str]) -> None:
        for key in self.keys.grouped_many(feeds):
            self._scripts.prepare(self._admin, [key], ["clear"])()

    def close(self) -> None:
        return None


#: How long a cached activity lives by default (the ``activity_cache_seconds`` setting).
DEFAULT_CACHE_SECONDS = 86_400


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
        self, client: Any, namespace: str = "tidings", *, ttl_seconds: int = DEFAULT_CACHE_SECONDS
    ) -> None:
        self.client = client
        self.keys = RedisKeys(namespace)
        self.ttl_ms = ttl_seconds * 1000
        self._mget = client.mget_nonatomic if is_cluster(client) else client.mget
        self._scripts = _scripts(client)
        self._put = self._scripts.load(_script("activity_put.lua"))

    def get_many(self, activity_ids: Sequence[str]) -> dict[str, bytes]:
        if not activity_ids:
            return {}
        prefix = self.keys.activity_prefix
        return cached_docs(
            activity_ids, self._mget([prefix + bytes.fromhex(a) for a in activity_ids])
        )

    def put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> None:
        if docs:
            keys = [self.keys.activity(a) for a in docs]
            values = [cached_value(version, doc) for version, doc in docs.values()]
            self._scripts.prepare(self._put, keys, [self.ttl_ms], values)()

    def delete(self, activity_ids: Sequence[str]) -> None:
        if activity_ids:
            self.client.delete(*[self.keys.activity(a) for a in activity_ids])
