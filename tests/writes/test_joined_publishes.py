"""Where the feeds are rows of the canonical SQLite database (the SQL store),
a publish writes its own feed in its own transaction, a batch of deliveries
commits its entries with the completion of its rows, and a copy commits its
entries with its progress: each all or nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

from conftest import EngineFactory
from tidings import Tidings
from tidings.delivery import copies

#: Writes join only on SQLite (see Deliverer.joins_writes).
joined = pytest.mark.parametrize("store", ["sql"])
sql_stores = pytest.mark.parametrize("store", ["sql", "postgres"])


class Boom(RuntimeError):
    pass


def fail_once(target: object, name: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make ``target.name`` raise on its first call; the calls made so far."""
    real: Callable[..., Any] = getattr(target, name)
    calls: list[int] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise Boom(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, failing)
    return calls


def feed(engine: Tidings, feed_id: str) -> list[str]:
    return [a.id for a in engine.read(feed_id, limit=100).results]


@sql_stores
def test_writes_join_on_sqlite_only(make_engine: EngineFactory, store: str) -> None:
    # On PostgreSQL an unfollow could commit between a batch's look at the
    # unfollow log and its commit (see Deliverer.joins_writes).
    assert make_engine(task_runner="manual").deliverer.joins_writes == (store == "sql")


@joined
def test_a_publish_whose_own_feed_write_fails_stores_nothing(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(task_runner="manual")
    engine.follow("timeline:b", "user:a", copy_limit=0)
    prepare = engine.timeline.prepare_add_each

    def failing_write(*args: Any, **kwargs: Any) -> Callable[[], None]:
        prepare(*args, **kwargs)

        def write() -> None:
            raise Boom("own feed")

        return write

    monkeypatch.setattr(engine.timeline, "prepare_add_each", failing_write)
    with pytest.raises(Boom):
        engine.add_activity("user:a", {"actor": "a", "verb": "post", "object": "n:1"})
    assert engine.admin.pending() == 0
    assert feed(engine, "user:a") == []
    # The next publish goes through, its own feed written with it.
    monkeypatch.undo()
    stored = engine.add_activity("user:a", {"actor": "a", "verb": "post", "object": "n:2"})
    assert feed(engine, "user:a") == [stored.id]
    engine.admin.drain()
    assert feed(engine, "timeline:b") == [stored.id]


@joined
def test_a_batch_whose_completion_fails_writes_no_entry_and_is_done_again_once(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(task_runner="manual")
    engine.follow_many([(f"timeline:f{i}", "user:a") for i in range(5)], copy_limit=0)
    made = [
        engine.add_activity("user:a", {"actor": "a", "verb": "post", "object": f"n:{n}"}).id
        for n in range(3)
    ]
    calls = fail_once(engine.canonical.outbox, "complete_many", monkeypatch)
    with pytest.raises(Boom):
        engine.deliverer.run_pass()
    # Rolled back with the failed completion: no follower's feed holds anything.
    assert all(stored(engine, f"timeline:f{i}") == [] for i in range(5))
    assert engine.admin.pending() == 3
    engine.admin.drain()
    assert len(calls) == 2
    for i in range(5):
        assert stored(engine, f"timeline:f{i}") == sorted(made, reverse=True)
    assert engine.admin.pending() == 0


@joined
def test_a_copy_whose_completion_fails_is_left_whole_to_the_runner(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(task_runner="manual")
    made = [
        engine.add_activity("user:a", {"actor": "a", "verb": "post", "object": f"n:{n}"}).id
        for n in range(4)
    ]
    engine.admin.drain()
    newest = sorted(made, reverse=True)[:3]  # (ids of one millisecond sort in any order)
    fail_once(engine.canonical.outbox, "complete", monkeypatch)
    engine.follow("timeline:b", "user:a", copy_limit=3)
    # The copy's entries went with its failed completion, and its row waits
    # for the runner; reads show the copied span meanwhile (the follow's
    # history starts at its oldest activity).
    assert stored(engine, "timeline:b") == []
    assert engine.admin.pending() == 1
    assert feed(engine, "timeline:b") == newest
    engine.admin.drain()
    assert stored(engine, "timeline:b") == newest
    assert engine.admin.pending() == 0


@joined
def test_a_copy_chunk_whose_progress_fails_is_taken_back_and_redone(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks of two follows (6 entries at copy_limit 3): the first chunk's
    # progress fails, so its entries go with it and the runner does it all.
    monkeypatch.setattr(copies, "COPY_ENTRIES", 6)
    engine = make_engine(task_runner="manual")
    made = [
        engine.add_activity("user:a", {"actor": "a", "verb": "post", "object": f"n:{n}"}).id
        for n in range(4)
    ]
    engine.admin.drain()
    newest = sorted(made, reverse=True)[:3]
    calls = fail_once(engine.canonical.outbox, "advance", monkeypatch)
    followers = [f"timeline:f{i}" for i in range(5)]
    engine.follow_many([(f, "user:a") for f in followers], copy_limit=3)
    assert all(stored(engine, f) == [] for f in followers)
    engine.admin.drain()
    assert len(calls) == 3  # the failed one, then two chunks' progress
    assert all(stored(engine, f) == newest for f in followers)
    assert engine.admin.pending() == 0


@sql_stores
def test_a_write_finding_some_entries_there_keeps_exact_sizes(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(task_runner="manual")
    cap = engine.deliverer.cap("timeline")
    a = [
        engine.add_activity("user:a", {"actor": "a", "verb": "post", "object": f"n:{n}"}).id
        for n in range(6)
    ]
    engine.timeline.add_each({"timeline:x": a[:3], "timeline:y": a[:1]}, cap)
    # Half of it there already: the sizes count each entry once.
    engine.timeline.add_each({"timeline:x": a[1:5], "timeline:y": a[:2], "timeline:z": a[:1]}, cap)
    with engine.db.read() as conn:
        sizes: dict[str, int] = dict(
            conn.execute(text("SELECT feed, n FROM tidings_feed_sizes")).all()
        )
    assert {f: sizes[f] for f in ("timeline:x", "timeline:y", "timeline:z")} == {
        "timeline:x": 5,
        "timeline:y": 2,
        "timeline:z": 1,
    }
    assert stored(engine, "timeline:x") == sorted(a[:5], reverse=True)


@joined
def test_a_batch_writing_entries_there_already_keeps_its_other_writes(
    make_engine: EngineFactory,
) -> None:
    # The runner writes the direct targets again when this process did not
    # (another process published): the own feed's entry is there already, so
    # the insert is taken back to its savepoint and made again inside the
    # batch's transaction, whose other writes stay.
    engine = make_engine(task_runner="manual")
    engine.follow_many([(f"timeline:f{i}", "user:a") for i in range(3)], copy_limit=0)
    made = engine.add_activity("user:a", {"actor": "a", "verb": "post", "object": "n:1"}).id
    assert engine.deliverer.direct.take(made)  # as if published elsewhere
    engine.admin.drain()
    assert engine.admin.pending() == 0
    with engine.db.read() as conn:
        sizes: dict[str, int] = dict(
            conn.execute(text("SELECT feed, n FROM tidings_feed_sizes")).all()
        )
    assert sizes == {"user:a": 1, "timeline:f0": 1, "timeline:f1": 1, "timeline:f2": 1}
    assert all(stored(engine, f"timeline:f{i}") == [made] for i in range(3))


def stored(engine: Tidings, feed_id: str) -> list[str]:
    """What the timeline store itself holds for ``feed_id``."""
    cap = engine.deliverer.cap(feed_id.partition(":")[0])
    return engine.timeline.page(feed_id, limit=100, before=None, cap=cap)


@sql_stores
def test_follow_many_with_some_follows_there_already_makes_only_the_new_ones(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(task_runner="manual")
    engine.follow_many([("timeline:a", "user:s1"), ("timeline:b", "user:s2")], copy_limit=0)
    pairs = [(f"timeline:{f}", f"user:s{s}") for f in "abc" for s in (1, 2, 3)]
    made = engine.follow_many(pairs, copy_limit=0)
    assert made == [
        p for p in pairs if p not in {("timeline:a", "user:s1"), ("timeline:b", "user:s2")}
    ]
    assert engine.follow_many(pairs, copy_limit=0) == []
    assert engine.counts("user:s1") == (3, 0)  # (followers, following)
    assert engine.counts("timeline:a") == (0, 3)
