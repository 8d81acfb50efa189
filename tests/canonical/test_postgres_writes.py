"""PostgreSQL's write path: publishes, follows, claims and completions in a
statement or two each, storing exactly the rows SQLite's path stores.

Given the same activities and follows, both databases must hold the same
rows, byte for byte; on PostgreSQL a publish still waits for a follow of
its source (the advisory lock), and a claim takes the rows no other claim
holds without waiting for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from tidings.canonical.activities import Accepted
from tidings.canonical.db import Database
from tidings.canonical.store import CanonicalStore
from tidings.core.activity import Activity, validate

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


@pytest.fixture
def both(tmp_path: Path, postgres_url: str) -> Iterator[list[CanonicalStore]]:
    """An empty canonical store on SQLite and one on PostgreSQL."""
    stores = []
    for url in (f"sqlite:///{tmp_path / 'canonical.db'}", postgres_url):
        db = Database(url)
        db.migrate()
        stores.append(CanonicalStore(db))
    yield stores
    for store in stores:
        store.db.close()


def activity(n: int, **fields: Any) -> Activity:
    data = {"actor": "bob", "verb": "post", "object": f"photo:{n}", **fields}
    return validate(data, now=NOW)


def accepted(feed: str, item: Activity, n: int) -> Accepted:
    return Accepted(feed, item, {"timeline_aggregated": f"bob:post:{n}"}, NOW_MS * 1000 + n)


def rows(store: CanonicalStore, sql: str) -> list[tuple[Any, ...]]:
    with store.db.read() as conn:
        return [
            tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
            for r in conn.execute(text(sql))
        ]


TABLES = {
    "activities": "SELECT id, feed, foreign_id, doc, group_keys, accepted_us, version "
    "FROM tidings_activities ORDER BY id",
    "outbox": "SELECT id, kind, activity_id, source, targets, doc, group_keys, created_ms, "
    "lease_until_ms FROM tidings_outbox ORDER BY id",
    "addressed": "SELECT feed, activity_id FROM tidings_addressed ORDER BY feed, activity_id",
    "stats": "SELECT feed, followers, following, activities, follows_version "
    "FROM tidings_feed_stats ORDER BY feed",
    "follows": "SELECT follower, source, created_ms, history_from, tier, tier_ms, since_row "
    "FROM tidings_follows ORDER BY follower, source",
}


def same_rows(stores: list[CanonicalStore]) -> None:
    sqlite, postgres = stores
    for table, sql in TABLES.items():
        assert rows(postgres, sql) == rows(sqlite, sql), table


def test_publishes_alone_and_grouped_store_the_same_rows_as_on_sqlite(
    both: list[CanonicalStore],
) -> None:
    # Alone (one statement of values), then a group (one statement of rows):
    # `to`, text beyond ASCII, quotes and backslashes, foreign ids new, seen
    # before and repeated within the group, several feeds in one group.
    first = [
        accepted("user:bob", activity(1), 1),
        accepted("user:bob", activity(2, to=["notification:ann", "site:7"]), 2),
        accepted("user:eve", activity(3, foreign_id="post-3", extra={"t": 'é ☃ \\ " 𝄞'}), 3),
    ]
    group = [
        accepted("user:eve", activity(4, foreign_id="post-3"), 4),  # seen before
        accepted("user:bob", activity(5, to=["notification:ann"], extra={"n": [1, 2.5]}), 5),
        accepted("user:ann", activity(6, foreign_id="post-6"), 6),
        accepted("user:ann", activity(7, foreign_id="post-6"), 7),  # repeated in the group
        accepted("user:zed", activity(8, extra={"deep": {"a": None, "b": True}}), 8),
    ]
    results = []
    for store in both:
        made = [store.activities.add_activities([item], NOW_MS) for item in first]
        made.append(store.activities.add_activities(group, NOW_MS + 1))
        results.append(made)
    assert results[0] == results[1]
    created = [new for batch in results[1] for _, new in batch]
    assert created == [True, True, True, False, True, True, False, True]
    same_rows(both)
    # The documents read back are the activities given.
    for store in both:
        assert store.activities.get_activity(group[4].activity.id) == group[4].activity


def test_follow_many_stores_the_same_follows_and_counts_as_on_sqlite(
    both: list[CanonicalStore],
) -> None:
    history = [accepted("user:bob", activity(1), 1)]
    for store in both:
        store.activities.add_activities(history, NOW_MS)
        store.follows.follow([("timeline:ann", "user:bob"), ("timeline:eve", "user:bob")], NOW_MS)
        # Some there already, one repeated, a follower of several sources.
        again = [
            ("timeline:ann", "user:bob"),
            ("timeline:ann", "user:zed"),
            ("timeline:ann", "user:zed"),
            ("timeline:zed", "user:bob"),
            ("timeline:bob", "user:ann"),
        ]
        followed = store.follows.follow(again, NOW_MS + 5, copy_limit=10)
        assert followed.created == [
            ("timeline:ann", "user:zed"),
            ("timeline:zed", "user:bob"),
            ("timeline:bob", "user:ann"),
        ]
        store.follows.unfollow("timeline:eve", "user:bob", NOW_MS + 6)
    same_rows(both)
    sqlite, postgres = both
    assert postgres.follows.counts("user:bob") == (2, 0) == sqlite.follows.counts("user:bob")
    assert postgres.follows.counts("timeline:ann") == (0, 2)


def waiting_on_a_lock(db: Database, kind: str) -> Callable[[], bool]:
    """Whether another session of ``db`` waits on a lock of ``kind`` (pg_locks)."""

    def waits() -> bool:
        sql = f"SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = '{kind}'"
        with db.read() as conn:
            return bool(conn.execute(text(sql)).scalar_one())

    return waits


def wait_until(condition: Callable[[], bool], done: threading.Thread) -> None:
    """Block until ``condition`` holds; fail if ``done`` ended first."""
    while not condition():
        assert done.is_alive(), "the other side finished without waiting"
        done.join(0.01)


def test_a_publish_waits_for_a_follow_of_its_source_and_queues_after_it(
    postgres_url: str,
) -> None:
    db = Database(postgres_url)
    db.migrate()
    store = CanonicalStore(db)
    published: list[int] = []
    try:
        with db.write() as conn:
            # A follow's first steps: its source locked, the outbox mark read.
            db.lock_sources(conn, ["user:eve", "user:bob"], shared=False)
            mark = db.outbox_mark(conn)

            def publish() -> None:
                store.activities.add_activities([accepted("user:bob", activity(1), 1)], NOW_MS)
                published.append(1)

            publisher = threading.Thread(target=publish)
            publisher.start()
            wait_until(waiting_on_a_lock(db, "advisory"), publisher)
            assert not published
        publisher.join()
        assert published == [1]
        with db.read() as conn:
            row_id = conn.execute(text("SELECT id FROM tidings_outbox")).scalar_one()
        assert row_id > mark
    finally:
        db.close()


def test_a_claim_takes_the_rows_no_other_claim_holds_without_waiting(postgres_url: str) -> None:
    db = Database(postgres_url)
    db.migrate()
    store = CanonicalStore(db)
    try:
        for n in range(4):
            store.activities.add_activities([accepted("user:bob", activity(n), n)], NOW_MS)
        with db.write() as conn:
            # Another claim under way holds the oldest row.
            conn.execute(text("SELECT id FROM tidings_outbox WHERE id = 1 FOR UPDATE"))
            claimed = store.outbox.claim(NOW_MS, 60_000, limit=2)
            assert [r.id for r in claimed] == [2, 3]
        rest = store.outbox.claim(NOW_MS, 60_000, limit=10)
        assert [r.id for r in rest] == [1, 4]
        assert sorted(store.outbox.complete_many([*claimed, *rest])) == [1, 2, 3, 4]
        assert store.outbox.pending() == 0
    finally:
        db.close()


def test_completions_apply_only_to_rows_still_under_their_claim(postgres_url: str) -> None:
    db = Database(postgres_url)
    db.migrate()
    store = CanonicalStore(db)
    try:
        for n in range(3):
            store.activities.add_activities([accepted("user:bob", activity(n), n)], NOW_MS)
        first = store.outbox.claim(NOW_MS, 10, limit=3)
        # Their lease lapses; another claim takes two of them again.
        second = store.outbox.claim(NOW_MS + 20, 60_000, limit=2)
        assert sorted(store.outbox.complete_many(first)) == [3]
        assert sorted(store.outbox.complete_many(second)) == [1, 2]
        assert store.outbox.pending() == 0
    finally:
        db.close()
