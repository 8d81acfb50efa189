"""What the HTTP edge accepts: strings, feed keys, numbers, booleans and times.

Each case is a request a lenient parser once let through (a 500, a silently
changed value, or a second feed under a look-alike id); each must now be a 422
problem naming the field, with nothing written.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from test_http import activity, assert_problem, path, publish, read_ids

from http_server import LiveApi, live_api

T0 = datetime(2026, 1, 1, tzinfo=UTC)
JSON = {"Content-Type": "application/json"}


@pytest.fixture(
    params=[
        "sql",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def client(request: pytest.FixtureRequest, database_url: str) -> Iterator[httpx.Client]:
    """The service over SQLite, Redis (canonical data in SQLite) and PostgreSQL."""
    store = request.param
    redis_url = request.getfixturevalue("redis_url") if store == "redis" else None
    if store == "postgres":
        store, database_url = "sql", request.getfixturevalue("postgres_url")
    live: LiveApi
    with (
        live_api(store, database_url, redis_url) as live,
        httpx.Client(base_url=live.url, headers=live.headers(), timeout=10) as c,
    ):
        yield c


@pytest.fixture
def sql_client(database_url: str) -> Iterator[httpx.Client]:
    live: LiveApi
    with (
        live_api("sql", database_url) as live,
        httpx.Client(base_url=live.url, headers=live.headers(), timeout=10) as c,
    ):
        yield c


# -- aggregate keys (issue 10, item 8) ----------------------------------------------


@pytest.mark.parametrize("mark", ["seen", "read"])
@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("\\u0000", "NUL"),
        ("a\\ud800", "surrogate"),
        ("\\udfff", "surrogate"),
        ("k" * 201, "200"),
    ],
)
def test_aggregate_keys_no_store_can_hold_are_refused(
    client: httpx.Client, mark: str, key: str, message: str
) -> None:
    # Given carol's notification feed with one unseen aggregate
    publish(client, "user:bob", activity(to=["notification:carol"]))
    # When a mark names an aggregate key no aggregate can have (as raw JSON: the escapes
    # are what a client sends)
    body = b'{"groups": ["ok", "' + key.encode() + b'"]}'
    r = client.post(f"/v1/feeds/notification/carol/{mark}", content=body, headers=JSON)
    # Then it is a 422 naming the key, and the connection still serves
    assert_problem(r, 422, field="groups.1", detail=message)
    r = client.get("/v1/feeds/notification/carol")
    assert r.status_code == 200, r.text
    assert (r.json()["unseen"], r.json()["unread"]) == (1, 1)


def test_strings_no_store_can_hold_are_refused(client: httpx.Client) -> None:
    url = "/v1/feeds/user/bob/activities"
    for raw, field in [
        (b'{"actor": "b\\ud800", "verb": "post", "object": "o"}', "actor"),
        (b'{"actor": "bob", "verb": "post", "object": "o", "target": "\\udc00"}', "target"),
        (b'{"actor": "bob", "verb": "post", "object": "o", "extra": {"t": "\\u0000"}}', "extra.t"),
        (
            b'{"actor": "bob", "verb": "post", "object": "o", "extra": {"t": ["\\ud800"]}}',
            "extra.t.0",
        ),
    ]:
        assert_problem(client.post(url, content=raw, headers=JSON), 422, field=field)
    assert read_ids(client, "user:bob") == []


# -- feed keys and ids are matched whole (item 9) ----------------------------------------


def test_a_trailing_newline_makes_no_second_feed(sql_client: httpx.Client) -> None:
    stored = publish(sql_client, "user:bob", activity())
    problems = [
        sql_client.get("/v1/feeds/timeline/alice%0A"),
        sql_client.get("/v1/feeds/timeline%0A/alice"),
        sql_client.post("/v1/feeds/user/bob%0A/activities", json=activity()),
        sql_client.post("/v1/feeds/user/bob/activities", json=activity(to=["timeline:c\n"])),
        sql_client.post("/v1/feeds/timeline/alice/follows", json={"source": "user:bob\n"}),
        sql_client.post("/v1/feeds/timeline/alice%0A/follows", json={"source": "user:bob"}),
        sql_client.post(
            "/v1/follows:batch",
            json={"follows": [{"follower": "timeline:a\n", "source": "user:b"}]},
        ),
        sql_client.get("/v1/feeds/timeline/alice%0A/following"),
        sql_client.get(f"/v1/activities/{stored['id']}%0A"),
        sql_client.patch(f"/v1/activities/{stored['id']}%0A", json={"set": {"x": 1}}),
    ]
    for r in problems:
        assert_problem(r, 422)
    r = sql_client.get("/v1/feeds/timeline/alice/following")
    assert r.json()["results"] == []
    assert read_ids(sql_client, "user:bob") == [stored["id"]]


# -- numbers (item 10) -----------------------------------------------------------


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999"])
def test_non_finite_numbers_are_refused_with_their_path(
    sql_client: httpx.Client, number: bytes
) -> None:
    # Python's json reads these (1e999 as infinity); stored, they became null.
    url = "/v1/feeds/user/bob/activities"
    raw = b'{"actor": "bob", "verb": "post", "object": "o", "extra": {"a": {"b": [1, %s]}}}'
    r = sql_client.post(url, content=raw % number, headers=JSON)
    assert_problem(r, 422, field="extra.a.b.1", detail="finite")
    batch = b'{"activities": [{"actor": "bob", "verb": "post", "object": "o", "extra": {"n": %s}}]}'
    r = sql_client.post(url + ":batch", content=batch % number, headers=JSON)
    assert_problem(r, 422, field="activities.0.extra.n", detail="finite")
    assert read_ids(sql_client, "user:bob") == []
    stored = publish(sql_client, "user:bob", activity(extra={"n": 1}))
    r = sql_client.patch(
        f"/v1/activities/{stored['id']}",
        content=b'{"set": {"n": 2, "m": %s}}' % number,
        headers=JSON,
    )
    assert_problem(r, 422, field="set.m", detail="finite")
    assert sql_client.get(f"/v1/activities/{stored['id']}").json()["extra"] == {"n": 1}


@pytest.mark.parametrize("limit", ["1_0", "\u0665", "+5", " 5", "5 ", "5.0", "0x5", ""])
def test_limits_are_ascii_digits(client: httpx.Client, limit: str) -> None:
    for url in (
        "/v1/feeds/user/bob",
        "/v1/feeds/notification/bob",
        "/v1/feeds/user/bob/followers",
        "/v1/feeds/user/bob/following",
    ):
        assert_problem(client.get(url, params={"limit": limit}), 422, field="limit")


@pytest.mark.parametrize(
    "body",
    [
        {"source": "user:bob", "copy_limit": "5"},
        {"source": "user:bob", "copy_limit": 5.0},
        {"source": "user:bob", "copy_limit": True},
    ],
)
def test_body_integers_are_json_integers(sql_client: httpx.Client, body: dict[str, object]) -> None:
    r = sql_client.post("/v1/feeds/timeline/alice/follows", json=body)
    assert_problem(r, 422, field="copy_limit")


# -- booleans (item 10) ------------------------------------------------------------


@pytest.mark.parametrize("value", ["yes", "true", 1, "on", None])
def test_all_is_a_json_boolean(sql_client: httpx.Client, value: object) -> None:
    publish(sql_client, "user:bob", activity(to=["notification:carol"]))
    r = sql_client.post("/v1/feeds/notification/carol/seen", json={"all": value})
    assert_problem(r, 422, field="all")
    assert sql_client.get("/v1/feeds/notification/carol").json()["unseen"] == 1


@pytest.mark.parametrize("value", ["yes", "on", "t", "True", "2", ""])
def test_query_booleans_are_true_false_1_or_0(sql_client: httpx.Client, value: str) -> None:
    r = sql_client.delete(
        "/v1/feeds/timeline/carol/follows/user:bob", params={"keep_history": value}
    )
    assert_problem(r, 422, field="keep_history")
    r = sql_client.get("/v1/feeds/notification/carol", params={"mark_seen": value})
    assert_problem(r, 422, field="mark_seen")


# -- times (item 10) ----------------------------------------------------------------


@pytest.mark.parametrize(
    "when", [1_767_225_600, 1_767_225_600.5, 1_767_225_600_000, "1767225600", True]
)
def test_time_is_an_iso_8601_string_as_in_the_library(
    sql_client: httpx.Client, when: object
) -> None:
    # The library refuses Unix numbers (which unit? what zone?); so does HTTP.
    r = sql_client.post("/v1/feeds/user/bob/activities", json=activity(time=when))
    assert_problem(r, 422, field="time")
    assert read_ids(sql_client, "user:bob") == []


@pytest.mark.parametrize(
    "when", ["2026-01-01T00:00:00Z", "2026-01-01T01:00:00+01:00", "2026-01-01 00:00:00.000Z"]
)
def test_iso_8601_times_with_an_offset_are_accepted(sql_client: httpx.Client, when: str) -> None:
    stored = publish(sql_client, "user:bob", activity(time=when))
    assert stored["time"] == "2026-01-01T00:00:00Z"
    assert sql_client.get(path("user:bob")).json()["results"][0]["id"] == stored["id"]
