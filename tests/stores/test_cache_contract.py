"""One contract for every activity cache: what hydration may rely on.

A miss is always allowed (``NoCache`` always misses; Redis evicts and expires
entries); a hit must be the newest version written since the entry was last
deleted. Backends whose cache keeps what it is given (``Backend.caches``)
must hit. The Redis cache's own specifics (expiry, values from before
versions) are in ``test_activity_cache.py``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from backends import Backend
from tidings.core import ids
from tidings.stores.base import ActivityCache


@pytest.fixture
def cache(backend: Backend) -> ActivityCache:
    return backend.cache


def new_ids(n: int) -> list[str]:
    return [ids.new_id(1_700_000_000_000 + i) for i in range(n)]


def doc(version: int, name: str = "v") -> bytes:
    return b'{"%s":%d}' % (name.encode(), version)


def assert_found(
    backend: Backend, found: Mapping[str, bytes], expected: Mapping[str, bytes]
) -> None:
    """Every hit is the expected JSON; where the cache keeps entries, every one hits."""
    assert found.items() <= expected.items()
    if backend.caches:
        assert found == expected


def test_nothing_asked_nothing_found(cache: ActivityCache) -> None:
    cache.put_many({})
    cache.delete([])
    assert cache.get_many([]) == {}


def test_a_hit_is_what_was_written(backend: Backend, cache: ActivityCache) -> None:
    # Given 40 activities cached (activity keys have no hash tag: ~40 slots on a cluster)
    made = new_ids(40)
    cache.put_many({a: (1, doc(n)) for n, a in enumerate(made)})
    # When they are looked up along with ids never cached
    unknown = [ids.new_id(1_600_000_000_000) for _ in range(3)]
    found = cache.get_many([*unknown, *made[::-1]])
    # Then only cached ids are found, each with its JSON
    assert_found(backend, found, {a: doc(n) for n, a in enumerate(made)})


def test_only_the_ids_asked_for_are_found(backend: Backend, cache: ActivityCache) -> None:
    made = new_ids(10)
    cache.put_many({a: (1, doc(1)) for a in made})
    found = cache.get_many(made[3:6])
    assert_found(backend, found, dict.fromkeys(made[3:6], doc(1)))


def test_a_newer_version_replaces_an_older_one(backend: Backend, cache: ActivityCache) -> None:
    made = new_ids(20)
    cache.put_many(dict.fromkeys(made, (1, doc(1))))
    cache.put_many(dict.fromkeys(made, (3, doc(3))))
    assert_found(backend, cache.get_many(made), dict.fromkeys(made, doc(3)))


def test_an_older_version_never_replaces_a_newer_one(
    backend: Backend, cache: ActivityCache
) -> None:
    # Given version 2 of each activity cached
    made = new_ids(20)
    cache.put_many(dict.fromkeys(made, (2, doc(2))))
    # When version 1 arrives afterwards (a read's refill racing with an
    # update), for every other activity together with version 3
    cache.put_many({a: (1, doc(1)) if n % 2 else (3, doc(3)) for n, a in enumerate(made)})
    # Then only the newer versions replaced what was there
    expected = {a: doc(2) if n % 2 else doc(3) for n, a in enumerate(made)}
    assert_found(backend, cache.get_many(made), expected)


def test_an_equal_version_changes_nothing(backend: Backend, cache: ActivityCache) -> None:
    a = new_ids(1)[0]
    cache.put_many({a: (2, doc(2))})
    cache.put_many({a: (2, doc(2, "other"))})
    assert_found(backend, cache.get_many([a]), {a: doc(2)})


def test_a_deleted_entry_misses_then_takes_any_version(
    backend: Backend, cache: ActivityCache
) -> None:
    # Given cached activities, some of them deleted
    made = new_ids(10)
    cache.put_many(dict.fromkeys(made, (5, doc(5))))
    cache.delete(made[::2])
    # Then the deleted ones miss and the others are still there
    assert_found(backend, cache.get_many(made), dict.fromkeys(made[1::2], doc(5)))
    assert cache.get_many(made[::2]) == {}
    # And a deleted entry takes the next version written, however old
    cache.put_many(dict.fromkeys(made[::2], (1, doc(1))))
    assert_found(backend, cache.get_many(made[::2]), dict.fromkeys(made[::2], doc(1)))
