"""Publish latency against follower count: what the API call waits for.

Publishing writes the activity and its outbox row in one transaction and the
direct targets (the source feed, ``to``) at once; followers are the runner's
work, after the call returns. So the call's latency should not depend on how
many followers the source has. Measured on the Redis store (SQLite canonical
store) for a source with 10 followers and one with 100,000, interleaved, each
delivery drained (untimed) before the next publish so the two do not share
the machine with a delivery in flight.
"""

from __future__ import annotations

import time

from bench.harness import (
    RedisServer,
    Row,
    add_follows,
    at_most,
    engine,
    follower_ids,
    percentile,
    settle,
    warm_up,
)

TARGET_RATIO = 2.0


def run(server: RedisServer, followers: int, publishes: int) -> list[Row]:
    small, big = "user:few", "user:many"
    samples: dict[str, list[float]] = {small: [], big: []}
    with engine("redis", server) as eng:
        warm_up(eng)
        add_follows(eng, small, follower_ids(10, prefix="s"))
        add_follows(eng, big, follower_ids(followers, prefix="b"))
        settle()
        for n in range(publishes):
            for source in (small, big):
                data = {"actor": source[5:], "verb": "post", "object": f"post:{n}"}
                t0 = time.perf_counter()
                eng.add_activity(source, data)
                samples[source].append((time.perf_counter() - t0) * 1000)
                eng.admin.drain()
    p99 = {source: percentile(values, 99) for source, values in samples.items()}
    ratio = p99[big] / p99[small]
    size = f"{publishes:,} publishes each"
    target, met = at_most(ratio, TARGET_RATIO, followers >= 100_000)
    print(f"  publish p99: {p99[small]:.3f} ms (10 followers), {p99[big]:.3f} ms", flush=True)
    return [
        Row(
            "publish latency, 10 followers, p50",
            "redis",
            size,
            percentile(samples[small], 50),
            "ms",
        ),
        Row("publish latency, 10 followers, p99", "redis", size, p99[small], "ms"),
        Row(
            f"publish latency, {followers:,} followers, p50",
            "redis",
            size,
            percentile(samples[big], 50),
            "ms",
        ),
        Row(f"publish latency, {followers:,} followers, p99", "redis", size, p99[big], "ms"),
        Row("publish p99 ratio (many / few followers)", "redis", size, ratio, "", target, met),
    ]
