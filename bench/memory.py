"""Bench 5: Redis memory per feed entry (INFO used_memory delta and MEMORY USAGE)."""

from __future__ import annotations

from bench.fanout import Fanout
from bench.harness import RedisServer, Row, at_most, feed_key, human
from bench.steady import FullFeeds

TARGET = 40.0  # bytes per entry, MEMORY USAGE of a full feed key / 800


def full_rows(full: FullFeeds, server: RedisServer, when: str) -> list[Row]:
    """Memory of the full feeds ``when`` ("after fill" or "after steady fan-out")."""
    entries = len(full.feeds) * full.max_length
    delta = server.used_memory() - full.memory["before_fill"]
    sample = full.feeds[len(full.feeds) // 2]
    usage = server.key_usage(feed_key(full.eng, sample))
    size = f"{human(len(full.feeds))} full feeds, {when}"
    target, met = at_most(usage / full.max_length, TARGET)
    return [
        Row("memory: used_memory Δ / entries", "redis", size, delta / entries, "bytes/entry"),
        Row(
            f"memory: MEMORY USAGE key / {full.max_length}",
            "redis",
            size,
            usage / full.max_length,
            "bytes/entry",
            target,
            met,
            {"key_usage": usage, "used_memory_delta": delta, "entries": entries},
        ),
    ]


def fanout_rows(result: Fanout) -> list[Row]:
    """Memory right after a fan-out into feeds that were empty (not yet full)."""
    m = result.memory
    held = len(result.seconds)
    size = f"{human(result.followers)} feeds holding {held}, after fan-out"
    return [
        Row("memory: used_memory Δ / entries", "redis", size, m["per_entry"], "bytes/entry"),
        Row(
            f"memory: MEMORY USAGE key / {held}",
            "redis",
            size,
            m["key_per_entry"],
            "bytes/entry",
            detail=dict(m),
        ),
    ]
