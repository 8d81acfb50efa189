"""The in-process runner's wait between passes, and its passes end to end."""

from __future__ import annotations

import time

import pytest

from conftest import EngineFactory
from tidings.core.limits import CLAIM_ROWS
from tidings.task_runners.inline import (
    LINGER_SECONDS,
    MAX_LINGER_SECONDS,
    MAX_LINGER_SQLITE_SECONDS,
    ThreadRunner,
    _linger,
)


@pytest.mark.parametrize(
    ("claimed", "took", "expected"),
    [
        (0, 0.0, LINGER_SECONDS),  # idle: a woken runner's short wait
        (0, 1.0, LINGER_SECONDS),
        (CLAIM_ROWS, 0.5, 0.0),  # a full claim: a backlog, the next pass at once
        (CLAIM_ROWS + 1, 0.001, 0.0),
        (3, 0.001, LINGER_SECONDS),  # a quick pass: no shorter than a woken runner's wait
        (3, 0.008, 0.008),  # busy: about as long as the pass took
        (500, 0.5, MAX_LINGER_SECONDS),  # never longer than the bound
    ],
)
def test_linger_between_passes(claimed: int, took: float, expected: float) -> None:
    assert _linger(claimed, took) == pytest.approx(expected)


def test_a_busy_runner_waits_no_longer_than_the_bound_it_is_given() -> None:
    assert _linger(3, 0.5, 0.025) == pytest.approx(0.025)
    assert _linger(3, 0.02, 0.025) == pytest.approx(0.02)


@pytest.mark.parametrize(
    ("store", "setting", "expected"),
    [
        ("sql", None, MAX_LINGER_SQLITE_SECONDS),  # a pass commits every page it dirties
        ("postgres", None, MAX_LINGER_SECONDS),  # (the SQL store on PostgreSQL)
        ("memory", None, MAX_LINGER_SECONDS),
        ("redis", None, MAX_LINGER_SECONDS),
        ("sql", 3, 0.003),  # delivery_linger_ms, whatever the store
        ("redis", 40, 0.040),
    ],
)
def test_the_bound_follows_the_store_unless_set(
    make_engine: EngineFactory, setting: int | None, expected: float
) -> None:
    engine = make_engine(task_runner="thread", delivery_linger_ms=setting)
    assert isinstance(engine.task_runner, ThreadRunner)
    assert engine.task_runner.max_linger_seconds == pytest.approx(expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_steady_stream_is_delivered_by_the_thread_runner(
    make_engine: EngineFactory, threads: int
) -> None:
    feeds = make_engine(task_runner="thread", delivery_threads=threads)
    feeds.follow_many([(f"timeline:u{i}", "user:bob") for i in range(5)])
    made = [
        feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": f"p:{n}"}).id
        for n in range(200)
    ]
    deadline = time.monotonic() + 30
    while feeds.admin.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert feeds.admin.pending() == 0
    for i in range(5):
        # Newest first by id (ids within one millisecond are in no particular order).
        assert [a.id for a in feeds.read(f"timeline:u{i}", limit=100).results] == sorted(
            made, reverse=True
        )[:100]
