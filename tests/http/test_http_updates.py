"""Concurrent changes to one activity over HTTP, against a live service: no
partial update is lost, each answer is a state that was stored, and feeds
show what the activity shows (the Redis activity cache included)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from http_server import LiveApi, live_api

#: Requests released at once.
N = 16
#: Each race is run this many times: a lost update shows in nearly every run,
#: but not in every one.
ROUNDS = 5
ACTIVITY = {"actor": "bob", "verb": "post", "object": "note:1", "time": "2026-01-01T00:00:00Z"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_api(request: pytest.FixtureRequest, database_url: str) -> Iterator[LiveApi]:
    """The service over the SQL store, on SQLite or PostgreSQL."""
    if request.param == "postgres":
        database_url = request.getfixturevalue("postgres_url")
    with live_api("sql", database_url) as live:
        yield live


@pytest.fixture
def redis_api(database_url: str, redis_url: str) -> Iterator[LiveApi]:
    with live_api("redis", database_url, redis_url) as live:
        yield live


def publish(api: LiveApi) -> dict[str, Any]:
    with httpx.Client(base_url=api.url, headers=api.headers(), timeout=30) as c:
        assert c.post("/v1/feeds/timeline/alice/follows", json={"source": "user:bob"}).is_success
        r = c.post("/v1/feeds/user/bob/activities", json=ACTIVITY)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def all_at_once(api: LiveApi, requests: list[tuple[str, str, Any]]) -> list[httpx.Response]:
    """Send every ``(method, url, json body)`` on its own connection, all released
    together once every connection is open; the responses, in order."""
    barrier = threading.Barrier(len(requests))

    def send(request: tuple[str, str, Any]) -> httpx.Response:
        method, url, body = request
        with httpx.Client(base_url=api.url, headers=api.headers(), timeout=60) as c:
            assert c.get("/healthz").status_code == 200  # connected
            barrier.wait()
            return c.request(method, url, json=body)

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(send, requests))


def get(api: LiveApi, url: str) -> Any:
    with httpx.Client(base_url=api.url, headers=api.headers(), timeout=30) as c:
        r = c.get(url)
    assert r.status_code == 200, r.text
    return r.json()


def test_concurrent_patches_keep_every_key(sql_api: LiveApi) -> None:
    for _ in range(ROUNDS):
        # Given an activity
        stored = publish(sql_api)
        url = f"/v1/activities/{stored['id']}"
        # When 16 PATCHes, each setting its own key, arrive at once
        bodies = [{"set": {f"k{i}": i}} for i in range(N)]
        responses = all_at_once(sql_api, [("PATCH", url, body) for body in bodies])
        # Then every key is stored
        assert [r.status_code for r in responses] == [200] * N
        final = get(sql_api, url)
        assert final == {**stored, "extra": {f"k{i}": i for i in range(N)}}
        # And each answer shows a state that was stored, its own key included:
        # the updates applied one after another, so the answers are N states,
        # each one key more than the one before, the last being what is stored.
        answers = [r.json() for r in responses]
        for i, answer in enumerate(answers):
            assert answer["extra"][f"k{i}"] == i
        chain = sorted((a["extra"] for a in answers), key=len)
        assert [len(extra) for extra in chain] == list(range(1, N + 1))
        for before, after in itertools.pairwise(chain):
            assert before.items() <= after.items()
        assert chain[-1] == final["extra"]


@pytest.mark.redis
def test_feeds_show_the_stored_activity_after_concurrent_patches(redis_api: LiveApi) -> None:
    # Given an activity in two feeds of the Redis store
    stored = publish(redis_api)
    url = f"/v1/activities/{stored['id']}"
    for rounds in range(ROUNDS):
        # When 16 PATCHes of the same key arrive at once, with feed reads that
        # refill the activity cache (emptied first) while they run
        redis_api.engine.cache.delete([stored["id"]])
        patches = [("PATCH", url, {"set": {"v": rounds * N + i}}) for i in range(N)]
        reads = [("GET", f"/v1/feeds/{f}?limit=5", None) for f in ("user/bob", "timeline/alice")]
        responses = all_at_once(redis_api, [*patches, *reads * 4])
        assert {r.status_code for r in responses} == {200}
        # Then both feeds show the activity exactly as it is stored
        shown = get(redis_api, url)
        assert shown["extra"]["v"] in {rounds * N + i for i in range(N)}
        for feed in ("user/bob", "timeline/alice"):
            assert get(redis_api, f"/v1/feeds/{feed}?limit=5")["results"] == [shown]
