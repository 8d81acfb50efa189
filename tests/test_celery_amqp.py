"""The Celery runner with RabbitMQ as the broker: a private node, real
``tidings worker`` subprocesses, the SQL timeline store on a SQLite file."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servers import RabbitMQServer
from test_celery import Worker, add_follows, done_parts, holders, wait_delivered
from tidings import Settings, Tidings
from tidings.readers import HIGH, LOW
from tidings.schema import follows

pytestmark = pytest.mark.rabbitmq


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[RabbitMQServer]:
    with RabbitMQServer() as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path, rabbitmq: RabbitMQServer) -> dict[str, Any]:
    return {
        "database_url": f"sqlite:///{tmp_path / 'tidings.db'}",
        "timeline_store": "sql",
        "broker_url": rabbitmq.url,
        "delivery_chunk_size": 1000,
        "celery_redispatch_seconds": 5.0,
    }


@pytest.fixture
def start_worker(settings: dict[str, Any], tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(queues: str | None = None) -> Worker:
        started.append(Worker(settings, tmp_path / "worker.log", queues=queues))
        return started[-1]

    yield start
    for worker in started:
        worker.stop()


def test_worker_delivers_in_parts_over_amqp(
    settings: dict[str, Any], start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    with Tidings(Settings(**settings, task_runner="celery")) as engine:
        followers = add_follows(engine, "user:bob", 2500)
        start_worker()
        activity = engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p"})
        wait_delivered(engine, 60, tmp_path / "worker.log")
        assert holders(engine, activity.id) == dict.fromkeys([*followers, "user:bob"], 1)


def test_a_high_queue_worker_serves_recent_readers_first_over_amqp(
    settings: dict[str, Any], start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    # Given followers in both tiers, and a worker for the high queue only
    with Tidings(Settings(**settings, task_runner="celery")) as engine:
        tier_of = {f"timeline:h{i:05d}": HIGH for i in range(1200)}
        tier_of |= {f"timeline:l{i:05d}": LOW for i in range(1200)}
        with engine.db.write() as conn:
            conn.execute(
                follows.insert(),
                [
                    {"follower": f, "source": "user:bob", "created_ms": 0, "tier": t}
                    for f, t in tier_of.items()
                ],
            )
        start_worker(queues="tidings.high")
        activity = engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p"})
        deadline = time.monotonic() + 60
        while done_parts(engine) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        got = set(holders(engine, activity.id))
        assert {f for f, t in tier_of.items() if t == HIGH} <= got
        assert not {f for f, t in tier_of.items() if t == LOW} & got
        # Then a worker on both queues finishes the low parts
        start_worker(queues="tidings.high,tidings.low")
        wait_delivered(engine, 60, tmp_path / "worker.log")
        assert holders(engine, activity.id) == dict.fromkeys([*tier_of, "user:bob"], 1)
