"""A follow's history copy is an outbox row written with the follow: a process
that dies before (or while) copying leaves it to a runner, and a retried
batch, which creates nothing, changes nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tidings import Settings, StoreName, Tidings
from tidings.core.limits import LEASE_MS

SOURCES = [f"user:s{i}" for i in range(5)]
COPY_LIMIT = 150


def engine_on(db_url: str, *, later: bool = False) -> Tidings:
    """A manual engine; ``later``: its clock past the lease of any copy under way."""
    settings = Settings(database_url=db_url, timeline_store=StoreName.SQL)
    skew = timedelta(milliseconds=2 * LEASE_MS if later else 0)
    return Tidings(settings, task_runner="manual", clock=lambda: datetime.now(UTC) + skew)


def publish_history(feeds: Tidings, per_source: int) -> None:
    for source in SOURCES:
        for n in range(per_source):
            feeds.add_activity(source, {"actor": source, "verb": "post", "object": f"p:{n}"})
    feeds.admin.drain()


def stored(feeds: Tidings, feed: str) -> list[str]:
    cap = feeds.deliverer.cap(feed.partition(":")[0])
    return feeds.timeline.page(feed, limit=1000, before=None, cap=cap)


def test_a_copy_left_by_a_dead_process_is_finished_by_the_runner(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'copy.db'}"
    pairs = [("timeline:a", "user:s0"), ("timeline_aggregated:b", "user:s1")]
    pairs.append(("timeline:gone", "user:s2"))
    with engine_on(db_url) as feeds:
        publish_history(feeds, 5)
        # Given follows committed by a process that died before copying anything
        followed = feeds.canonical.follows.follow(
            pairs, feeds.clock.ms(), copy_limit=3, lease_until_ms=feeds.clock.ms() + LEASE_MS
        )
        assert followed.created == pairs
        feeds.canonical.follows.unfollow(
            "timeline:gone", "user:s2", feeds.clock.ms()
        )  # (and one undone since)
        # When the same batch is sent again
        assert feeds.follow_many(pairs, copy_limit=3) == [("timeline:gone", "user:s2")]
    with engine_on(db_url, later=True) as feeds:
        # And a runner takes the copy over once the dead process's lease lapsed
        assert feeds.admin.drain() == 1
        # Then every follow has its history
        newest = {s: feeds.canonical.activities.newest_ids(s, 3) for s in SOURCES}
        assert stored(feeds, "timeline:a") == newest["user:s0"]
        [aggregate] = feeds.read_aggregates("timeline_aggregated:b").results
        assert [a.id for a in aggregate.activities] == newest["user:s1"]
        assert stored(feeds, "timeline:gone") == newest["user:s2"]  # copied once, by the retry
        assert feeds.admin.pending() == 0


_FOLLOWER = textwrap.dedent(
    """
    import sys
    from tidings import Settings, Tidings

    db_url, followers, sources, copy_limit = sys.argv[1], *map(int, sys.argv[2:])
    pairs = [(f"timeline:f{i:04d}", f"user:s{j}") for i in range(followers) for j in range(sources)]
    with Tidings(Settings(database_url=db_url, timeline_store="sql"), task_runner="manual") as feeds:
        feeds.follow_many(pairs, copy_limit=copy_limit)
        sys.stdin.read()  # until the test kills us
    """
)


def test_sigkill_during_a_follow_batch_loses_no_history(tmp_path: Path) -> None:
    db_path = tmp_path / "batch.db"
    db_url = f"sqlite:///{db_path}"
    followers = 200  # x 5 sources: a batch of 1,000 follows
    with engine_on(db_url) as feeds:
        publish_history(feeds, COPY_LIMIT + 20)
    expected = followers * len(SOURCES) * COPY_LIMIT
    # Given a process running a batch of 1,000 follows, SIGKILLed as soon as
    # the follows are committed and the first copies written
    argv = [_FOLLOWER, db_url, str(followers), str(len(SOURCES)), str(COPY_LIMIT)]
    with subprocess.Popen(
        [sys.executable, "-c", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    ) as proc:
        try:
            copied = wait_for_copies(db_path, proc)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
    assert 0 < copied < expected, "the kill came after the copy was done"
    pairs = [(f"timeline:f{i:04d}", s) for i in range(followers) for s in SOURCES]
    with engine_on(db_url, later=True) as feeds:
        assert feeds.counts("user:s0") == (followers, 0)  # every follow was committed
        # When the runner carries out what is pending
        feeds.admin.drain()
        # Then every follower has the newest COPY_LIMIT of every source it follows
        held = count_entries(db_path)
        assert held == expected
        newest = {s: set(feeds.canonical.activities.newest_ids(s, COPY_LIMIT)) for s in SOURCES}
        everything = set().union(*newest.values())
        for f in {f for f, _ in pairs}:
            assert set(stored(feeds, f)) == everything
        # And a retried batch creates nothing, queues nothing, writes nothing
        assert feeds.follow_many(pairs, copy_limit=COPY_LIMIT) == []
        assert feeds.admin.pending() == 0
        assert count_entries(db_path) == held


def count_entries(db_path: Path) -> int:
    """Entries of follower feeds."""
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        query = "SELECT count(*) FROM tidings_feed_entries WHERE feed LIKE 'timeline:%'"
        n: int = conn.execute(query).fetchone()[0]
    return n


def wait_for_copies(db_path: Path, proc: subprocess.Popen[Any]) -> int:
    """Entries written so far, once there are some (polled: a state, not a time)."""
    pause = threading.Event()
    while proc.poll() is None:
        n = count_entries(db_path)
        if n:
            return n
        pause.wait(0.005)
    raise AssertionError(f"the follow process exited with {proc.returncode}")
