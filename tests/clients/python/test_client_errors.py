"""Errors as exceptions carrying the problem+json, and retries: only for
idempotent calls (reads, publishes carrying a ``foreign_id``), never others.

The retries are checked against real sockets: a receiver that fails a given
number of times, and a ``tidings serve`` that is down, then comes up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from client_services import SERVER_TOKEN, Flaky, Service, user_token
from tidings_client import (
    ApiError,
    BadRequest,
    Client,
    Forbidden,
    Invalid,
    NotFound,
    Retry,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    Unreachable,
)

FAST = Retry(attempts=4, backoff=0.01, max_delay=0.05)
POST = {"actor": "bob", "verb": "post", "object": "note:1"}


@pytest.fixture
def flaky() -> Iterator[Flaky]:
    made = Flaky(failures=2, body=b'{"results": [], "next": null}')
    yield made
    made.close()


def test_error_answers_raise_with_their_problem(tidings_service: Service) -> None:
    url = tidings_service.url
    with Client(url, "not-a-token") as anonymous, pytest.raises(Unauthorized) as refused:
        anonymous.read("timeline:a")
    assert refused.value.status == 401
    assert refused.value.title == "Unauthorized"
    assert refused.value.detail
    with Client(url, user_token("kim")) as kim, pytest.raises(Forbidden) as forbidden:
        kim.read("timeline:lee")
    assert "kim" in forbidden.value.detail
    with Client(url, SERVER_TOKEN) as client:
        with pytest.raises(NotFound) as missing:
            client.get_activity("0" * 32)
        assert missing.value.problem["status"] == 404
        with pytest.raises(Invalid) as invalid:
            client.read("timeline:a", limit=1000)
        assert (invalid.value.field, invalid.value.limit) == ("limit", "limit")
        with pytest.raises(Invalid) as batch:
            client.publish_batch("user:bob", [POST] * 101)  # type: ignore[list-item]
        assert batch.value.field == "activities"
        with pytest.raises(BadRequest) as filters:
            next(iter(client.firehose(sample=1000)))
        assert filters.value.field == "sample"


def test_a_limit_named_by_the_service_is_the_errors_limit(tidings_service: Service) -> None:
    token = user_token("many")
    with ExitStack() as held, Client(tidings_service.url, token, stream_retry=Retry(1)) as client:
        raw = held.enter_context(httpx.Client(headers={"authorization": f"Bearer {token}"}))
        for _ in range(20):  # live_connections_per_user's default
            stream = raw.stream("GET", f"{tidings_service.url}/v1/feeds/timeline/many/events")
            assert held.enter_context(stream).status_code == 200
        with pytest.raises(TooManyRequests) as limited:
            next(iter(client.events("timeline:many")))
    assert limited.value.status == 429
    assert limited.value.limit == "live_connections_per_user"


def test_reads_are_retried_until_they_succeed(flaky: Flaky) -> None:
    with Client(flaky.url, SERVER_TOKEN, retry=FAST) as client:
        assert client.read("timeline:a") == {"results": [], "next": None}
    assert flaky.seen == ["GET"] * 3


def test_retries_stop_after_the_attempts_allowed() -> None:
    flaky = Flaky(failures=10)
    try:
        with Client(flaky.url, SERVER_TOKEN, retry=FAST) as client, pytest.raises(Unavailable):
            client.get_user("x")
    finally:
        flaky.close()
    assert len(flaky.seen) == FAST.attempts


def test_publishes_are_retried_only_with_a_foreign_id(flaky: Flaky) -> None:
    with Client(flaky.url, SERVER_TOKEN, retry=FAST) as client:
        with pytest.raises(Unavailable) as first:
            client.publish("user:bob", POST)  # type: ignore[arg-type]
        assert first.value.status == 503
        assert flaky.seen == ["POST"]
        client.publish("user:bob", POST | {"foreign_id": "f1"})  # type: ignore[arg-type]
        assert flaky.seen == ["POST"] * 3


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.follow("timeline:a", "user:b"),
        lambda c: c.mark_seen("notification:a"),
        lambda c: c.remove_activity("user:a", "0" * 32),
        lambda c: c.update_activity("0" * 32, set={"a": 1}),
        lambda c: c.add_reaction("0" * 32, "like", "a"),
        lambda c: c.put_object("photo", "1", {}),
        lambda c: c.publish_batch("user:bob", [POST | {"foreign_id": "x"}, POST]),
    ],
    ids=["follow", "mark_seen", "remove", "update", "react", "put_object", "batch"],
)
def test_other_calls_are_never_retried(flaky: Flaky, call: object) -> None:
    with Client(flaky.url, SERVER_TOKEN, retry=FAST) as client, pytest.raises(Unavailable):
        call(client)  # type: ignore[operator]
    assert len(flaky.seen) == 1


def test_a_read_waits_for_a_service_that_comes_up(tmp_path: Path) -> None:
    service = Service(tmp_path, f"sqlite:///{tmp_path / 'late.db'}")
    patient = Retry(attempts=200, backoff=0.05, max_delay=0.2)
    with Client(service.url, SERVER_TOKEN, retry=patient) as client:
        # Not retried: nothing listens, and the call is not idempotent.
        with pytest.raises(Unreachable):
            client.follow("timeline:a", "user:b")
        starting = threading.Timer(0.5, service.start)
        starting.start()
        try:
            assert client.read("timeline:a") == {"results": [], "next": None}
        finally:
            starting.join()
            service.stop()


def test_an_error_without_a_problem_body_keeps_its_status() -> None:
    flaky = Flaky(failures=1, status=418)
    try:
        with Client(flaky.url, SERVER_TOKEN) as client, pytest.raises(ApiError) as odd:
            client.health()
    finally:
        flaky.close()
    assert odd.value.status == 418
    assert type(odd.value) is ApiError
