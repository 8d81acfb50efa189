"""A store the service cannot reach: 503 problem with ``Retry-After``, never
500, counted in ``tidings_store_errors_total`` and logged once; and the same
process serving again once the store is back, without a restart.

Real servers, each this test's own (stopped and started again by it): a
PostgreSQL, and a Redis.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from http_server import live_api
from scrape import samples, value
from servers import PostgresServer, RedisServer
from tidings.http.problems import MEDIA_TYPE, STORE_RETRY_AFTER


def post(foreign_id: str) -> dict[str, Any]:
    return {
        "actor": "bob",
        "verb": "post",
        "object": f"note:{foreign_id}",
        "foreign_id": foreign_id,
    }


def foreign_ids(client: httpx.Client, feed: str) -> list[str]:
    group, key = feed.split(":")
    page = client.get(f"/v1/feeds/{group}/{key}")
    assert page.status_code == 200, page.text
    return [a["foreign_id"] for a in page.json()["results"]]


def assert_unavailable(answer: httpx.Response, store: str) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == str(STORE_RETRY_AFTER)
    assert answer.headers["content-type"] == MEDIA_TYPE
    problem = answer.json()
    assert problem["status"] == 503
    assert store in problem["detail"]


def until_answered(send: Any, attempts: int = 50) -> tuple[httpx.Response, list[int]]:
    """Send until an answer other than 503 (the pool drops a dead connection
    at each failure); the answer and every status on the way."""
    statuses = []
    for _ in range(attempts):
        answer = send()
        statuses.append(answer.status_code)
        if answer.status_code != 503:
            return answer, statuses
    raise AssertionError(f"still 503 after {attempts} attempts")


def outage_lines(caplog: pytest.LogCaptureFixture, store: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith(f"store unavailable: {store} ")
    ]


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:  # its own: this test stops it
        yield server


@pytest.mark.postgres
def test_postgresql_down_answers_503_and_the_process_recovers(
    postgres: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tidings.http")
    url = postgres.new_database("tidings")
    with (
        live_api("sql", url, task_runner="sync") as live,
        httpx.Client(base_url=live.url, headers=live.headers(), timeout=30) as client,
    ):
        # Given a service on PostgreSQL that has served (its pool holds connections)
        assert client.post("/v1/feeds/user/bob/activities", json=post("a1")).status_code == 201
        assert foreign_ids(client, "user:bob") == ["a1"]

        # When PostgreSQL shuts down: 503 with Retry-After, to writes and reads alike
        postgres.halt()
        published = [client.post("/v1/feeds/user/bob/activities", json=post("a2")) for _ in "12"]
        for answer in [*published, client.get("/v1/feeds/user/bob")]:
            assert_unavailable(answer, "PostgreSQL")
        table = samples(client.get("/metrics").text)
        counted = sum(
            v
            for (name, labels), v in table.items()
            if name == "tidings_store_errors_total" and ("store", "postgresql") in labels
        )
        assert counted >= 3
        # logged, not once per request
        lines = outage_lines(caplog, "postgresql")
        assert 1 <= len(lines) < 3, lines
        assert "503" in lines[0]

        # Then, PostgreSQL back: the same process answers again, never 500 on the way
        postgres.resume()
        answer, statuses = until_answered(
            lambda: client.post("/v1/feeds/user/bob/activities", json=post("a2"))
        )
        assert answer.status_code == 201
        assert set(statuses) <= {503, 201}
        assert foreign_ids(client, "user:bob") == ["a2", "a1"]
        assert (
            value(
                samples(client.get("/metrics").text),
                "tidings_http_requests_total",
                method="POST",
                route="/v1/feeds/{group}/{key}/activities",
                status="500",
            )
            == 0
        )


@pytest.mark.redis
def test_redis_down_or_full_answers_503_and_the_process_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tidings.http")
    with RedisServer() as server:  # its own: this test stops it
        database = f"sqlite:///{tmp_path / 'canonical.db'}"
        with (
            live_api("redis", database, server.url, task_runner="sync") as live,
            httpx.Client(base_url=live.url, headers=live.headers(), timeout=30) as client,
        ):
            # Given a service on Redis that has served
            assert client.post("/v1/feeds/user/bob/activities", json=post("a1")).status_code == 201
            assert foreign_ids(client, "user:bob") == ["a1"]

            # When Redis is gone: a read of a feed kept there is answered 503
            server.halt()
            assert_unavailable(client.get("/v1/feeds/user/bob"), "Redis")
            assert outage_lines(caplog, "redis")

            # Then, Redis back (empty: nothing persisted), the same process answers
            server.start()
            answer, statuses = until_answered(lambda: client.get("/v1/feeds/user/bob"))
            assert answer.status_code == 200
            assert set(statuses) <= {503, 200}
            live.engine.admin.rebuild(["user:bob"]).__next__()
            assert foreign_ids(client, "user:bob") == ["a1"]

            # When Redis is at its memory limit (noeviction): a follow, which
            # copies into Redis, is answered 503, and the OOM is counted
            assert server.command("CONFIG", "SET", "maxmemory", "1").startswith(b"+OK")
            follow = client.post("/v1/feeds/timeline/al/follows", json={"source": "user:bob"})
            assert_unavailable(follow, "Redis")
            assert "OutOfMemoryError" in follow.json()["detail"]
            table = samples(client.get("/metrics").text)
            oom = {"store": "redis", "kind": "OutOfMemoryError"}
            assert value(table, "tidings_store_errors_total", **oom) >= 1
            assert any("OutOfMemoryError" in line for line in outage_lines(caplog, "redis"))
            assert server.command("CONFIG", "SET", "maxmemory", "0").startswith(b"+OK")
