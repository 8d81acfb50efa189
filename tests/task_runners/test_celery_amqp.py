"""The Celery runner with RabbitMQ as the broker: a private node, real
``tidings worker`` subprocesses, the SQL timeline store on a SQLite file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_celery import add_follows, holders, recent_readers_first, wait_delivered

from servers import RabbitMQServer
from tidings import Settings, Tidings
from workers import Worker

pytestmark = pytest.mark.rabbitmq


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[RabbitMQServer]:
    with RabbitMQServer() as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path, rabbitmq: RabbitMQServer) -> dict[str, Any]:
    return {
        "database_url": f"sqlite:///{tmp_path / 'tidings.canonical.db'}",
        "timeline_store": "sql",
        "broker_url": rabbitmq.url,
        "delivery_chunk_size": 1000,
        "celery_redispatch_seconds": 5.0,
    }


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
    # (AMQP has no strict order between queues: the rest is served by a worker
    # of both, as the README suggests for it)
    recent_readers_first(
        settings,
        start_worker,
        tmp_path / "worker.log",
        rest="tidings.high,tidings.low",
        timeout=60,
    )
