"""Live events across API processes sharing PostgreSQL and Redis: several
workers deliver, one client watches, and every activity reaches it exactly
once per feed; a server killed and restarted loses no event of a client
that resumes by id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from http_server import SECRET, answers, free_port
from tidings.http.auth import mint

SERVER = {"authorization": f"Bearer {mint(SECRET, '*', server=True)}"}


@contextmanager
def serve(tmp_path: Path, db: str, redis_url: str, name: str, workers: int = 1) -> Iterator[str]:
    """``tidings serve`` on PostgreSQL and Redis, its base URL once it answers;
    SIGKILLed at the end if it still runs (:func:`kill` does it before)."""
    port = free_port()
    env = {**os.environ, "TIDINGS_SECRET": SECRET, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "tidings.cli", "--database-url", db, "--redis-url", redis_url]
    argv += ["serve", "--port", str(port), "--workers", str(workers)]
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:
        # A session of its own: killing it kills its workers too.
        proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not answers(url):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(20)


def publish(url: str, n: int) -> str:
    """Bob posts ``note:<n>`` on a connection of its own (so on any worker)."""
    body = {"actor": "bob", "verb": "post", "object": f"note:{n}"}
    r = httpx.post(f"{url}/v1/feeds/user/bob/activities", json=body, headers=SERVER)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def follow(url: str) -> None:
    r = httpx.post(
        f"{url}/v1/feeds/timeline/alice/follows", json={"source": "user:bob"}, headers=SERVER
    )
    assert r.status_code == 201, r.text


def frames(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The events of an SSE response (heartbeats skipped), data parsed."""
    fields: dict[str, Any] = {}
    for line in response.iter_lines():
        if line == "":
            if "event" in fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = json.loads(value) if name == "data" else value


def added_until(events: Iterator[dict[str, Any]], last: str) -> list[str]:
    """The activity ids of the ``activity.added`` events up to the one of
    ``last`` (every activity published before it was announced before it, if
    at all); a ``resync`` ends the list too."""
    got: list[str] = []
    for event in events:
        if event["event"] == "resync":
            return [*got, "resync"]
        assert event["event"] == "activity.added", event
        got.append(event["data"]["id"])
        if got[-1] == last:
            return got
    raise AssertionError("the stream ended")


@pytest.mark.parametrize("layout", ["one serve, 3 workers", "3 serve processes"])
def test_each_activity_is_announced_once_per_feed_whichever_process_delivers(
    tmp_path: Path, postgres_url: str, redis_url: str, layout: str
) -> None:
    # Given three API processes (each a publisher and a delivery runner), and
    # one client watching bob's own feed and a follower's timeline
    with ExitStack() as stack:
        if layout == "3 serve processes":
            urls = [
                stack.enter_context(serve(tmp_path, postgres_url, redis_url, f"p{n}"))
                for n in range(3)
            ]
        else:
            urls = [stack.enter_context(serve(tmp_path, postgres_url, redis_url, "w", workers=3))]
        client = stack.enter_context(httpx.Client(timeout=20, headers=SERVER))
        follow(urls[-1])
        own = stack.enter_context(client.stream("GET", f"{urls[0]}/v1/feeds/user/bob/events"))
        timeline = stack.enter_context(
            client.stream("GET", f"{urls[0]}/v1/feeds/timeline/alice/events")
        )
        # When 40 activities are published on fresh connections (so on every
        # process), then one more to close the count
        published = [publish(urls[n % len(urls)], n) for n in range(40)]
        last = publish(urls[-1], 40)
        # Then each feed announces each of them exactly once
        for response in (own, timeline):
            got = added_until(frames(response), last)
            assert sorted(got) == sorted([*published, last]), (
                f"missing {sorted(set(published) - set(got))}, "
                f"repeated {sorted({i for i in got if got.count(i) > 1})}"
            )


def test_a_client_resuming_after_a_restart_misses_no_event(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    # Given a client that saw an event on bob's feed and on a follower's, then
    # lost its server (SIGKILL)
    feeds = ("user/bob", "timeline/alice")
    seen: dict[str, str] = {}
    with (
        serve(tmp_path, postgres_url, redis_url, "before") as url,
        httpx.Client(timeout=20, headers=SERVER) as client,
    ):
        follow(url)
        with (
            client.stream("GET", f"{url}/v1/feeds/{feeds[0]}/events") as own,
            client.stream("GET", f"{url}/v1/feeds/{feeds[1]}/events") as timeline,
        ):
            first = publish(url, 0)
            for feed, response in zip(feeds, (own, timeline), strict=True):
                event = next(frames(response))
                assert event["data"]["id"] == first
                seen[feed] = event["id"]
    # When the server is back, with nobody subscribed, and 12 are published
    with (
        serve(tmp_path, postgres_url, redis_url, "after") as url,
        httpx.Client(timeout=20, headers=SERVER) as client,
    ):
        missed = [publish(url, n) for n in range(1, 13)]
        # Then resuming from the last id seen replays all 12 (or says resync)
        for feed in feeds:
            with client.stream(
                "GET", f"{url}/v1/feeds/{feed}/events", headers={"last-event-id": seen[feed]}
            ) as response:
                got = added_until(frames(response), missed[-1])
                assert got == missed or got == ["resync"], (feed, got)
