"""Processes killed (SIGKILL) in the middle of batched deliveries and of a burst
of concurrent publishes: after a restart nothing accepted is lost, and
nothing is delivered twice."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tidings import Settings, StoreName, Tidings

SOURCES = [f"user:s{j:02d}" for j in range(30)]
FOLLOWERS = [f"timeline:f{i:03d}" for i in range(120)]
#: Activities waiting for delivery: more than a runner claims at once
#: (CLAIM_ROWS), so some kills land between batches, others inside one.
BACKLOG = 2500


def graph(seed: int = 5) -> list[tuple[str, str]]:
    """Each follower follows a random third of the sources."""
    rng = random.Random(seed)
    return [(f, s) for f in FOLLOWERS for s in SOURCES if rng.random() < 1 / 3]


def follow_all(feeds: Tidings, follows: list[tuple[str, str]]) -> None:
    for start in range(0, len(follows), 1000):
        feeds.follow_many(follows[start : start + 1000], copy_limit=0)


def settings_for(db_url: str, redis_url: str | None) -> Settings:
    if redis_url is None:
        return Settings(database_url=db_url, timeline_store=StoreName.SQL)
    return Settings(database_url=db_url, timeline_store=StoreName.REDIS, redis_url=redis_url)


@contextmanager
def engine_on(db_url: str, redis_url: str | None) -> Iterator[Tidings]:
    with Tidings(settings_for(db_url, redis_url), task_runner="manual") as feeds:
        yield feeds


def child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill(proc: subprocess.Popen[Any]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def feed_of(feeds: Tidings, feed: str) -> list[str]:
    """The feed's stored ids (duplicates would show), newest first."""
    cap = feeds.parts.deliverer.cap(feed.split(":")[0])
    return feeds.parts.deliverer.timeline.page(feed, limit=800, before=None, cap=cap)


def expected_feeds(feeds: Tidings, follows: list[tuple[str, str]]) -> dict[str, list[str]]:
    """What every follower holds once everything is delivered: the newest 800
    (the default cap) activities of the sources it follows (all were
    accepted after the follows)."""
    by_source = {s: feeds.canonical.activities.newest_ids(s, 800) for s in SOURCES}
    out: dict[str, list[str]] = {f: [] for f in FOLLOWERS}
    for follower, source in follows:
        out[follower] += by_source[source]
    return {f: sorted(ids, reverse=True)[:800] for f, ids in out.items()}


_DRAIN = """
    import sys
    from tidings import Settings, Tidings

    db_url, redis_url = sys.argv[1], sys.argv[2] or None
    store = "redis" if redis_url else "sql"
    settings = Settings(database_url=db_url, timeline_store=store, redis_url=redis_url)
    with Tidings(settings, task_runner="manual") as feeds:
        print("ready", flush=True)
        sys.stdin.readline()
        feeds.admin.drain()
        print("drained", flush=True)
        sys.stdin.read()
"""


@pytest.mark.parametrize("store", ["sql", pytest.param("redis", marks=pytest.mark.redis)])
def test_sigkill_in_batched_deliveries_delivers_each_activity_once(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if store == "redis" else None
    db_url = f"sqlite:///{tmp_path / 'kill.db'}"
    follows = graph()
    rng = random.Random(11)
    with engine_on(db_url, redis_url) as feeds:
        follow_all(feeds, follows)
        for n in range(BACKLOG):  # a backlog of several claims of batched deliveries
            source = rng.choice(SOURCES)
            feeds.add_activity(source, {"actor": source[5:], "verb": "post", "object": f"n:{n}"})
        pending = feeds.admin.pending()
    assert pending == BACKLOG
    # Ten processes in turn, each SIGKILLed at a random point of its drain.
    kills = 0
    for _ in range(10):
        proc = child(_DRAIN, db_url, redis_url or "")
        try:
            assert proc.stdout is not None
            assert proc.stdin is not None
            assert proc.stdout.readline().strip() == "ready"
            proc.stdin.write("go\n")
            proc.stdin.flush()
            threading.Event().wait(rng.uniform(0.0, 0.4))
        finally:
            kill(proc)
        kills += 1
    with engine_on(db_url, redis_url) as feeds:
        left = feeds.admin.pending()
        # A killed runner's rows wait for their lease to lapse: take them now.
        feeds.parts.deliverer.now_ms = lambda: feeds.clock.ms() + 10 * 60_000
        feeds.admin.drain()
        assert feeds.admin.pending() == 0
        expected = expected_feeds(feeds, follows)
        for follower, ids in expected.items():
            held = feed_of(feeds, follower)
            assert held == ids, follower
    assert kills == 10
    assert left < pending, "no kill landed in the middle of the deliveries"


_PUBLISH = """
    import sys, threading
    from tidings import Settings, Tidings

    db_url, threads, per_thread = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    settings = Settings(database_url=db_url, timeline_store="sql")
    lock = threading.Lock()
    with Tidings(settings, task_runner="manual") as feeds:
        def publish(t):
            for n in range(per_thread):
                source = f"user:s{(t * 7 + n) % 30:02d}"
                feeds.add_activity(
                    source,
                    {"actor": source[5:], "verb": "post", "object": "x", "foreign_id": f"{t}-{n}"},
                )
                with lock:
                    print(source, f"{t}-{n}", flush=True)  # acknowledged
        workers = [threading.Thread(target=publish, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        print("done", flush=True)
        sys.stdin.read()
"""


def test_sigkill_during_concurrent_publishes_keeps_every_acknowledged_one(
    tmp_path: Path,
) -> None:
    db_url = f"sqlite:///{tmp_path / 'burst.db'}"
    follows = graph(seed=9)
    with engine_on(db_url, None) as feeds:
        follow_all(feeds, follows)
    acknowledged: list[tuple[str, str]] = []
    proc = child(_PUBLISH, db_url, "8", "400")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "done":
                break
            source, foreign_id = line.split()
            acknowledged.append((source, foreign_id))
            if len(acknowledged) == 700:
                break  # in the middle of the burst
    finally:
        kill(proc)
    assert 0 < len(acknowledged) < 8 * 400, "the kill came after the burst"
    with engine_on(db_url, None) as feeds:
        feeds.admin.drain()
        for source, foreign_id in acknowledged:
            feeds.get_activity((source, foreign_id))  # stored (raises if not)
        expected = expected_feeds(feeds, follows)
        stored = sum(len(feeds.canonical.activities.newest_ids(s, 800)) for s in SOURCES)
        assert len(acknowledged) <= stored < 8 * 400
        for follower, ids in expected.items():
            assert feed_of(feeds, follower) == ids, follower
        # And publishing the acknowledged ones again stores nothing new.
        for source, foreign_id in acknowledged[:50]:
            data = {"actor": source[5:], "verb": "post", "object": "x", "foreign_id": foreign_id}
            assert not feeds.activities.publish(source, data)[1]
