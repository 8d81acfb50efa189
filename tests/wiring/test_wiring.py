"""Parts built apart from the engine: nothing runs until the engine starts."""

from __future__ import annotations

import threading

import pytest

from tidings import ConfigurationError, Settings, StoreName, Tidings
from tidings.wiring import build, runner


def engine_threads() -> int:
    return sum(
        t.name.startswith(("tidings-reads", "tidings-delivery")) for t in threading.enumerate()
    )


def test_an_engine_from_parts_starts_once_and_closes_once(database_url: str) -> None:
    # Given parts for a threaded engine
    settings = Settings(database_url=database_url, timeline_store=StoreName.MEMORY)
    before = engine_threads()
    parts = build(settings, delivery="thread")
    # When an engine is made of them, no thread runs yet
    feeds = Tidings.from_parts(parts)
    assert engine_threads() == before
    # Then starting (twice) starts the runner's and the reads' threads once
    feeds.start()
    feeds.start()
    assert engine_threads() == before + 1 + settings.delivery_threads
    posted = feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p:1"})
    assert [a.id for a in feeds.read("user:bob").results] == [posted.id]
    # And closing (twice) stops them
    feeds.close()
    feeds.close()
    assert engine_threads() == before


def test_with_starts_an_engine_from_parts(database_url: str) -> None:
    parts = build(
        Settings(database_url=database_url, timeline_store=StoreName.MEMORY), delivery="sync"
    )
    with Tidings.from_parts(parts) as feeds:
        feeds.follow("timeline:alice", "user:bob")
        feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p:1"})
        assert len(feeds.read("timeline:alice").results) == 1


def test_the_celery_runner_needs_an_engine_factory(database_url: str) -> None:
    parts = build(
        Settings(database_url=database_url, timeline_store=StoreName.MEMORY), delivery="manual"
    )
    try:
        with pytest.raises(ConfigurationError, match="engine factory"):
            runner(parts.settings, parts.deliverer, "celery")
    finally:
        parts.close()
