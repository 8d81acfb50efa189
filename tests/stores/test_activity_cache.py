"""The Redis activity cache: writes land in version order, and entries expire.

Runs on the private Redis server and on the private Redis Cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tidings import Settings, StoreName, Tidings
from tidings.core import ids
from tidings.stores.redis import RedisActivityCache, connect, disconnect

pytestmark = pytest.mark.redis


@pytest.fixture(params=["redis", "cluster"])
def redis_url_of(request: pytest.FixtureRequest) -> str:
    """URL of the private Redis server or cluster, emptied before the test."""
    fixture = "redis_url" if request.param == "redis" else "redis_cluster_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def client(redis_url_of: str) -> Iterator[Any]:
    made = connect(redis_url_of)
    yield made
    disconnect(made)


@pytest.fixture
def feeds(tmp_path: Path, redis_url_of: str) -> Iterator[Tidings]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'c.db'}",
        redis_url=redis_url_of,
        timeline_store=StoreName.REDIS,
    )
    with Tidings(settings, task_runner="sync") as engine:
        yield engine


def new_ids(n: int) -> list[str]:
    return [ids.new_id(1_700_000_000_000 + i) for i in range(n)]


def test_a_stale_write_arriving_after_a_newer_one_is_ignored(client: Any) -> None:
    cache = RedisActivityCache(client, "c")
    made = new_ids(40)  # activity keys have no hash tag: ~40 slots on a cluster
    # Given version 2 of each activity cached
    cache.put_many(dict.fromkeys(made, (2, b'{"v":2}')))
    # When version 1 arrives afterwards (a read's refill, racing with the
    # update), for every other activity together with version 3
    cache.put_many(
        {a: (1 if n % 2 else 3, b'{"v":%d}' % (1 if n % 2 else 3)) for n, a in enumerate(made)}
    )
    # Then only the newer versions replaced what was there
    assert cache.get_many(made) == {
        a: b'{"v":3}' if n % 2 == 0 else b'{"v":2}' for n, a in enumerate(made)
    }
    # And an equal version changes nothing either
    cache.put_many({made[1]: (2, b'{"v":"other"}')})
    assert cache.get_many([made[1]]) == {made[1]: b'{"v":2}'}


def test_a_removed_entry_takes_any_version(client: Any) -> None:
    cache = RedisActivityCache(client, "c")
    a = new_ids(1)[0]
    cache.put_many({a: (5, b'{"v":5}')})
    cache.delete([a])
    assert cache.get_many([a]) == {}
    cache.put_many({a: (5, b'{"v":5}')})
    assert cache.get_many([a]) == {a: b'{"v":5}'}


def test_an_entry_from_before_versions_reads_as_missing_and_is_replaced(client: Any) -> None:
    # Given an entry written by an older tidings: bare JSON, no expiry
    cache = RedisActivityCache(client, "c")
    a = new_ids(1)[0]
    client.set(cache.keys.activity(a), b'{"old":true}')
    # Then it is a miss, which the refill replaces
    assert cache.get_many([a]) == {}
    cache.put_many({a: (1, b'{"v":1}')})
    assert cache.get_many([a]) == {a: b'{"v":1}'}


def test_entries_expire(client: Any) -> None:
    # Given a cache whose entries live 10 minutes
    cache = RedisActivityCache(client, "c", ttl_seconds=600)
    made = new_ids(10)
    # When entries are written, replaced and left alone
    cache.put_many(dict.fromkeys(made, (1, b"{}")))
    cache.put_many({made[0]: (2, b"{}")})
    cache.put_many({made[1]: (1, b"{}")})
    # Then Redis expires every one within the lifetime
    for a in made:
        assert 0 < client.pttl(cache.keys.activity(a)) <= 600_000


def test_the_engine_sets_the_lifetime_from_its_settings(feeds: Tidings) -> None:
    default = Settings().activity_cache_seconds
    assert default == 86_400
    stored = feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "n:1"})
    key = feeds.cache.keys.activity(stored.id)  # type: ignore[attr-defined]
    assert 0 < feeds.cache.client.ttl(key) <= default  # type: ignore[attr-defined]


def test_a_refill_that_raced_with_an_update_is_ignored(feeds: Tidings) -> None:
    # Given an activity in a feed, not in the cache (evicted, say)
    feeds.follow("timeline:alice", "user:bob")
    stored = feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "n:1"})
    feeds.cache.delete([stored.id])
    # When a read misses it and reads it from the canonical store, then an
    # update commits and caches the new version, and only then does the
    # read's refill of the old one reach the cache
    refill = feeds.cache.put_many
    updated = []

    def update_first(docs: Mapping[str, Any]) -> None:
        feeds.cache.put_many = refill  # type: ignore[method-assign]
        updated.append(feeds.update_activity(stored.id, set={"v": 2}))
        refill(docs)

    feeds.cache.put_many = update_first  # type: ignore[method-assign]
    before = feeds.reads.json("timeline:alice", 10).results
    assert before == [stored.to_json()]
    # Then the feed shows the update, as the activity does
    assert feeds.get_activity(stored.id) == updated[0]
    assert feeds.reads.json("timeline:alice", 10).results == [updated[0].to_json()]
    assert feeds.cache.get_many([stored.id]) == {stored.id: updated[0].to_json()}
