"""Full contents of an engine's stores, for before/after comparisons."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from tidings import Tidings
from tidings.canonical import schema
from tidings.stores.memory import MemoryAggregateStore, MemoryTimelineStore
from tidings.stores.redis import RedisTimelineStore


def snapshot(engine: Tidings) -> dict[str, Any]:
    """Every SQL row and every timeline byte (Redis values of any type, as DUMP
    serialises them, and whether they have a TTL)."""
    out: dict[str, Any] = {}
    with engine.db.read() as conn:
        for table in schema.metadata.sorted_tables:
            rows = conn.execute(select(table)).all()
            out[table.name] = sorted(tuple(row) for row in rows)
    timeline = engine.timeline
    if isinstance(timeline, RedisTimelineStore):
        client = timeline.client
        out["redis"] = {
            key: (client.dump(key), client.pttl(key) > 0) for key in sorted(client.keys("*"))
        }
    elif isinstance(timeline, MemoryTimelineStore):
        out["memory"] = {feed: list(v) for feed, v in sorted(timeline._feeds.items())}
    if isinstance(engine.aggregates, MemoryAggregateStore):
        out["aggregates"] = repr(sorted(engine.aggregates._feeds.items()))
    return out
