"""Parts built apart from the engine: nothing runs until the engine starts."""

from __future__ import annotations

import threading

import pytest

from tidings import ConfigurationError, Settings, StoreName, Tidings
from tidings.wiring import build, make_task_runner


def engine_threads() -> int:
    return sum(
        t.name.startswith(("tidings-reads", "tidings-delivery")) for t in threading.enumerate()
    )


def test_an_engine_from_parts_starts_once_and_closes_once(database_url: str) -> None:
    # Given parts for a threaded engine
    settings = Settings(database_url=database_url, timeline_store=StoreName.MEMORY)
    before = engine_threads()
    parts = build(settings, task_runner="thread")
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
        Settings(database_url=database_url, timeline_store=StoreName.MEMORY), task_runner="sync"
    )
    with Tidings.from_parts(parts) as feeds:
        feeds.follow("timeline:alice", "user:bob")
        feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p:1"})
        assert len(feeds.read("timeline:alice").results) == 1


def test_the_celery_runner_needs_an_engine_factory(database_url: str) -> None:
    parts = build(
        Settings(database_url=database_url, timeline_store=StoreName.MEMORY), task_runner="manual"
    )
    try:
        with pytest.raises(ConfigurationError, match="engine factory"):
            make_task_runner(parts.settings, parts.deliverer, "celery")
    finally:
        parts.close()


def test_wiring_sets_no_attribute_on_another_object() -> None:
    """Parts come built and connected: an assignment to ``other.attr`` in
    wiring would connect them behind their constructors' backs (a hook's
    ``connect`` is the declared way)."""
    import ast
    from pathlib import Path

    import tidings.wiring

    found: list[str] = []
    for path in Path(tidings.wiring.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Attribute) and not (
                    isinstance(target.value, ast.Name) and target.value.id == "self"
                ):
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(target)}")
    assert found == []
