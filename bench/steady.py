"""Bench 3: fan-out into follower feeds that are already full (max_length 800).

The fixture publishes ``max_length + 50`` activities to the source through the
engine, then copies the newest ``max_length`` into every follower feed with
the timeline store (what ``follow(copy_limit=800)`` writes, batched), and
checks the feeds are full. The timed run then publishes more activities: every
write appends to a full feed and trims its oldest entry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench.harness import (
    FOLLOWER_GROUP,
    SOURCE,
    RedisServer,
    Row,
    add_follows,
    at_least,
    engine,
    follower_ids,
    human,
    percentile,
    publish,
    settle,
    timed,
    warm_up,
)
from tidings import Tidings

TARGETS = {"redis": 150_000.0}


@dataclass
class FullFeeds:
    store: str
    eng: Tidings
    feeds: list[str]
    max_length: int
    #: used_memory before and after the feeds were filled (Redis only).
    memory: dict[str, int] = field(default_factory=dict)
    published: int = 0


@contextlib.contextmanager
def full_feeds(server: RedisServer, store: str, n_feeds: int) -> Iterator[FullFeeds]:
    with engine(store, server) as eng:
        warm_up(eng)
        max_length = eng.feed_groups[FOLLOWER_GROUP].max_length
        published = max_length + 50
        for n in range(published):
            eng.add_activity(SOURCE, {"actor": "celeb", "verb": "post", "object": f"old:{n}"})
        eng.admin.drain()
        newest = eng.canonical.activities.newest_ids(SOURCE, max_length)
        feeds = follower_ids(n_feeds)
        add_follows(eng, SOURCE, feeds)
        cap = eng.deliverer.cap(FOLLOWER_GROUP)
        full = FullFeeds(store, eng, feeds, max_length, published=published)
        if store == "redis":
            full.memory["before_fill"] = server.used_memory()
        for start in range(0, n_feeds, 500):
            eng.timeline.add(feeds[start : start + 500], newest, cap)
        if store == "redis":
            full.memory["after_fill"] = server.used_memory()
        check_full(full)
        yield full


def check_full(full: FullFeeds) -> None:
    cap = full.eng.deliverer.cap(FOLLOWER_GROUP)
    for feed in full.feeds[:: max(1, len(full.feeds) // 7)]:
        held = full.eng.timeline.page(feed, limit=full.max_length + 1, before=None, cap=cap)
        if len(held) != full.max_length:
            raise RuntimeError(f"{feed} holds {len(held)}, not {full.max_length}")


def run(full: FullFeeds, activities: int) -> Row:
    settle()
    seconds = []
    for _ in range(activities):
        seconds.append(timed(lambda: publish(full.eng, SOURCE, full.published)))
        full.published += 1
    check_full(full)
    entries = len(full.feeds) * activities
    rate = entries / sum(seconds)
    goal = TARGETS.get(full.store)
    target, met = at_least(rate, goal or 0, goal is not None and len(full.feeds) >= 10_000)
    detail = {
        "entries": entries,
        "seconds": sum(seconds),
        "per_activity_p50_s": percentile(seconds, 50),
        "per_activity_max_s": max(seconds),
    }
    size = f"{human(len(full.feeds))} full feeds x {activities}"
    print(f"  steady {full.store}: {rate:,.0f} entries/s", flush=True)
    return Row(
        "fan-out, full feeds (800)", full.store, size, rate, "entries/s", target, met, detail
    )
