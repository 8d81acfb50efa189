"""The process runner: deliveries by a child process, on a real Redis and SQLite."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tidings import Settings, StoreName, Tidings
from tidings.bus.redis import WATCHED_REFRESH_S
from tidings.bus.subscription import Subscription
from tidings.core.errors import ConfigurationError
from tidings.core.events import EventType
from tidings.task_runners.process import ProcessRunner
from waiting import wait_delivered

DEADLINE_S = 60


@pytest.fixture
def settings(tmp_path: Path, redis_url: str) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/canonical.db", redis_url=redis_url)


@pytest.fixture
def engine(settings: Settings) -> Iterator[Tidings]:
    with Tidings(settings, task_runner="process") as engine:
        yield engine


def post(engine: Tidings, n: int) -> str:
    activity = {"actor": "bob", "verb": "post", "object": f"photo:{n}"}
    return engine.add_activity("user:bob", activity).id


def runner_of(engine: Tidings) -> ProcessRunner:
    assert isinstance(engine.task_runner, ProcessRunner)
    return engine.task_runner


def test_a_child_process_delivers_to_every_follower(engine: Tidings) -> None:
    pid = runner_of(engine).pid
    assert pid is not None
    assert pid != os.getpid()
    engine.follow_many([(f"timeline:u{i}", "user:bob") for i in range(20)])
    made = []
    for n in range(50):
        made.append(post(engine, n))
        # The publisher reads its own write: this process wrote its own feed.
        assert made[-1] in {a.id for a in engine.read("user:bob", limit=3).results}
    wait_delivered(engine, DEADLINE_S)
    for i in range(20):
        held = [a.id for a in engine.read(f"timeline:u{i}", limit=100).results]
        assert held == sorted(made, reverse=True)


def test_live_events_of_the_childs_deliveries_reach_this_process(engine: Tidings) -> None:
    engine.follow("timeline:alice", "user:bob")
    with engine.live.subscribe("timeline:alice") as sub, engine.live.subscribe("user:bob") as own:
        # Probes until the child runs and its deliveries are announced.
        deadline = time.monotonic() + DEADLINE_S
        while sub.get(timeout=0.2 if post(engine, 0) else 0) is None:
            assert time.monotonic() < deadline, "no event from the delivery process"
        made = post(engine, 1)
        assert events_of(sub, made, 0.2) == [(EventType.ACTIVITY_ADDED, "timeline:alice")]
        wait_delivered(engine, DEADLINE_S)
        # The own feed was written (and announced) here. The child, told so,
        # writes it again only when a pass claims the row before it reads
        # that, and the bus announces an activity once per feed.
        found = events_of(own, made, WATCHED_REFRESH_S)
        assert found == [(EventType.ACTIVITY_ADDED, "user:bob")]


def events_of(sub: Subscription, activity: str, more_s: float) -> list[tuple[str, str]]:
    """The events of ``sub`` about ``activity`` (others skipped): up to the
    first, and those that come within ``more_s`` after it."""
    found: list[tuple[str, str]] = []
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        event = sub.get(timeout=0.1)
        if event is not None and event.data.get("id") == activity:
            if not found:
                deadline = time.monotonic() + more_s
            found.append((event.type, event.feed))
    return found


def test_a_killed_child_is_replaced_and_nothing_is_lost(engine: Tidings) -> None:
    runner = runner_of(engine)
    engine.follow("timeline:alice", "user:bob")
    first = runner.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    # Published while no child runs: the outbox keeps them for the next one.
    made = [post(engine, n) for n in range(10)]
    deadline = time.monotonic() + DEADLINE_S
    while runner.pid in (first, None):
        assert time.monotonic() < deadline, "no new delivery process"
        time.sleep(0.05)
    wait_delivered(engine, DEADLINE_S)
    assert [a.id for a in engine.read("timeline:alice").results] == sorted(made, reverse=True)


def test_closing_the_engine_stops_the_child(settings: Settings) -> None:
    engine = Tidings(settings, task_runner="process")
    runner = runner_of(engine)
    child = runner._child
    assert child is not None
    engine.follow("timeline:alice", "user:bob")
    post(engine, 1)
    wait_delivered(engine, DEADLINE_S)  # the child is up and has delivered
    post(engine, 2)
    engine.close()
    assert runner.pid is None
    # It finished its pass and exited (SIGTERM, its input closed), not killed.
    assert child.returncode == 0


def test_the_task_runner_setting_picks_it(settings: Settings) -> None:
    with Tidings(settings.model_copy(update={"task_runner": "process"})) as engine:
        assert runner_of(engine).pid is not None


def test_it_needs_redis_for_live_events(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/canonical.db"
    with pytest.raises(ConfigurationError, match="TIDINGS_REDIS_URL"):
        Tidings(Settings(database_url=url), task_runner="process")


def test_it_needs_feeds_both_processes_reach(tmp_path: Path, redis_url: str) -> None:
    url = f"sqlite:///{tmp_path}/canonical.db"
    settings = Settings(database_url=url, redis_url=redis_url, timeline_store=StoreName.MEMORY)
    with pytest.raises(ConfigurationError, match="memory store"):
        Tidings(settings, task_runner="process")


def test_it_refuses_parts_the_child_would_not_have(settings: Settings) -> None:
    with pytest.raises(ConfigurationError, match="settings alone"):
        Tidings(settings, task_runner="process", clock=lambda: datetime.now(UTC))


def test_a_child_that_cannot_start_is_tried_again_ever_more_slowly(
    tmp_path: Path, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A database the child cannot open (its directory is not there).
    url = f"sqlite:///{tmp_path}/missing/canonical.db"
    runner = ProcessRunner(Settings(database_url=url, redis_url=redis_url))
    caplog.set_level(logging.ERROR)
    runner.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(pauses(caplog)) < 3:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.1)
    finally:
        runner.stop()
    found = pauses(caplog)
    assert found[:3] == [0.5, 1.0, 2.0]
    # What the child logged on its way out reached this process's log, under
    # the child's logger and with its traceback.
    said = [r.getMessage() for r in caplog.records if r.name == "tidings.task_runner"]
    assert any(
        "the delivery process failed" in m and "Traceback" in m and "(delivery process" in m
        for m in said
    ), said


def pauses(caplog: pytest.LogCaptureFixture) -> list[float]:
    found = (re.search(r"another starts in ([0-9.]+) s", r.getMessage()) for r in caplog.records)
    return [float(m.group(1)) for m in found if m]


def test_a_forked_copy_neither_signals_nor_stops_the_child(engine: Tidings) -> None:
    runner = runner_of(engine)
    pid = runner.pid
    assert pid is not None
    forked = os.fork()
    if forked == 0:  # the copy: closing its engine must leave the parent's child alone
        code = 1
        try:
            runner.notify()
            runner.stop()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + DEADLINE_S
    while (done := os.waitpid(forked, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(forked, signal.SIGKILL)
            os.waitpid(forked, 0)
            raise AssertionError("the forked copy did not finish")
        time.sleep(0.05)
    assert done[1] == 0
    assert runner.pid == pid
    os.kill(pid, 0)  # still running
    engine.follow("timeline:alice", "user:bob")
    made = post(engine, 1)
    wait_delivered(engine, DEADLINE_S)
    assert [a.id for a in engine.read("timeline:alice").results] == [made]


def test_a_child_whose_parent_is_gone_stops(settings: Settings) -> None:
    # The parent is a process of its own, killed with no chance to stop its
    # child, while a process forked from it holds the child's input open.
    script = (
        "import os, sys, time\n"
        "from tidings import Settings, Tidings\n"
        "engine = Tidings(Settings.model_validate_json(sys.argv[1]), task_runner='process')\n"
        "fork = os.fork()\n"
        "if fork == 0:\n"
        "    time.sleep(120)\n"
        "    os._exit(0)\n"
        "print(engine.task_runner.pid, fork, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, settings.model_dump_json()],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    child = fork = 0
    try:
        assert parent.stdout is not None
        child, fork = map(int, parent.stdout.readline().split())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + DEADLINE_S
        while alive(child):
            assert time.monotonic() < deadline, "the delivery process outlived its parent"
            time.sleep(0.1)
    finally:
        for pid in (fork, child):
            if pid and alive(pid):  # (a pid gone may be another process's by now)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
