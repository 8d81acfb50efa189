"""How script calls reach Redis: one server, or every node of a cluster.

The stores' writes and reads are Lua scripts (``lua/``), loaded here and
called through ``ServerScripts`` or ``ClusterScripts``, which share one
interface: ``prepare`` encodes a call now and returns what sends it. redis-py's
command path costs tens of microseconds per call, a visible share of a page
read; and packing a 5,000-key command costs about as much Python time as Redis
spends running it, so deliveries pack the next chunk while Redis runs the
current one.

On a cluster, every feed key carries its feed id as a hash tag, so a feed's
keys share a slot, but a chunk of 5,000 follower feeds spans thousands of
slots. Redis refuses a call whose declared keys span slots, so the grouped form
of each script (``lua/cluster.lua`` prepended) takes its keys in ARGV and
carries the ``allow-cross-slot-keys`` flag: it may then touch any keys of the
node it runs on. A call groups its keys by the node owning their slot, packs
one EVALSHA per node, sends them all and only then reads the replies, so the
nodes work in parallel. redis-py's cluster pipeline, one command per feed,
managed ~44k entries/s here; grouped scripts several times that.

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
from importlib import resources
from typing import Any, Protocol

import redis
from hiredis import pack_command as hiredis_pack
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from tidings.stores.redis.behind import BehindPool

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
    # (As redis.Redis.from_url, with the pool that can send writes behind.)
    client = redis.Redis(connection_pool=BehindPool.from_url(url))
    client.auto_close_connection_pool = True
    return client


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


def lua(name: str) -> str:
    """The text of the script ``lua/<name>``."""
    return resources.files("tidings.stores.redis").joinpath("lua", name).read_text()


class Scripts(Protocol):
    """What the stores call scripts through, on a server or a cluster."""

    def load(self, body: str) -> Any: ...

    def prepare(
        self,
        script: Any,
        keys: Sequence[Any],
        args: Sequence[Any],
        paired: Sequence[Any] = (),
        *,
        split: bool = False,
    ) -> Callable[[], Any]:
        """A script call encoded now, sent when called; ``paired`` (one value per
        key, in the same order) follows ``args``. ``split``: the script writes
        each key on its own, so the call may be sent as several."""
        ...


def scripts_for(client: Any) -> Scripts:
    """How scripts reach ``client``: packed on its one connection, or grouped per node."""
    if is_cluster(client):
        return ClusterScripts(client, lua("cluster.lua"))
    return ServerScripts(client)


#: Keys of one script call at most, where a caller allows splitting (writes
#: to many feeds). Redis runs a script to its end before it serves another
#: client, so a publish's small write waited behind a delivery's write of
#: thousands of feeds (~0.2 ms a publish on average, at 1,400 publishes/s);
#: calls of this size, sent together, let it in between them (Redis reads a
#: client's pipeline 16 KB at a time).
KEYS_PER_CALL = 256


class Prepared:
    """A call to one server encoded ahead (one command, or several sent
    together: a script call split by keys): calling it sends it alone, and
    ``stores.base.send_together`` sends the calls of one server in one round
    trip (through ``server.send``)."""

    __slots__ = ("commands", "packed", "script", "server")

    def __init__(
        self, server: ServerScripts, script: Any, commands: Sequence[tuple[Any, ...]]
    ) -> None:
        self.server = server
        #: The script an EVALSHA calls (reloaded if the server lost it), or None.
        self.script = script
        self.commands = tuple(commands)
        self.packed = b"".join(hiredis_pack(c) for c in self.commands)

    def __call__(self) -> Any:
        return self.server.send([self])[0]


class ServerScripts:
    """Script calls packed ahead and sent on the client's connection."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def load(self, body: str) -> Any:
        return self.client.register_script(body)

    def prepare(
        self,
        script: Any,
        keys: Sequence[Any],
        args: Sequence[Any],
        paired: Sequence[Any] = (),
        *,
        split: bool = False,
    ) -> Prepared:
        """With ``split``, calls of up to :data:`KEYS_PER_CALL` keys each (the
        script must write its keys independently); the reply is then the list
        of theirs."""
        step = KEYS_PER_CALL if split and len(keys) > KEYS_PER_CALL else max(1, len(keys))
        commands = [
            (
                "EVALSHA",
                script.sha,
                len(keys[at : at + step]),
                *keys[at : at + step],
                *args,
                *paired[at : at + step],
            )
            for at in range(0, max(1, len(keys)), step)
        ]
        return Prepared(self, script, commands)

    def command(self, *command: Any) -> Prepared:
        """A plain command (no script) encoded ahead."""
        return Prepared(self, None, [command])

    def send(self, calls: Sequence[Prepared]) -> list[Any]:
        """Send ``calls`` before reading any reply (one round trip); their
        replies (a list for a call of several commands).

        A script the server lost (restart, SCRIPT FLUSH) is loaded and its
        command sent again once every reply is read; any other error reply is
        raised, after the connection is dropped (its replies are not all read).
        """
        pool = self.client.connection_pool
        conn = pool.get_connection()
        replies: list[list[Any]] = []
        lost: list[tuple[int, int]] = []
        try:
            # One buffer: the driver makes one send call per item of a list.
            conn.send_packed_command([b"".join(call.packed for call in calls)])
            for i, call in enumerate(calls):
                replies.append([])
                for j in range(len(call.commands)):
                    try:
                        replies[i].append(conn.read_response())
                    except NoScriptError:
                        replies[i].append(None)
                        lost.append((i, j))
        except BaseException:
            # A half-read reply would poison the connection for the next user.
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        for i, j in lost:
            script = calls[i].script
            script.sha = self.client.script_load(script.script)
            again = calls[i].commands[j][2:]
            replies[i][j] = self.client.execute_command("EVALSHA", script.sha, *again)
        return [r[0] if len(r) == 1 else r for r in replies]


@dataclass
class ClusterScript:
    #: The script as written, one declared key per call (the fallback path).
    plain: Any
    #: ``lua/cluster.lua`` + the script: many slots of one node per call.
    grouped: Any


#: A node, the keys of a call to it, and the values paired with them (if any).
_Group = tuple[ClusterNode, list[Any], list[Any]]


class ClusterScripts:
    """Script calls grouped per node of a cluster, each node's call packed ahead."""

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
        *,
        split: bool = False,
    ) -> Callable[[], Any]:
        """Calls encoded now, sent when called (already one per node: ``split``
        changes nothing); the call returns the reply for a single key's node,
        else the list of every node's reply. ``paired`` (one
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
