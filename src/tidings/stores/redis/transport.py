"""Script calls on Redis Cluster: one call per node for a chunk of feeds.

Every feed key carries its feed id as a hash tag, so a feed's keys share a
slot, but a chunk of 5,000 follower feeds spans thousands of slots. Redis
refuses a call whose declared keys span slots, so the grouped form of each
script (``lua/cluster.lua`` prepended) takes its keys in ARGV and carries the
``allow-cross-slot-keys`` flag: it may then touch any keys of the node it runs
on. A call groups its keys by the node owning their slot, packs one EVALSHA
per node, sends them all and only then reads the replies, so the nodes work in
parallel. redis-py's cluster pipeline, one command per feed, managed ~44k
entries/s here; grouped scripts several times that.

When the slot map has moved under a call (a resharding, a failover) the node
fails the call on the first key it does not own. Every script is idempotent,
so failed groups are simply regrouped on a fresh slot map and sent again; if
that fails too, each of their keys goes through redis-py's own cluster path
(one declared key, the plain script), which follows MOVED and ASK replies.
Needs Redis 7 (script flags).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hiredis import pack_command as hiredis_pack
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError


@dataclass
class ClusterScript:
    #: The script as written, one declared key per call (the fallback path).
    plain: Any
    #: ``lua/cluster.lua`` + the script: many slots of one node per call.
    grouped: Any


#: A node, the keys of a call to it, and the values paired with them (if any).
_Group = tuple[ClusterNode, list[Any], list[Any]]


class ClusterScripts:
    """The cluster counterpart of ``_Scripts`` in ``redis.py``, same interface."""

    def __init__(self, client: RedisCluster, prelude: str) -> None:
        self.client = client
        self._prelude = prelude

    def load(self, body: str) -> ClusterScript:
        register = self.client.register_script
        return ClusterScript(register(body), register(self._prelude + "\n" + body))

    def prepare(
        self,
        script: ClusterScript,
        keys: Sequence[Any],
        args: Sequence[Any],
        paired: Sequence[Any] = (),
    ) -> Callable[[], Any]:
        """Calls encoded now, sent when called; the call returns the reply for a
        single key's node, else the list of every node's reply. ``paired`` (one
        value per key) follows ``args``, each node's call taking its keys' values."""
        groups = self._group(keys, paired)
        packed = [self._pack(script, group, args) for group in groups]
        return lambda: self._run(script, groups, packed, args)

    def _group(self, keys: Sequence[Any], paired: Sequence[Any]) -> list[_Group]:
        slots = self.client.nodes_manager.slots_cache
        by_node: dict[str, _Group] = {}
        for i, key in enumerate(keys):
            raw = key.encode() if isinstance(key, str) else key
            node = slots[key_slot(raw)][0]
            group = by_node.get(node.name)
            if group is None:
                group = by_node[node.name] = (node, [], [])
            group[1].append(key)
            if paired:
                group[2].append(paired[i])
        return list(by_node.values())

    @staticmethod
    def _pack(script: ClusterScript, group: _Group, args: Sequence[Any]) -> bytes:
        _, keys, paired = group
        command = ("EVALSHA", script.grouped.sha, 0, len(keys), *keys, *args, *paired)
        packed: bytes = hiredis_pack(command)
        return packed

    def _run(
        self, script: ClusterScript, groups: list[_Group], packed: list[bytes], args: Sequence[Any]
    ) -> Any:
        replies = self._send(groups, packed)
        failed = [i for i, reply in enumerate(replies) if isinstance(reply, Exception)]
        for i in failed:
            if isinstance(replies[i], NoScriptError):
                # First call on the node, or it lost its script cache (restart,
                # SCRIPT FLUSH): load and resend.
                groups[i][0].redis_connection.script_load(script.grouped.script)
                replies[i] = self._send([groups[i]], [packed[i]])[0]
        failed = [i for i in failed if isinstance(replies[i], Exception)]
        if failed:
            # The slot map moved (or a node went away): refresh it and regroup.
            self.client.nodes_manager.initialize()
            for i in failed:
                replies[i] = self._retry(script, groups[i][1], groups[i][2], args)
        return replies[0] if len(replies) == 1 else replies

    def _retry(
        self, script: ClusterScript, keys: list[Any], paired: list[Any], args: Sequence[Any]
    ) -> Any:
        """Send ``keys`` again, regrouped on the current slot map, then key by key."""
        groups = self._group(keys, paired)
        packed = [self._pack(script, group, args) for group in groups]
        for group in groups:
            group[0].redis_connection.script_load(script.grouped.script)
        replies = self._send(groups, packed)
        if not any(isinstance(reply, Exception) for reply in replies):
            return replies[0] if len(replies) == 1 else replies
        # redis-py's cluster client follows MOVED/ASK/TRYAGAIN for one declared key.
        singles = [
            script.plain(keys=[key], args=[*args, *paired[i : i + 1]], client=self.client)
            for i, key in enumerate(keys)
        ]
        return singles[0] if len(singles) == 1 else singles

    @staticmethod
    def _send(groups: list[_Group], packed: list[bytes]) -> list[Any]:
        """Every group's call sent before any reply is read: the nodes run in parallel.

        Error replies come back as exceptions in the list, so every connection
        is read to the end of its reply whatever the others answered.
        """
        taken = []
        replies: list[Any] = [None] * len(groups)
        try:
            for i, ((node, _, _), command) in enumerate(zip(groups, packed, strict=True)):
                pool = node.redis_connection.connection_pool
                conn = pool.get_connection()
                taken.append((i, pool, conn))
                try:
                    conn.send_packed_command([command])
                except (ConnectionError, TimeoutError) as exc:
                    replies[i] = exc
            for i, _, conn in taken:
                if replies[i] is not None:
                    continue
                try:
                    replies[i] = conn.read_response()
                except ResponseError as exc:
                    replies[i] = exc
                except (ConnectionError, TimeoutError) as exc:
                    conn.disconnect()
                    replies[i] = exc
            return replies
        except BaseException:
            # A half-read reply would poison the connection for the next user.
            for _, _, conn in taken:
                conn.disconnect()
            raise
        finally:
            for _, pool, conn in taken:
                pool.release(conn)
