"""Where time goes: a big Redis fan-out and a hydrated read, as breakdowns and cProfile.

Breakdowns time each part alone (no profiler overhead) next to the whole;
cProfile then covers every thread, since delivery may read ahead in one.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import pstats
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import hiredis

from bench.harness import (
    FOLLOWER_GROUP,
    SOURCE,
    RedisServer,
    add_follows,
    engine,
    follower_ids,
    human,
    publish,
    settle,
    timed,
    warm_up,
)
from bench.steady import full_feeds
from tidings.core import ids
from tidings.core.activity import Activity
from tidings.stores.redis.keys import RedisKeys


@contextlib.contextmanager
def profile_threads() -> Iterator[list[tuple[str, cProfile.Profile]]]:
    """cProfile the calling thread and every thread started meanwhile, one profile each."""
    profiles: list[tuple[str, cProfile.Profile]] = []

    def start(frame: FrameType, event: str, arg: Any) -> None:
        prof = cProfile.Profile()
        profiles.append((threading.current_thread().name, prof))
        prof.enable()  # replaces this hook in the new thread

    main = cProfile.Profile()
    profiles.append(("main thread", main))
    threading.setprofile(start)
    main.enable()
    try:
        yield profiles
    finally:
        main.disable()
        threading.setprofile(None)


def print_profiles(profiles: list[tuple[str, cProfile.Profile]], out: io.StringIO) -> None:
    by_name: dict[str, pstats.Stats] = {}
    for name, prof in profiles:
        stats = pstats.Stats(prof, stream=out)
        if name in by_name:
            by_name[name].add(stats)
        else:
            by_name[name] = stats
    for name, stats in by_name.items():
        print(f"--- {name}: by own time", file=out)
        stats.sort_stats("tottime").print_stats(15)
        print(f"--- {name}: by cumulative time", file=out)
        stats.sort_stats("cumulative").print_stats(20)


def breakdown(out: io.StringIO, title: str, total: float, parts: list[tuple[str, float]]) -> None:
    print(title, file=out)
    rest = total - sum(secs for _, secs in parts)
    for name, secs in [
        ("total", total),
        *parts,
        ("rest (< 0: parts overlapped in another thread)", rest),
    ]:
        print(f"  {name:<58} {secs * 1000:9.3f} ms  {secs / total:6.1%}", file=out)


def fanout(server: RedisServer, followers: int, out: io.StringIO, activities: int = 3) -> None:
    with engine("redis", server) as eng:
        warm_up(eng)
        feeds = follower_ids(followers)
        add_follows(eng, SOURCE, feeds)
        chunk = eng.settings.delivery_chunk_size
        key = RedisKeys(eng.settings.namespace).feed
        for n in range(activities):  # feeds past creation: time the append path
            publish(eng, SOURCE, n)

        settle()
        server.client.config_resetstat()
        total = timed(lambda: publish(eng, SOURCE, activities))
        lua = server.server_usec("evalsha")[1] / 1e6

        def read_followers() -> None:
            after = None
            follows = eng.canonical.follows
            while part := follows.follower_chunk(SOURCE, after, chunk, row_id=2**62):
                after = part[-1]

        parts = [feeds[i : i + chunk] for i in range(0, len(feeds), chunk)]
        keys = [[key(f) for f in part] for part in parts]
        raw = ids.decode(eng.canonical.activities.newest_ids(SOURCE, 1)[0])
        sha = "0" * 40

        def pack() -> None:
            for k in keys:
                # (hiredis's stub types the argument as a 1-tuple)
                command: Any = ("EVALSHA", sha, len(k), *k, 800, 1000, b"", "", raw)
                hiredis.pack_command(command)

        breakdown(
            out,
            f"One publish to {human(followers)} followers, append path (chunk {chunk:,}):",
            total,
            [
                ("SQL follower_chunk reads, alone", timed(read_followers)),
                ("building Redis keys, alone", timed(lambda: [[key(f) for f in p] for p in parts])),
                ("hiredis.pack_command of the EVALSHAs, alone", timed(pack)),
                ("EVALSHA add.lua inside Redis (INFO commandstats)", lua),
            ],
        )
        settle()
        with profile_threads() as profiles:
            for n in range(activities + 1, 2 * activities + 1):
                publish(eng, SOURCE, n)
        print(f"\ncProfile of {activities} more publishes:", file=out)
        print_profiles(profiles, out)


def reads(server: RedisServer, out: io.StringIO, n: int = 2000) -> None:
    with full_feeds(server, "redis", 200) as full:
        eng, feeds = full.eng, full.feeds
        cap = eng.deliverer.cap(FOLLOWER_GROUP)
        page = eng.timeline.page(feeds[0], limit=25, before=None, cap=cap)
        docs = eng.cache.get_many(page)

        def median(fn: Callable[[int], object]) -> float:
            samples = []
            for i in range(n):
                start = time.perf_counter()
                fn(i)
                samples.append(time.perf_counter() - start)
            return statistics.median(samples)

        def cursor(i: int) -> None:
            eng.cursors.encode(f"feed:{feeds[0]}", page[-1])

        def server_side(command: str) -> float:
            calls, usec = server.server_usec(command)
            return usec / 1e6 / max(calls, 1)

        settle()
        median(lambda i: eng.read(feeds[i % 200], limit=25))  # warm-up
        server.client.config_resetstat()
        total = median(lambda i: eng.read(feeds[i % 200], limit=25))
        page_lua, mget = server_side("evalsha"), server_side("mget")
        raw = [ids.decode(a) for a in page]
        breakdown(
            out,
            "\nengine.read(feed, limit=25) on a full Redis feed, medians:",
            total,
            [
                (
                    "timeline.page (EVALSHA page.lua), alone",
                    median(
                        lambda i: eng.timeline.page(feeds[i % 200], limit=26, before=None, cap=cap)
                    ),
                ),
                ("cache.get_many (MGET of 25), alone", median(lambda i: eng.cache.get_many(page))),
                (
                    "25 x Activity.from_json, alone",
                    median(lambda i: [Activity.from_json(docs[a]) for a in page]),
                ),
                ("cursor encode, alone", median(cursor)),
            ],
        )
        print("  of which (already counted above):", file=out)
        for name, secs in (
            ("page.lua inside Redis, mean per call (commandstats)", page_lua),
            ("MGET inside Redis, mean per call (commandstats)", mget),
            ("redis-py PING round trip", median(lambda i: server.client.ping())),
            ("26 x ids.encode (page: raw -> text)", median(lambda i: list(map(ids.encode, raw)))),
            (
                "25 x ids.decode (get_many: text -> raw)",
                median(lambda i: list(map(ids.decode, page))),
            ),
        ):
            print(f"    {name:<56} {secs * 1000:9.3f} ms", file=out)
        with profile_threads() as profiles:
            for i in range(n):
                eng.read(feeds[i % 200], limit=25)
        print(f"\ncProfile of {n} reads:", file=out)
        print_profiles(profiles, out)


def run(server: RedisServer, followers: int) -> str:
    out = io.StringIO()
    fanout(server, followers, out)
    reads(server, out)
    return out.getvalue()
