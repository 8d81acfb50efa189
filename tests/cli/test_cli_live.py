"""``tidings tail`` and ``tidings firehose``: against a running service (SSE),
and through an engine of their own on the Redis bus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from http_server import SECRET, LiveApi, live_api
from tidings import Settings, Tidings


@pytest.fixture
def api(tmp_path: Path) -> Iterator[LiveApi]:
    with live_api("sql", f"sqlite:///{tmp_path / 'cli.db'}") as made:
        yield made


def start(*argv: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tidings.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def post(api: LiveApi, actor: str, obj: str) -> str:
    r = httpx.post(
        f"{api.url}/v1/feeds/user/{actor}/activities",
        json={"actor": actor, "verb": "post", "object": obj},
        headers=api.headers(),
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def lines_of(proc: subprocess.Popen[str], publish: Any) -> list[dict[str, Any]]:
    """Publish (repeatedly, until the command has connected and printed), then
    its JSON lines."""
    deadline = time.monotonic() + 20
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the command printed nothing"
        publish()
        time.sleep(0.3)
    out, errors = proc.communicate(timeout=10)
    assert proc.returncode == 0, errors
    return [json.loads(line) for line in out.splitlines()]


def test_tail_prints_a_services_feed_events(api: LiveApi) -> None:
    api.engine.follow("timeline:alice", "user:bob")
    proc = start(
        "tail", "timeline:alice", "--url", api.url, "--count", "1", TIDINGS_TOKEN=api.token("alice")
    )
    (event,) = lines_of(proc, lambda: post(api, "bob", "note:1"))
    assert (event["feed"], event["type"]) == ("timeline:alice", "activity.added")
    assert event["data"]["object"] == "note:1"


def test_firehose_prints_matches(api: LiveApi) -> None:
    proc = start(
        "firehose",
        "--url",
        api.url,
        "--follow",
        "carol",
        "--count",
        "1",
        TIDINGS_TOKEN=api.server_token,
    )
    (event,) = lines_of(proc, lambda: (post(api, "bob", "note:1"), post(api, "carol", "note:2")))
    assert (event["feed"], event["data"]["actor"]) == ("$firehose", "carol")


def test_a_refused_stream_is_an_error(api: LiveApi) -> None:
    proc = start("firehose", "--url", api.url, TIDINGS_TOKEN=api.token("alice"))
    _, errors = proc.communicate(timeout=20)
    assert proc.returncode != 0
    assert "403" in errors


def test_tail_without_a_service_reads_the_redis_bus(tmp_path: Path, redis_url: str) -> None:
    db = f"sqlite:///{tmp_path / 'tail.db'}"
    with Tidings(
        Settings(database_url=db, redis_url=redis_url, secret=SECRET), task_runner="sync"
    ) as engine:
        engine.follow("timeline:alice", "user:bob")
        proc = start(
            "--database-url", db, "--redis-url", redis_url, "tail", "timeline:alice", "--count", "1"
        )

        def publish() -> None:
            engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "note:1"})

        (event,) = lines_of(proc, publish)
    assert event["type"] == "activity.added"
