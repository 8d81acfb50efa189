"""``Tidings.stats()``: the delivery figures ``/metrics`` reports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tidings import Settings, StoreName, Tidings
from tidings.core.results import Stats

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_stats_count_pending_and_delivered_rows_and_the_oldest_ones_age(
    database_url: str,
) -> None:
    # Given an engine whose deliveries wait for drain(), and a clock we move
    now = [T0]
    settings = Settings(database_url=database_url, timeline_store=StoreName.MEMORY)
    with Tidings(settings, task_runner="manual", clock=lambda: now[0]) as engine:
        assert engine.admin.stats() == Stats(delivered=0, pending=0, lag_seconds=0.0)
        engine.follow("timeline:bob", "user:alice")
        # When an activity is published, and 2.5 s pass before anyone delivers it
        engine.add_activity("user:alice", {"actor": "alice", "verb": "post", "object": "n:1"})
        now[0] = T0 + timedelta(seconds=2.5)
        # Then one row is pending, 2.5 s old; once drained, it is counted as delivered
        assert engine.admin.stats() == Stats(delivered=0, pending=1, lag_seconds=2.5)
        engine.admin.drain()
        assert engine.admin.stats() == Stats(delivered=1, pending=0, lag_seconds=0.0)
