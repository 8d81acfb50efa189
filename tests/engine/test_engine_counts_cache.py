"""Feed counts cached in Redis stay exact: every write that moves them drops
the cached entry after it commits."""

from __future__ import annotations

import pytest

from conftest import EngineFactory

pytestmark = pytest.mark.parametrize("store", ["redis", "cluster"], indirect=True)


def test_cached_counts_follow_every_change(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.users.create("bob", "bob")
    assert engine.users.counts("bob") == {"followers": 0, "following": 0, "activities": 0}
    engine.follow("timeline:x", "user:bob")  # cached above: must be dropped
    engine.follow("timeline:bob", "user:y")
    made = engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "n:1"})
    assert engine.users.counts("bob") == {"followers": 1, "following": 1, "activities": 1}
    engine.add_activities("user:bob", [{"actor": "bob", "verb": "post", "object": "n:2"}] * 2)
    engine.unfollow("timeline:x", "user:bob")
    assert engine.users.counts("bob") == {"followers": 0, "following": 1, "activities": 3}
    engine.remove_activity("user:bob", made.id)
    engine.rules.block("bob", "y")  # ends timeline:bob -> user:y
    assert engine.users.counts("bob") == {"followers": 0, "following": 0, "activities": 2}
    assert engine.users.feed_stats("user:bob").activities == 2
