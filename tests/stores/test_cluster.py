"""Redis Cluster specifics; the contract suites run on a cluster as well.

Every test here runs against the private 3-master cluster of ``conftest``.
Slots are moved by hand (CLUSTER SETSLOT) to check that a client holding a
stale slot map still writes every feed exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.crc import key_slot

from servers import RedisCluster, RedisServer
from tidings.core import ids
from tidings.stores.base import Cap
from tidings.stores.redis import RedisActivityCache, RedisTimelineStore, connect

CAP = Cap(800)


@pytest.fixture
def client(redis_cluster_url: str) -> Iterator[Any]:
    made = connect(redis_cluster_url)
    yield made
    made.close()


@pytest.fixture
def timeline(client: Any) -> RedisTimelineStore:
    return RedisTimelineStore(client, "c")


def new_ids(n: int) -> list[str]:
    return [ids.new_id(1_700_000_000_000 + i) for i in range(n)]


def node_of(cluster: RedisCluster, key: str) -> RedisServer:
    """The node serving ``key``'s slot, asked of the cluster itself."""
    slot = key_slot(key.encode())
    for node in cluster.nodes:
        conn: Any = redis.Redis(host="127.0.0.1", port=node.port)
        try:
            owner = conn.execute_command("CLUSTER", "SLOTS")
            for start, end, master, *_ in owner:
                if start <= slot <= end and master[1] == node.port:
                    return node
        finally:
            conn.close()
    raise AssertionError(f"no node serves slot {slot}")


def node_id(node: RedisServer) -> str:
    conn: Any = redis.Redis(host="127.0.0.1", port=node.port)
    try:
        return str(conn.execute_command("CLUSTER", "MYID").decode())
    finally:
        conn.close()


def evalsha_calls(node: RedisServer) -> int:
    conn = redis.Redis(host="127.0.0.1", port=node.port)
    try:
        stats = conn.info("commandstats").get("cmdstat_evalsha", {"calls": 0})
        return int(stats["calls"])
    finally:
        conn.close()


def reset_stats(cluster: RedisCluster) -> None:
    for node in cluster.nodes:
        node.command("CONFIG", "RESETSTAT")


def test_a_cluster_url_gives_a_cluster_client(client: Any) -> None:
    assert isinstance(client, redis.RedisCluster)
    assert len(client.nodes_manager.get_nodes_by_server_type("primary")) == 3


def test_a_chunk_of_feeds_is_one_script_call_per_node(
    redis_cluster: RedisCluster, timeline: RedisTimelineStore
) -> None:
    feeds = [f"timeline:u{i}" for i in range(300)]  # every node owns some of these
    owners = {node_of(redis_cluster, timeline.keys.feed(f)).port for f in feeds[:30]}
    assert len(owners) == 3
    a = new_ids(2)
    timeline.add(feeds, a[:1], CAP)  # the first call on each node loads the script
    reset_stats(redis_cluster)
    timeline.add(feeds, a[1:], CAP)
    assert [evalsha_calls(node) for node in redis_cluster.nodes] == [1, 1, 1]
    for feed in feeds[::37]:
        assert timeline.page(feed, limit=10, before=None, cap=CAP) == a[::-1]


def test_a_write_after_a_slot_moved_lands_once_on_its_new_node(
    redis_cluster: RedisCluster, client: Any, timeline: RedisTimelineStore
) -> None:
    # Given a client whose slot map predates a slot's move to another node
    feeds = [f"timeline:m{i}" for i in range(60)]
    client.get_primaries()  # the map is loaded
    moved = feeds[0]
    slot = key_slot(timeline.keys.feed(moved).encode())
    source = node_of(redis_cluster, timeline.keys.feed(moved))
    target = next(n for n in redis_cluster.nodes if n is not source)
    for node in [target, source, *redis_cluster.nodes]:
        node.command("CLUSTER", "SETSLOT", str(slot), "NODE", node_id(target))
    # When a chunk that includes a feed in that slot is delivered
    a = new_ids(3)
    timeline.add(feeds, a[:2], CAP)
    timeline.add(feeds, a[2:], CAP)
    # Then every feed holds every id once, and the moved feed lives on the target
    for feed in feeds:
        assert timeline.page(feed, limit=10, before=None, cap=CAP) == a[::-1]
    assert node_of(redis_cluster, timeline.keys.feed(moved)) is target


def test_a_write_during_a_slot_migration_follows_the_ask_redirect(
    redis_cluster: RedisCluster, client: Any, timeline: RedisTimelineStore
) -> None:
    # Given a slot half-way through a migration, its feed not on the source
    feeds = [f"timeline:k{i}" for i in range(40)]
    migrating = feeds[0]
    slot = str(key_slot(timeline.keys.feed(migrating).encode()))
    source = node_of(redis_cluster, timeline.keys.feed(migrating))
    target = next(n for n in redis_cluster.nodes if n is not source)
    target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(source))
    source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(target))
    try:
        # When a chunk including that feed is delivered, it is written on the target
        a = new_ids(2)
        timeline.add(feeds, a, CAP)
    finally:
        # The migration completes (the session's cluster is left consistent either way).
        for node in [target, source, *redis_cluster.nodes]:
            node.command("CLUSTER", "SETSLOT", slot, "NODE", node_id(target))
    # Then every feed reads back right
    client.nodes_manager.initialize()
    for feed in feeds:
        assert timeline.page(feed, limit=10, before=None, cap=CAP) == a[::-1]


def test_activity_cache_spans_slots(client: Any) -> None:
    cache = RedisActivityCache(client, "c")
    made = new_ids(50)  # activity keys have no hash tag: 50 keys, ~50 slots
    cache.put_many({a: (1, f'{{"n":{i}}}'.encode()) for i, a in enumerate(made)})
    assert cache.get_many([*made, ids.new_id(1)]) == {
        a: f'{{"n":{i}}}'.encode() for i, a in enumerate(made)
    }
    cache.delete(made[:25])
    assert sorted(cache.get_many(made)) == sorted(made[25:])
