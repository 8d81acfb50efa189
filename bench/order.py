"""Bench: ids written out of order into full Redis feeds, against in order.

Several deliverers running at once write a stream of activities a little out
of order. Here 10,000 feeds at max_length 800, already full, take 200 new
activities through the store's ``add_each``, four activities a call (the
batches of a many-activity delivery), each feed getting its own subset of
them (three activities in four), delivery-chunk feeds a call: (a) in order,
(b) shuffled within windows of 8 activities, which is what two deliverers
interleaving their batches produce. The two orders run in alternate rounds on
freshly filled feeds, so load from elsewhere hits both alike; each reports
its best round. Then the memory of the feeds, per entry.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass

from bench.harness import RedisServer, Row, at_least, at_most, human, settle
from bench.memory import TARGET as MEMORY_TARGET
from tidings import Settings
from tidings.core import ids
from tidings.stores.base import Cap
from tidings.stores.redis import RedisTimelineStore, connect, disconnect

CAP = Cap(800)
WINDOW = 8  # activities shuffled together
BATCH = 4  # activities per add_each call
SHARE = 4  # a feed gets every activity but one in SHARE
RATIO_TARGET = 0.8  # out of order / in order
_START_MS = 1_700_000_000_000


@dataclass
class Round:
    order: str
    entries: int
    seconds: float
    #: Microseconds Redis spent running the scripts.
    redis_usec: int
    key_usage: list[int]

    @property
    def rate(self) -> float:
        return self.entries / self.seconds


def stream(activities: int, shuffled: bool, rng: random.Random) -> list[tuple[int, str]]:
    """The new activities (number, id), in the order the feeds receive them."""
    made = [(n, ids.new_id(_START_MS + (CAP.max_length + 50 + n) * 10)) for n in range(activities)]
    if shuffled:
        for start in range(0, activities, WINDOW):
            window = made[start : start + WINDOW]
            rng.shuffle(window)
            made[start : start + WINDOW] = window
    return made


def gets(feed: int, activity: int) -> bool:
    """Whether the feed numbered ``feed`` gets activity number ``activity``."""
    return (feed + activity) % SHARE != 0


def calls(
    feeds: list[str], arrived: list[tuple[int, str]], chunk: int
) -> Iterator[dict[str, list[str]]]:
    """The add_each calls: ``BATCH`` activities to ``chunk`` feeds at a time."""
    for start in range(0, len(arrived), BATCH):
        batch = arrived[start : start + BATCH]
        for first in range(0, len(feeds), chunk):
            yield {
                feed: [a for n, a in batch if gets(i, n)]
                for i, feed in enumerate(feeds[first : first + chunk], first)
            }


def fill(store: RedisTimelineStore, feeds: list[str]) -> list[str]:
    """Fill every feed with the same ids, more than it keeps; those ids."""
    old = [ids.new_id(_START_MS + n * 10) for n in range(CAP.max_length + 50)]
    for start in range(0, len(feeds), 500):
        store.add(feeds[start : start + 500], old, CAP)
    return old


def run_round(server: RedisServer, n_feeds: int, activities: int, order: str) -> Round:
    server.flush()
    client = connect(server.url)
    store = RedisTimelineStore(client, "bench")
    try:
        feeds = [f"timeline:f{i:07d}" for i in range(n_feeds)]
        old = fill(store, feeds)
        arrived = stream(activities, order == "shuffled", random.Random(7))
        work = list(calls(feeds, arrived, Settings().delivery_chunk_size))
        entries = sum(len(held) for call in work for held in call.values())
        # Load the script and take the connection before the clock starts.
        store.add_each({"timeline:warm": [old[-1]]}, CAP)
        store.add_each({"timeline:warm": [old[-2]]}, CAP)
        server.client.config_resetstat()
        settle()
        started = time.perf_counter()
        for entry in work:
            store.add_each(entry, CAP)
        seconds = time.perf_counter() - started
        _, usec = server.server_usec("evalsha")
        check(store, feeds, old, arrived)
        sample = feeds[:: max(1, n_feeds // 100)]
        usage = [server.key_usage(store.keys.feed(f)) for f in sample]
        return Round(order, entries, seconds, usec, usage)
    finally:
        store.close()
        disconnect(client)


def check(
    store: RedisTimelineStore, feeds: list[str], old: list[str], arrived: list[tuple[int, str]]
) -> None:
    """Sampled feeds hold the newest 800 of what they were given, newest first."""
    for i in range(0, len(feeds), max(1, len(feeds) // 7)):
        given = old + [a for n, a in arrived if gets(i, n)]
        expected = sorted(given)[-CAP.max_length :][::-1]
        held = store.page(feeds[i], limit=CAP.max_length + 1, before=None, cap=CAP)
        if held != expected:
            raise RuntimeError(f"{feeds[i]} does not hold the newest {CAP.max_length} ids")


def run(server: RedisServer, n_feeds: int, activities: int, repeats: int) -> list[Row]:
    """In-order and shuffled rounds, alternating; rows of the best of each."""
    rounds: dict[str, list[Round]] = {"in order": [], "shuffled": []}
    for _ in range(repeats):
        for order, done in rounds.items():
            done.append(run_round(server, n_feeds, activities, order))
            r = done[-1]
            per_entry = r.redis_usec / r.entries
            print(f"  {order}: {r.rate:,.0f} entries/s, Redis {per_entry:.2f} µs/entry", flush=True)
    best = {order: max(done, key=lambda r: r.rate) for order, done in rounds.items()}
    size = f"{human(n_feeds)} full feeds (800) x {activities}"
    rows = []
    for order, r in best.items():
        label = "in order" if order == "in order" else f"shuffled in windows of {WINDOW}"
        rows.append(
            Row(
                f"add_each, {label}, batches of {BATCH}, best of {repeats}",
                "redis",
                size,
                r.rate,
                "entries/s",
                detail={
                    "entries": r.entries,
                    "seconds": r.seconds,
                    "rates": [x.rate for x in rounds[order]],
                    "redis_usec_per_entry": r.redis_usec / r.entries,
                },
            )
        )
    ratio = best["shuffled"].rate / best["in order"].rate
    target, met = at_least(ratio, RATIO_TARGET, n_feeds >= 10_000)
    rows.append(Row("add_each, shuffled / in order", "redis", size, ratio, "", target, met))
    # The same ratio of the time Redis spent in the scripts alone (the
    # encoding in Python, the same for both orders, left out).
    cost = {order: min(x.redis_usec / x.entries for x in done) for order, done in rounds.items()}
    rows.append(
        Row(
            "add_each, Redis time per entry, in order / shuffled",
            "redis",
            size,
            cost["in order"] / cost["shuffled"],
            "",
            detail={f"{order} µs/entry": c for order, c in cost.items()},
        )
    )
    usage = statistics.mean(best["shuffled"].key_usage) / CAP.max_length
    target, met = at_most(usage, MEMORY_TARGET)
    rows.append(
        Row(
            f"memory: MEMORY USAGE key / {CAP.max_length}",
            "redis",
            f"{size}, shuffled, mean of {len(best['shuffled'].key_usage)} keys",
            usage,
            "bytes/entry",
            target,
            met,
            {"key_usage": best["shuffled"].key_usage},
        )
    )
    return rows
