"""Bench 11: the everyday workload: many activities, each to a small audience.

A seeded graph of ``users`` users and about ``follows`` follows, made with
``follow_many(copy_limit=0)``: user *i* (``user:u0000`` is the most
followed) is followed by about ``c / (i + 1) ** a`` of the others' timeline
feeds, each follower drawn uniformly. ``a`` and ``c`` are solved for so that
the follows add up and a publisher drawn by popularity (probability ∝
follower count) has the mean fan-out ``popular_mean``; a publisher drawn
uniformly has ``follows / users``. On it, per store (SQLite; SQLite canonical
+ Redis timelines; PostgreSQL canonical + Redis timelines):

- **End to end**: the app thread publishes activities as fast as it can
  (publishers drawn uniformly, then by popularity) while the default
  in-process runner (one delivery thread) delivers; timed from the first
  ``add_activity`` until no outbox row is pending. Entries are the
  followers' plus the one direct write per activity (the source's own feed).
  After the backlog rows below, the uniform draw again from ``PUBLISHERS``
  app threads at once (as a web server's request threads publish: their
  publishes share commits), and where the feeds are in Redis, both draws
  again from one thread with the process runner (``task_runner="process"``:
  delivery in a child process, on the other core).
- **One vs two deliverers** on the same backlog: a manual-delivery engine
  publishes the backlog (nothing delivers it), then an engine with a thread
  runner of ``delivery_threads`` 1 or 2 on the same stores delivers it;
  timed from starting that runner until nothing is pending. Every round
  publishes the same publishers in the same order, and rounds run 1, 2, 2, 1
  so a drift (feeds filling, load from elsewhere) hits both alike.
- **One activity to 100k followers** (:func:`bench.fanout.run_one`) on the
  same store, so everyday entries/s read as a share of the big fan-out's.

On SQLite + Redis, the **delivery lag**: activities published at half the
end-to-end maximum for ``lag_seconds``, each timed from ``add_activity``
returning until its outbox row is complete, that is until it is readable in
every follower feed. The one delivery thread carries out rows in id order
(claims are oldest first, run one after another), so once ``stats().delivered``
has grown by *k*, the first *k* activities are done; a monitor thread polls
it every millisecond, and for a sample of activities reads a follower's feed
at that moment to check the entry is there.

Last, **follow_many** on SQLite with its default ``copy_limit``: new
followers follow sources holding some history, in batches of the API's
maximum, each follow copying that history into the follower's feed.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import fanout, peer
from bench.harness import (
    PostgresServer,
    RedisServer,
    Row,
    at_least,
    at_most,
    human,
    percentile,
    settle,
)
from tidings import Settings, StoreName, Tidings
from tidings.core.limits import MAX_FOLLOW_BATCH, MAX_PAGE_SIZE
from tidings.wiring import build

SEED = 11
#: The issue's targets.
TARGET_UNIFORM = {"SQLite": 1_500.0, "SQLite + Redis": 2_000.0}  # activities/s
#: App threads publishing at once in the concurrent end-to-end run.
PUBLISHERS = 8
TARGET_POPULAR = {"SQLite": 150_000.0}  # entries/s; any store with Redis: TARGET_POPULAR_REDIS
TARGET_POPULAR_REDIS = 300_000.0
TARGET_TWO_DELIVERERS = 0.9  # two deliverers' rate ÷ one's
TARGET_BIG_RATIO = 0.6  # everyday entries/s ÷ the 100k-follower fan-out's
TARGET_LAG_P99_MS = 100.0
TARGET_FOLLOWS = 20_000.0  # follows/s
#: The production path's targets (issue 31): PostgreSQL + Redis against
#: SQLite + Redis in the same run, end to end, and its follow_many (copy_limit 0).
TARGET_POSTGRES_UNIFORM = 0.9
TARGET_POSTGRES_POPULAR = 0.8
TARGET_POSTGRES_FOLLOWS = 30_000.0  # follows/s
#: How long a phase may wait for its deliveries before the bench gives up.
DELIVERY_TIMEOUT_S = 600.0
#: Every ``CHECK_EVERY``-th activity of the lag run is looked up in a follower's feed.
CHECK_EVERY = 10


@dataclass(frozen=True)
class Sizes:
    users: int
    follows: int
    #: The mean fan-out of publishers drawn by popularity the graph is tuned for.
    popular_mean: float
    uniform_activities: int
    popular_activities: int
    #: Activities of each backlog of the one-vs-two-deliverers rounds.
    backlog: int
    #: Pairs of rounds (1, 2 deliverers then 2, 1) per store.
    backlog_pairs: int
    big_followers: int
    big_activities: int
    lag_seconds: float
    history_sources: int
    #: Activities each history source holds before the follow_many run.
    history: int
    new_follows: int
    #: Sources each new follower follows.
    follows_each: int
    #: Whether the targets apply (they are for the full sizes).
    targets: bool


FULL = Sizes(
    users=2_000,
    follows=100_000,
    popular_mean=570.0,
    uniform_activities=3_000,
    # Fewer: on SQLite alone these take ~25 s before any speed-up.
    popular_activities=400,
    # Long enough (seconds per round on SQLite + Redis) that starting the
    # runner's threads is not what is measured.
    backlog=1_000,
    backlog_pairs=1,
    big_followers=100_000,
    big_activities=3,
    lag_seconds=10.0,
    history_sources=200,
    history=20,
    new_follows=20_000,
    follows_each=10,
    targets=True,
)
QUICK = Sizes(
    users=400,
    follows=10_000,
    popular_mean=120.0,
    uniform_activities=300,
    popular_activities=100,
    backlog=100,
    backlog_pairs=1,
    big_followers=10_000,
    big_activities=2,
    lag_seconds=2.0,
    history_sources=50,
    history=20,
    new_follows=2_000,
    follows_each=10,
    targets=False,
)


# -- the graph -------------------------------------------------------------------


@dataclass
class Graph:
    users: list[str]
    #: Indexes of the users whose timelines follow each user.
    followers: list[list[int]]
    exponent: float
    scale: float

    def source(self, i: int) -> str:
        return f"user:{self.users[i]}"

    def timeline(self, i: int) -> str:
        return f"timeline:{self.users[i]}"

    def fanout(self, i: int) -> int:
        return len(self.followers[i])

    @property
    def pairs(self) -> int:
        return sum(len(f) for f in self.followers)

    @property
    def uniform_mean(self) -> float:
        return self.pairs / len(self.users)

    @property
    def popular_mean(self) -> float:
        return sum(len(f) ** 2 for f in self.followers) / self.pairs

    def draw(self, rng: random.Random, how: str, n: int) -> list[int]:
        """``n`` publishers: uniformly, or by popularity (∝ follower count)."""
        if how == "uniform":
            return [rng.randrange(len(self.users)) for _ in range(n)]
        weights = [len(f) for f in self.followers]
        return rng.choices(range(len(self.users)), weights=weights, k=n)

    def entries(self, picks: Sequence[int]) -> int:
        """Feed writes of publishing ``picks``: followers, and each source's own feed."""
        return sum(self.fanout(i) for i in picks) + len(picks)


def follower_counts(users: int, follows: int, exponent: float) -> tuple[list[int], float]:
    """Follower counts ``min(users - 1, c / (i + 1) ** exponent)`` adding up to
    ``follows``, rounded by largest remainder, and ``c``."""
    cap = users - 1
    weights = [(i + 1) ** -exponent for i in range(users)]
    tail = sum(weights)
    # The k most followed are capped: the first k for which the rest, scaled to
    # make up the remainder, stay under the cap.
    for k in range(users):
        scale = (follows - k * cap) / tail
        if scale * weights[k] <= cap:
            break
        tail -= weights[k]
    real = [min(cap, scale * w) for w in weights]
    counts = [int(x) for x in real]
    short = follows - sum(counts)
    by_remainder = sorted(range(users), key=lambda i: counts[i] - real[i])
    for i in by_remainder[:short]:
        counts[i] += 1
    return counts, scale


def solve_exponent(users: int, follows: int, popular_mean: float) -> float:
    """The exponent that gives publishers drawn by popularity ``popular_mean``
    followers on average (that mean grows with the exponent)."""
    low, high = 0.0, 4.0
    for _ in range(50):
        mid = (low + high) / 2
        counts, _ = follower_counts(users, follows, mid)
        if sum(c * c for c in counts) / follows < popular_mean:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def build_graph(sizes: Sizes) -> Graph:
    exponent = solve_exponent(sizes.users, sizes.follows, sizes.popular_mean)
    counts, scale = follower_counts(sizes.users, sizes.follows, exponent)
    rng = random.Random(SEED)
    followers = []
    for i, n in enumerate(counts):
        # n distinct others: a sample of users - 1 indexes, shifted past i.
        picked = rng.sample(range(sizes.users - 1), n)
        followers.append(sorted(j + (j >= i) for j in picked))
    users = [f"u{i:04d}" for i in range(sizes.users)]
    return Graph(users, followers, exponent, scale)


def follow_graph(eng: Tidings, graph: Graph) -> float:
    """Make the graph's follows through the API (no history to copy); its seconds."""
    pairs = [
        (graph.timeline(j), graph.source(i))
        for i, followers in enumerate(graph.followers)
        for j in followers
    ]
    start = time.perf_counter()
    for at in range(0, len(pairs), MAX_FOLLOW_BATCH):
        eng.follow_many(pairs[at : at + MAX_FOLLOW_BATCH], copy_limit=0)
    return time.perf_counter() - start


# -- stores and engines ----------------------------------------------------------------


@dataclass(frozen=True)
class Store:
    name: str
    timeline: str
    postgres: bool


STORES = (
    Store("SQLite", "sql", postgres=False),
    Store("SQLite + Redis", "redis", postgres=False),
    Store("PostgreSQL + Redis", "redis", postgres=True),
)
#: ``--only everyday_redis``: the two stores the production path compares.
REDIS_STORES = STORES[1:]


@contextlib.contextmanager
def database(store: Store, postgres: PostgresServer) -> Iterator[str]:
    """The URL of an empty canonical database for ``store``, removed afterwards."""
    if store.postgres:
        with postgres.database() as url:
            yield url
        return
    tmp = tempfile.mkdtemp(prefix="tidings-bench-everyday-")
    try:
        yield f"sqlite:///{tmp}/bench.db"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def settings(store: Store, server: RedisServer, url: str, threads: int = 1) -> Settings:
    options: dict[str, Any] = {
        "database_url": url,
        "timeline_store": store.timeline,
        "delivery_threads": threads,
    }
    if store.timeline == "redis":
        options["redis_url"] = server.url
    return Settings(**options)


def wait_delivered(eng: Tidings) -> None:
    """Return once no outbox row is pending (every delivery complete)."""
    deadline = time.perf_counter() + DELIVERY_TIMEOUT_S
    while eng.admin.pending():
        if time.perf_counter() > deadline:
            raise RuntimeError(f"deliveries still pending after {DELIVERY_TIMEOUT_S:.0f} s")
        # Coarse enough that polling takes little from the deliverer, fine
        # enough against phases of seconds.
        time.sleep(0.005)


def publish_all(
    eng: Tidings, graph: Graph, picks: Sequence[int], tag: str, threads: int = 1
) -> list[str]:
    """Publish an activity for each of ``picks`` (from ``threads`` threads at
    once, thread *k* the picks *k*, *k* + ``threads``, …); their ids, in the
    order of ``picks``."""
    if threads > 1:
        ids: list[str | None] = [None] * len(picks)

        def share(k: int) -> None:
            ids[k::threads] = publish_all(eng, graph, picks[k::threads], f"{tag}-{k}")

        workers = [threading.Thread(target=share, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        done = [i for i in ids if i is not None]
        if len(done) != len(picks):
            raise RuntimeError("a publishing thread failed")
        return done
    return [
        eng.add_activity(
            graph.source(i), {"actor": graph.users[i], "verb": "post", "object": f"{tag}:{n}"}
        ).id
        for n, i in enumerate(picks)
    ]


def check_delivered(eng: Tidings, graph: Graph, picks: Sequence[int], ids: Sequence[str]) -> None:
    """The last pick's activity is in its source's last follower's feed."""
    i, activity = picks[-1], ids[-1]
    if graph.followers[i]:
        feed = graph.timeline(graph.followers[i][-1])
        held = [a.id for a in eng.read(feed, limit=MAX_PAGE_SIZE).results]
        if activity not in held:
            raise RuntimeError(f"{feed} does not hold {activity} once nothing is pending")


# -- end to end -----------------------------------------------------------------------


@dataclass
class EndToEnd:
    store: str
    draw: str
    activities: int
    entries: int
    #: Seconds of the add_activity calls alone, and until nothing was pending.
    publish_s: float
    total_s: float
    #: App threads publishing at once, and the runner delivering.
    publishers: int = 1
    runner: str = "thread"

    @property
    def how(self) -> str:
        """How it ran, where not one app thread and the thread runner."""
        parts = [f"{self.publishers} publishing threads"] if self.publishers > 1 else []
        if self.runner != "thread":
            parts.append(f"{self.runner} runner")
        return ", ".join(parts)

    @property
    def rate(self) -> float:
        return self.activities / self.total_s

    @property
    def entry_rate(self) -> float:
        return self.entries / self.total_s

    @property
    def publish_rate(self) -> float:
        return self.activities / self.publish_s


def end_to_end(
    eng: Tidings,
    graph: Graph,
    store: Store,
    draw: str,
    picks: Sequence[int],
    *,
    publishers: int = 1,
    runner: str = "thread",
) -> EndToEnd:
    wait_delivered(eng)
    settle()
    start = time.perf_counter()
    tag = f"e2e-{draw}-{publishers}-{runner}"
    ids = publish_all(eng, graph, picks, tag, publishers)
    published = time.perf_counter()
    wait_delivered(eng)
    end = time.perf_counter()
    check_delivered(eng, graph, picks, ids)
    run = EndToEnd(
        store.name,
        draw,
        len(picks),
        graph.entries(picks),
        published - start,
        end - start,
        publishers,
        runner,
    )
    how = f" ({run.how})" if run.how else ""
    print(
        f"  {store.name}, {draw}{how}: {run.rate:,.0f} activities/s,"
        f" {run.entry_rate:,.0f} entries/s end to end; publish calls {run.publish_rate:,.0f}/s",
        flush=True,
    )
    return run


# -- one vs two deliverers --------------------------------------------------------------


@dataclass
class Drains:
    store: str
    activities: int
    entries: int
    #: Seconds each round took to deliver its backlog, by delivery threads.
    seconds: dict[int, list[float]] = field(default_factory=dict)
    #: Seconds of publishing each backlog with nothing delivering.
    publish_s: list[float] = field(default_factory=list)

    def rate(self, threads: int) -> float:
        """Entries/s of ``threads`` deliverers, over all their rounds."""
        return self.entries * len(self.seconds[threads]) / sum(self.seconds[threads])

    @property
    def publish_rate(self) -> float:
        return self.activities * len(self.publish_s) / sum(self.publish_s)


def drain_backlog(config: Settings) -> float:
    """Seconds an engine with a thread runner of ``config.delivery_threads`` takes
    to carry out every pending row, from starting its runner."""
    eng = Tidings.from_parts(build(config, task_runner="thread"))
    try:
        start = time.perf_counter()
        eng.start()
        # The runner's threads wake on notify, else on their one-second poll.
        eng.task_runner.notify()
        wait_delivered(eng)
        return time.perf_counter() - start
    finally:
        eng.close()


def drains(
    server: RedisServer, store: Store, url: str, graph: Graph, picks: Sequence[int], pairs: int
) -> Drains:
    result = Drains(store.name, len(picks), graph.entries(picks), {1: [], 2: []})
    with Tidings(settings(store, server, url), task_runner="manual") as publisher:
        for n, threads in enumerate([1, 2, 2, 1] * pairs):
            settle()
            start = time.perf_counter()
            ids = publish_all(publisher, graph, picks, f"backlog{n}")
            result.publish_s.append(time.perf_counter() - start)
            result.seconds[threads].append(drain_backlog(settings(store, server, url, threads)))
            check_delivered(publisher, graph, picks, ids)
    one, two = result.rate(1), result.rate(2)
    print(
        f"  {store.name}, backlog of {len(picks):,}: {one:,.0f} entries/s by one deliverer,"
        f" {two:,.0f} by two ({two / one:.2f}x)",
        flush=True,
    )
    return result


# -- delivery lag -----------------------------------------------------------------------


@dataclass
class Lag:
    store: str
    draw: str
    rate: float
    activities: int
    #: Milliseconds from add_activity returning until the activity was delivered.
    samples: list[float]
    checked: int


def delivery_lag(
    eng: Tidings, graph: Graph, store: Store, draw: str, picks: Sequence[int], rate: float
) -> Lag:
    """Publish ``picks`` at ``rate`` a second; the delay of each one's delivery."""
    if eng.settings.delivery_threads != 1:
        raise RuntimeError("rows complete in publishing order only with one delivery thread")
    wait_delivered(eng)
    settle()
    n = len(picks)
    returned = [0.0] * n
    done = [0.0] * n
    ids: list[str | None] = [None] * n
    failed: list[str] = []
    checked = 0
    rng = random.Random(SEED + 2)
    base = eng.admin.stats().delivered

    def monitor() -> None:
        nonlocal checked
        seen = 0
        deadline = time.perf_counter() + DELIVERY_TIMEOUT_S + n / rate
        while seen < n and time.perf_counter() < deadline:
            delivered = min(n, eng.admin.stats().delivered - base)
            now = time.perf_counter()
            for k in range(seen, delivered):
                done[k] = now
            for k in range(seen, delivered):
                # (An activity delivered before its add_activity returned has no id yet.)
                activity = ids[k]
                if k % CHECK_EVERY or activity is None or not graph.followers[picks[k]]:
                    continue
                feed = graph.timeline(rng.choice(graph.followers[picks[k]]))
                held = [a.id for a in eng.read(feed, limit=MAX_PAGE_SIZE).results]
                checked += 1
                if activity not in held:
                    failed.append(f"{feed} does not hold {activity}, counted delivered")
            seen = max(seen, delivered)
            time.sleep(0.001)

    watcher = threading.Thread(target=monitor, name="bench-lag-monitor")
    watcher.start()
    start = time.perf_counter()
    for k, i in enumerate(picks):
        # An open loop: each publish at its own time, late ones at once.
        delay = start + k / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        data = {"actor": graph.users[i], "verb": "post", "object": f"lag-{draw}:{k}"}
        ids[k] = eng.add_activity(graph.source(i), data).id
        returned[k] = time.perf_counter()
    watcher.join()
    if failed:
        raise RuntimeError(f"{len(failed)} sampled activities were not readable: {failed[0]}")
    if not all(done):
        raise RuntimeError("the lag run's deliveries did not complete")
    # A row can complete before its add_activity returns: no lag at all.
    samples = [max(0.0, (d - r) * 1000) for d, r in zip(done, returned, strict=True)]
    lag = Lag(store.name, draw, rate, n, samples, checked)
    print(
        f"  {store.name}, {draw} at {rate:,.0f}/s: lag p50 {percentile(samples, 50):.1f} ms,"
        f" p99 {percentile(samples, 99):.1f} ms ({checked} checked in a feed)",
        flush=True,
    )
    return lag


# -- follow_many ------------------------------------------------------------------------


@dataclass
class FollowMany:
    follows: int
    seconds: float
    copied: int

    @property
    def rate(self) -> float:
        return self.follows / self.seconds


def follow_many(sizes: Sizes) -> FollowMany:
    """New followers following sources with history, on SQLite, default copy_limit."""
    store = STORES[0]
    tmp = tempfile.mkdtemp(prefix="tidings-bench-follows-")
    try:
        with Tidings(
            Settings(database_url=f"sqlite:///{tmp}/bench.db", timeline_store=StoreName.SQL)
        ) as eng:
            sources = [f"user:h{i:04d}" for i in range(sizes.history_sources)]
            for n in range(sizes.history):
                for source in sources:
                    eng.add_activity(
                        source, {"actor": source[5:], "verb": "post", "object": f"h:{n}"}
                    )
            wait_delivered(eng)
            rng = random.Random(SEED + 3)
            followers = sizes.new_follows // sizes.follows_each
            pairs = [
                (f"timeline:n{j:06d}", source)
                for j in range(followers)
                for source in rng.sample(sources, sizes.follows_each)
            ]
            settle()
            start = time.perf_counter()
            for at in range(0, len(pairs), MAX_FOLLOW_BATCH):
                eng.follow_many(pairs[at : at + MAX_FOLLOW_BATCH])
            seconds = time.perf_counter() - start
            wait_delivered(eng)  # (none left: each call copies its follows' history itself)
            # Every follower's feed holds its sources' whole history.
            copied = sizes.follows_each * sizes.history
            for j in (0, followers // 2, followers - 1):
                held = count_entries(eng, f"timeline:n{j:06d}")
                if held != copied:
                    raise RuntimeError(f"timeline:n{j:06d} holds {held}, not {copied}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = FollowMany(len(pairs), seconds, len(pairs) * sizes.history)
    print(
        f"  {store.name}: follow_many {result.rate:,.0f} follows/s"
        f" ({result.copied / seconds:,.0f} entries copied/s)",
        flush=True,
    )
    return result


def count_entries(eng: Tidings, feed: str) -> int:
    count, cursor = 0, None
    while True:
        page = eng.read(feed, limit=MAX_PAGE_SIZE, cursor=cursor)
        count += len(page.results)
        cursor = page.next
        if cursor is None:
            return count


# -- the run -------------------------------------------------------------------------------


@dataclass
class StoreResults:
    store: Store
    follow_s: float
    runs: dict[str, EndToEnd]
    drains: Drains
    big: fanout.Fanout
    lags: list[Lag] = field(default_factory=list)


def run_store(
    server: RedisServer,
    postgres: PostgresServer,
    store: Store,
    graph: Graph,
    sizes: Sizes,
    picks: dict[str, list[int]],
) -> StoreResults:
    server.flush()
    with database(store, postgres) as url:
        with Tidings(settings(store, server, url)) as eng:
            follow_s = follow_graph(eng, graph)
            print(
                f"  {store.name}: {graph.pairs:,} follows made in {follow_s:.1f} s"
                f" ({graph.pairs / follow_s:,.0f}/s, batches of {MAX_FOLLOW_BATCH:,})",
                flush=True,
            )
            # Every statement and script of the path once, on the same graph.
            publish_all(eng, graph, picks["warm"], "warm")
            wait_delivered(eng)
            runs = {
                draw: end_to_end(eng, graph, store, draw, picks[draw])
                for draw in ("uniform", "popularity")
            }
            lags = []
            if store.name == "SQLite + Redis":
                for draw in ("uniform", "popularity"):
                    rate = runs[draw].rate / 2
                    n = max(1, round(rate * sizes.lag_seconds))
                    steady = graph.draw(random.Random(SEED + 4), draw, n)
                    lags.append(delivery_lag(eng, graph, store, draw, steady, rate))
        backlog = drains(server, store, url, graph, picks["backlog"], sizes.backlog_pairs)
        # Last, so the rows above run as they always did: the uniform draw from
        # several threads, then (feeds in Redis) both draws delivered by a
        # child process, on the same stores.
        with Tidings(settings(store, server, url)) as eng:
            publish_all(eng, graph, picks["warm"], "warm-concurrent")
            wait_delivered(eng)
            runs["uniform, concurrent"] = end_to_end(
                eng, graph, store, "uniform", picks["uniform"], publishers=PUBLISHERS
            )
        if store.timeline == "redis":
            with Tidings(settings(store, server, url), task_runner="process") as eng:
                # The child up and its statements and scripts run once, untimed.
                publish_all(eng, graph, picks["warm"], "warm-process")
                wait_delivered(eng)
                for draw in ("uniform", "popularity"):
                    runs[f"{draw}, process"] = end_to_end(
                        eng, graph, store, draw, picks[draw], runner="process"
                    )
    with database(store, postgres) as url:
        big = fanout.best(
            [
                fanout.run_one(
                    server,
                    store.timeline,
                    sizes.big_followers,
                    sizes.big_activities,
                    database_url=url if store.postgres else None,
                )
            ]
        )
    return StoreResults(store, follow_s, runs, backlog, big, lags)


def run(
    server: RedisServer, sizes: Sizes, stores: Sequence[Store] = STORES, *, extras: bool = True
) -> list[Row]:
    """The rows of ``stores``; with ``extras``, also follow_many with its
    default copy_limit (SQLite) and Stream Framework's run (full sizes)."""
    graph = build_graph(sizes)
    rng = random.Random(SEED + 1)
    picks = {
        "warm": graph.draw(rng, "uniform", 20),
        "uniform": graph.draw(rng, "uniform", sizes.uniform_activities),
        "popularity": graph.draw(rng, "popularity", sizes.popular_activities),
        "backlog": graph.draw(rng, "uniform", sizes.backlog),
    }
    print(
        f"  graph: {len(graph.users):,} users, {graph.pairs:,} follows, exponent"
        f" {graph.exponent:.3f}; mean fan-out {graph.uniform_mean:.1f} (uniform publishers),"
        f" {graph.popular_mean:.1f} (by popularity); most followed {graph.fanout(0):,}",
        flush=True,
    )
    print(
        "  drawn: mean fan-out {:.1f} uniform, {:.1f} by popularity, {:.1f} backlog".format(
            *(
                graph.entries(picks[d]) / len(picks[d]) - 1
                for d in ("uniform", "popularity", "backlog")
            )
        ),
        flush=True,
    )
    with PostgresServer() as postgres:
        results = [run_store(server, postgres, store, graph, sizes, picks) for store in stores]
    follows = follow_many(sizes) if extras else None
    out = rows(graph, sizes, results, follows)
    out += postgres_rows(sizes, results)
    if sizes.targets and extras:
        out += peer_rows(graph, picks["popularity"], results)
    return out


def postgres_rows(sizes: Sizes, results: Sequence[StoreResults]) -> list[Row]:
    """PostgreSQL + Redis end to end as a share of SQLite + Redis in the same run."""
    by_name = {r.store.name: r for r in results}
    ours, theirs = by_name.get("PostgreSQL + Redis"), by_name.get("SQLite + Redis")
    if ours is None or theirs is None:
        return []
    out = []
    for draw, goal in (
        ("uniform", TARGET_POSTGRES_UNIFORM),
        ("popularity", TARGET_POSTGRES_POPULAR),
    ):
        ratio = ours.runs[draw].rate / theirs.runs[draw].rate
        target, met = at_least(ratio, goal, sizes.targets)
        out.append(
            Row(
                f"everyday {draw} activities/s, one app thread: PostgreSQL ÷ SQLite (both + Redis)",
                "PostgreSQL + Redis",
                f"{ours.runs[draw].activities:,} activities",
                ratio,
                "x",
                target,
                met,
            )
        )
    return out


def peer_rows(graph: Graph, picks: Sequence[int], results: Sequence[StoreResults]) -> list[Row]:
    """Stream Framework (its Redis backend, Celery eager) on the same graph and
    the same popularity-drawn publishers, and tidings' ratio to it."""
    print("  stream framework: same graph, same publishers", flush=True)
    follows = [
        (graph.timeline(f), graph.source(i))
        for i, followers in enumerate(graph.followers)
        for f in followers
    ]
    sf = peer.run_stream_framework(follows, [graph.source(i) for i in picks])
    rate = sf["activities_per_s"]
    size = f"{human(len(graph.users))} users, {int(sf['activities']):,} activities"
    out = [
        Row(
            "Stream Framework 1.4.0, popularity publishers, end to end (peer)",
            "Redis",
            size,
            rate,
            "activities/s",
            detail=sf,
        )
    ]
    for r in results:
        e2e = r.runs.get("popularity")
        if e2e is None:
            continue
        target, met = at_least(e2e.rate / rate, 10.0)
        out.append(
            Row(
                "everyday popularity activities/s ÷ Stream Framework's",
                r.store.name,
                size,
                e2e.rate / rate,
                "x",
                target,
                met,
            )
        )
    return out


def rows(
    graph: Graph, sizes: Sizes, results: Sequence[StoreResults], follows: FollowMany | None
) -> list[Row]:
    on = sizes.targets
    out: list[Row] = []
    graph_detail = {
        "users": len(graph.users),
        "follows": graph.pairs,
        "exponent": graph.exponent,
        "scale": graph.scale,
        "mean_fanout_uniform": graph.uniform_mean,
        "mean_fanout_popularity": graph.popular_mean,
    }
    for r in results:
        name = r.store.name
        for e2e in r.runs.values():
            draw = e2e.draw
            size = f"{human(len(graph.users))} users, {e2e.activities:,} activities"
            mean = e2e.entries / e2e.activities - 1
            detail = {
                "activities": e2e.activities,
                "entries": e2e.entries,
                "mean_fanout": mean,
                "publish_s": e2e.publish_s,
                "total_s": e2e.total_s,
                "follow_graph_s": r.follow_s,
                "graph": graph_detail,
                "publishers": e2e.publishers,
                "runner": e2e.runner,
            }
            how = f", {e2e.how}" if e2e.how else ""
            bench = f"everyday, {draw} publishers (mean fan-out {mean:.0f}), end to end{how}"
            goal = TARGET_UNIFORM.get(name) if draw == "uniform" else None
            target, met = at_least(e2e.rate, goal or 0, on and goal is not None)
            out.append(Row(bench, name, size, e2e.rate, "activities/s", target, met, detail))
            goal = None
            if draw == "popularity":
                goal = (
                    TARGET_POPULAR_REDIS
                    if r.store.timeline == "redis"
                    else TARGET_POPULAR.get(name)
                )
            target, met = at_least(e2e.entry_rate, goal or 0, on and goal is not None)
            out.append(Row(bench, name, size, e2e.entry_rate, "entries/s", target, met, detail))
            out.append(
                Row(
                    f"everyday, {draw} publishers, add_activity calls (delivering meanwhile){how}",
                    name,
                    size,
                    e2e.publish_rate,
                    "calls/s",
                )
            )
        big = r.big
        out.append(
            Row(
                f"fan-out of one activity to {human(big.followers)} followers, same run",
                name,
                f"{human(big.followers)} followers x {len(big.seconds)}",
                big.rate,
                "entries/s",
                detail={"seconds": big.seconds},
            )
        )
        for draw in ("uniform", "popularity"):
            ratio = r.runs[draw].entry_rate / big.rate
            target, met = at_least(ratio, TARGET_BIG_RATIO, on)
            out.append(
                Row(
                    f"everyday {draw} entries/s ÷ that of one activity to {human(big.followers)}",
                    name,
                    f"{human(big.followers)} followers",
                    ratio,
                    "",
                    target,
                    met,
                )
            )
        rate = graph.pairs / r.follow_s
        target, met = at_least(rate, TARGET_POSTGRES_FOLLOWS, on and r.store.postgres)
        out.append(
            Row(
                "follow_many, copy_limit=0, building the graph (source order)",
                name,
                f"{graph.pairs:,} follows, batches of {MAX_FOLLOW_BATCH:,}",
                rate,
                "follows/s",
                target,
                met,
            )
        )
        d = r.drains
        size = f"backlog of {d.activities:,} uniform, rounds 1-2-2-1"
        if sizes.backlog_pairs > 1:
            size += f" x {sizes.backlog_pairs}"
        detail = {
            "activities": d.activities,
            "entries": d.entries,
            "seconds": {str(k): v for k, v in d.seconds.items()},
            "publish_s": d.publish_s,
        }
        for threads in (1, 2):
            out.append(
                Row(
                    f"everyday backlog delivered by {threads} deliverer{'s' * (threads > 1)}",
                    name,
                    size,
                    d.rate(threads),
                    "entries/s",
                    detail=detail,
                )
            )
        ratio = d.rate(2) / d.rate(1)
        target, met = at_least(ratio, TARGET_TWO_DELIVERERS, on)
        out.append(Row("two deliverers ÷ one", name, size, ratio, "x", target, met))
        out.append(
            Row(
                "everyday backlog, add_activity calls (nothing delivering)",
                name,
                size,
                d.publish_rate,
                "calls/s",
            )
        )
        for lag in r.lags:
            size = f"{lag.activities:,} at {lag.rate:,.0f}/s"
            detail = {
                "rate": lag.rate,
                "activities": lag.activities,
                "checked": lag.checked,
                "max_ms": max(lag.samples),
                "mean_ms": sum(lag.samples) / len(lag.samples),
            }
            bench = f"delivery lag, {lag.draw} publishers at half the maximum"
            out.append(
                Row(f"{bench}, p50", name, size, percentile(lag.samples, 50), "ms", detail=detail)
            )
            p99 = percentile(lag.samples, 99)
            target, met = at_most(p99, TARGET_LAG_P99_MS, on)
            out.append(Row(f"{bench}, p99", name, size, p99, "ms", target, met, detail))
    if follows is None:
        return out
    target, met = at_least(follows.rate, TARGET_FOLLOWS, on)
    out.append(
        Row(
            f"follow_many, copy_limit default, batches of {MAX_FOLLOW_BATCH:,}",
            "SQLite",
            f"{follows.follows:,} follows, {sizes.history} activities per source",
            follows.rate,
            "follows/s",
            target,
            met,
            {"seconds": follows.seconds, "copied": follows.copied},
        )
    )
    return out
