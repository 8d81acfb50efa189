"""A delivery acts only on the outbox row it claimed, on SQLite and PostgreSQL.

A removal replaces the activity's delivery row with a retraction row. On
SQLite a plain ``INTEGER PRIMARY KEY`` gave the retraction the id of the
delivery it replaced, so the delivery still running recorded its progress on
the retraction and then completed (deleted) it: the removal was lost.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from tidings import Settings, StoreName, Tidings
from tidings.canonical.rows import OutboxRow
from tidings.canonical.schema import outbox
from tidings.core.limits import LEASE_MS

SOURCE = "user:bob"
NOTIFIED = "notification:carol"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return f"sqlite:///{tmp_path / 'claims.db'}"


def engine_on(db_url: str, task_runner: Any = "manual", **overrides: Any) -> Tidings:
    settings = Settings(database_url=db_url, timeline_store=StoreName.SQL, **overrides)
    return Tidings(settings, task_runner=task_runner)


def followed(feeds: Tidings, count: int) -> list[str]:
    followers = [f"timeline:f{i:05d}" for i in range(count)]
    for start in range(0, count, 1000):
        feeds.follow_many([(f, SOURCE) for f in followers[start : start + 1000]], copy_limit=0)
    feeds.admin.drain()
    return followers


def publish(feeds: Tidings, n: int) -> str:
    data = {"actor": "bob", "verb": "like", "object": f"photo:{n}", "to": [NOTIFIED]}
    return feeds.add_activity(SOURCE, data).id


def stored(feeds: Tidings, feed: str) -> list[str]:
    """What the timeline store holds (readers would hide ids whose activity is gone)."""
    cap = feeds.deliverer.cap(feed.partition(":")[0])
    return feeds.timeline.page(feed, limit=100, before=None, cap=cap)


def assert_retracted_everywhere(feeds: Tidings, followers: list[str]) -> None:
    assert feeds.admin.pending() == 0
    assert [f for f in followers if stored(feeds, f)] == []
    assert feeds.read_aggregates(NOTIFIED).results == []
    assert feeds.notification_counts(NOTIFIED) == (0, 0)


def test_a_removal_while_its_delivery_runs_is_carried_out(db_url: str) -> None:
    with engine_on(db_url, delivery_chunk_size=10) as feeds:
        followers = followed(feeds, 35)
        # Given a delivery a runner has claimed but not yet carried out
        activity_id = publish(feeds, 1)
        [row] = feeds.canonical.outbox.claim(feeds.clock.ms(), LEASE_MS)
        # When the activity is removed (its retraction queued)
        feeds.remove_activity(SOURCE, activity_id)
        # And the runner then carries out the row it claimed, chunk by chunk
        completed = feeds.deliverer.run(row)
        feeds.admin.drain()
        # Then the retraction was not lost: no feed holds the activity
        assert_retracted_everywhere(feeds, followers)
        assert not completed  # the delivery found itself cancelled


def test_a_claim_acts_on_its_own_row_only(db_url: str) -> None:
    with engine_on(db_url) as feeds:
        followed(feeds, 3)
        activity_id = publish(feeds, 1)
        [delivery] = feeds.canonical.outbox.claim(feeds.clock.ms(), LEASE_MS)
        assert isinstance(delivery, OutboxRow)
        feeds.remove_activity(SOURCE, activity_id)
        # The delivery's progress, release and completion change nothing now
        assert not feeds.canonical.outbox.advance(
            delivery, "timeline:f00001", feeds.clock.ms() + LEASE_MS
        )
        feeds.canonical.outbox.release(delivery)
        assert (
            feeds.canonical.outbox.split(delivery, 10, feeds.clock.ms()) is None
        )  # (Celery's path)
        assert not feeds.canonical.outbox.complete(delivery)
        [retraction] = feeds.canonical.outbox.claim(feeds.clock.ms(), LEASE_MS)
        assert isinstance(retraction, OutboxRow)
        assert retraction.kind == "retract"
        assert retraction.id != delivery.id  # ids are never reused
        assert retraction.position is None
        # Nor does a second claim of the same row, once the first lease lapsed
        [again] = feeds.canonical.outbox.claim(feeds.clock.ms() + LEASE_MS, LEASE_MS)
        assert again.id == retraction.id
        assert not feeds.canonical.outbox.complete(retraction)
        assert feeds.canonical.outbox.complete(again)
        assert feeds.admin.pending() == 0


def test_outbox_ids_are_never_reused(db_url: str) -> None:
    with engine_on(db_url) as feeds:
        publish(feeds, 1)
        first = newest_row_id(feeds)
        feeds.admin.drain()  # completes (deletes) the newest row
        publish(feeds, 2)
        assert newest_row_id(feeds) > first


def newest_row_id(feeds: Tidings) -> int:
    with feeds.db.read() as conn:
        return int(conn.execute(select(func.max(outbox.c.id))).scalar_one())


def test_removals_racing_real_deliveries_are_never_lost(db_url: str) -> None:
    # Real threads, a random interleaving per round; whichever it is, the end
    # state is the same (correctness only: nothing here is timed).
    rng = random.Random(10)
    with engine_on(db_url, task_runner="thread", delivery_chunk_size=100) as feeds:
        followers = followed(feeds, 1500)
        for n in range(4):
            activity_id = publish(feeds, n)
            threading.Event().wait(rng.uniform(0, 0.02))
            feeds.remove_activity(SOURCE, activity_id)
            wait_until_delivered(feeds)
            assert_retracted_everywhere(feeds, followers)


def wait_until_delivered(feeds: Tidings) -> None:
    idle = threading.Event()
    for _ in range(6000):  # a bound for a hung runner, not a timing assertion
        if feeds.admin.pending() == 0:
            return
        idle.wait(0.01)
    raise AssertionError("deliveries still pending")
