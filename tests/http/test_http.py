"""The REST API end to end: uvicorn on a real port, real stores, httpx as the client."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from http_server import LiveApi, live_api
from tidings.core.limits import MAX_BODY_BYTES
from tidings.http.problems import MEDIA_TYPE

T0 = datetime(2026, 1, 1, tzinfo=UTC)
_tick = itertools.count()
_MISSING = object()


# -- fixtures ------------------------------------------------------------------


@pytest.fixture(params=["sql", pytest.param("redis", marks=pytest.mark.redis)])
def api(request: pytest.FixtureRequest, database_url: str) -> Iterator[LiveApi]:
    """The service over the SQL store (on SQLite) or the Redis store."""
    store = request.param
    redis_url = request.getfixturevalue("redis_url") if store == "redis" else None
    with live_api(store, database_url, redis_url) as live:
        yield live


@pytest.fixture
def sql_api(database_url: str) -> Iterator[LiveApi]:
    """The service over the SQL store, for behaviour that does not depend on the store."""
    with live_api("sql", database_url) as live:
        yield live


@pytest.fixture
def client(api: LiveApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, headers=api.headers(), timeout=10) as c:
        yield c


@pytest.fixture
def sql_client(sql_api: LiveApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sql_api.url, headers=sql_api.headers(), timeout=10) as c:
        yield c


# -- helpers -------------------------------------------------------------------


def activity(actor: str = "bob", n: int | None = None, **fields: Any) -> dict[str, Any]:
    """An activity body; without ``time``, each one is a second after the last."""
    n = next(_tick) if n is None else n
    body: dict[str, Any] = {
        "actor": actor,
        "verb": "post",
        "object": f"note:{n}",
        "time": (T0 + timedelta(seconds=next(_tick))).isoformat(),
    }
    body.update(fields)
    return body


def publish(client: httpx.Client, feed: str, body: dict[str, Any]) -> dict[str, Any]:
    group, key = feed.split(":")
    r = client.post(f"/v1/feeds/{group}/{key}/activities", json=body)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def follow(client: httpx.Client, follower: str, source: str, **extra: Any) -> httpx.Response:
    group, key = follower.split(":")
    return client.post(f"/v1/feeds/{group}/{key}/follows", json={"source": source, **extra})


def path(feed: str) -> str:
    return "/v1/feeds/" + feed.replace(":", "/", 1)


def walk(
    client: httpx.Client, url: str, limit: int, **params: Any
) -> tuple[list[dict[str, Any]], int]:
    """Every item behind ``url``, following ``next``; returns (items, pages)."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        query: dict[str, Any] = {"limit": limit, **params}
        if cursor is not None:
            query["cursor"] = cursor
        r = client.get(url, params=query)
        assert r.status_code == 200, r.text
        body = r.json()
        pages += 1
        # Notification feeds add their unseen and unread counts.
        assert set(body) - {"unseen", "unread"} == {"results", "next"}
        assert len(body["results"]) <= limit
        items.extend(body["results"])
        cursor = body["next"]
        if cursor is None:
            return items, pages
        assert len(body["results"]) == limit, "only the last page may be short"
        assert pages < 1000


def read_ids(client: httpx.Client, feed: str) -> list[str]:
    """The ids a feed shows, newest first (for aggregated feeds, aggregate by aggregate)."""
    items, _ = walk(client, path(feed), 100)
    return [a["id"] for item in items for a in item.get("activities", [item])]


def assert_problem(
    r: httpx.Response, status: int, *, field: object = _MISSING, detail: str | None = None
) -> dict[str, Any]:
    """``r`` is an RFC 9457 problem with ``status`` (and ``field``, when given)."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].split(";")[0] == MEDIA_TYPE
    body: dict[str, Any] = r.json()
    assert (
        {"type", "title", "status", "detail"}
        <= set(body)
        <= {
            "type",
            "title",
            "status",
            "detail",
            "field",
        }
    )
    assert body["status"] == status
    assert body["type"].startswith("https://")
    assert isinstance(body["title"], str)
    assert body["title"]
    assert isinstance(body["detail"], str)
    assert body["detail"]
    if field is not _MISSING:
        assert body.get("field") == field, body
    if detail is not None:
        assert detail in body["detail"], body
    return body


# -- publishing ----------------------------------------------------------------


def test_publish_then_repeat_foreign_id(client: httpx.Client) -> None:
    body = activity(foreign_id="post-1", target="album:1", to=["notification:carol"])
    first = client.post("/v1/feeds/user/bob/activities", json=body)
    assert first.status_code == 201, first.text
    assert first.headers["content-type"] == "application/json"
    stored = first.json()
    assert len(stored["id"]) == 32
    assert {k: stored[k] for k in ("actor", "verb", "object", "target", "foreign_id", "to")} == {
        k: body[k] for k in ("actor", "verb", "object", "target", "foreign_id", "to")
    }
    assert stored["extra"] == {}
    assert datetime.fromisoformat(stored["time"]) == datetime.fromisoformat(body["time"])
    assert stored["time"].endswith("Z")

    # The same foreign_id in the same feed: the stored activity, unchanged.
    again = client.post("/v1/feeds/user/bob/activities", json={**body, "object": "note:other"})
    assert again.status_code == 200, again.text
    assert again.json() == stored
    assert read_ids(client, "user:bob") == [stored["id"]]
    assert read_ids(client, "notification:carol") == [stored["id"]]

    # ...but it is free in another feed.
    other = client.post("/v1/feeds/user/carol/activities", json={**body, "actor": "carol"})
    assert other.status_code == 201
    assert other.json()["id"] != stored["id"]


def test_publish_without_time_gets_server_time(client: httpx.Client) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    r = client.post(
        "/v1/feeds/user/bob/activities", json={"actor": "b", "verb": "v", "object": "o"}
    )
    assert r.status_code == 201
    assert before <= datetime.fromisoformat(r.json()["time"]) <= datetime.now(UTC)


def test_batch_reports_created_flags(client: httpx.Client) -> None:
    existing = publish(client, "user:bob", activity(foreign_id="f-0"))
    items = [
        activity(foreign_id="f-0"),  # already there
        activity(foreign_id="f-1"),
        activity(),  # no foreign_id: always new
        activity(foreign_id="f-1"),  # repeats an item of the same batch
    ]
    r = client.post("/v1/feeds/user/bob/activities:batch", json={"activities": items})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["created"] for x in results] == [False, True, True, False]
    assert results[0]["activity"] == existing
    assert results[3]["activity"] == results[1]["activity"]
    assert [x["activity"]["object"] for x in results[1:3]] == [i["object"] for i in items[1:3]]
    new_ids = {x["activity"]["id"] for x in results}
    assert set(read_ids(client, "user:bob")) == new_ids


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"verb": "has space"}, "activities.3.verb"),  # caught by the engine's rules
        ({"verb": "v" * 65}, "activities.3.verb"),  # caught by the request model
        ({"to": ["nogroup:x"]}, "activities.3.to"),
        ({"time": "2026-01-01T00:00:00"}, "activities.3.time"),  # naive
        ({"unknown": 1}, "activities.3.unknown"),
    ],
)
def test_batch_with_one_invalid_item_writes_nothing(
    client: httpx.Client, bad: dict[str, Any], field: str
) -> None:
    items = [activity(foreign_id=f"b-{i}", to=["notification:carol"]) for i in range(5)]
    items[3].update(bad)
    r = client.post("/v1/feeds/user/bob/activities:batch", json={"activities": items})
    assert_problem(r, 422, field=field)
    assert read_ids(client, "user:bob") == []
    assert read_ids(client, "notification:carol") == []
    missing = client.get("/v1/feeds/user/bob/activities", params={"foreign_id": "b-0"})
    assert_problem(missing, 404)


def test_batch_limits(sql_client: httpx.Client) -> None:
    r = sql_client.post("/v1/feeds/user/bob/activities:batch", json={"activities": []})
    assert_problem(r, 422, field="activities")
    many = [activity() for _ in range(101)]
    r = sql_client.post("/v1/feeds/user/bob/activities:batch", json={"activities": many})
    assert_problem(r, 422, field="activities")
    r = sql_client.post("/v1/feeds/user/bob/activities:batch", json={"activities": many[:100]})
    assert r.status_code == 200
    assert len(r.json()["results"]) == 100


# -- reading -------------------------------------------------------------------


def test_read_pages_with_cursor_walk(client: httpx.Client) -> None:
    published = [publish(client, "user:bob", activity()) for _ in range(7)]
    newest_first = [a["id"] for a in reversed(published)]

    for limit, pages in [(1, 7), (3, 3), (7, 1), (100, 1)]:
        items, n = walk(client, "/v1/feeds/user/bob", limit)
        assert [a["id"] for a in items] == newest_first
        assert n == pages
    first = client.get("/v1/feeds/user/bob").json()  # default limit 25
    assert first["results"] == list(reversed(published))
    assert first["next"] is None

    for bad_limit in ("0", "101", "-1", "many", "2.5"):
        r = client.get("/v1/feeds/user/bob", params={"limit": bad_limit})
        assert_problem(r, 422, field="limit")


def test_cursor_errors(client: httpx.Client) -> None:
    for _ in range(3):
        publish(client, "user:bob", activity())
    page = client.get("/v1/feeds/user/bob", params={"limit": 1}).json()
    cursor = page["next"]
    assert isinstance(cursor, str)
    for bad in (
        "not a cursor!",
        "AAAA",
        cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1],
    ):
        r = client.get("/v1/feeds/user/bob", params={"cursor": bad})
        assert_problem(r, 422, field="cursor")
    # A cursor is bound to its feed and to its list.
    r = client.get("/v1/feeds/user/carol", params={"cursor": cursor})
    assert_problem(r, 422, field="cursor")
    r = client.get("/v1/feeds/user/bob/followers", params={"cursor": cursor})
    assert_problem(r, 422, field="cursor")
    r = client.get("/v1/feeds/user/bob", params={"cursor": "A" * 1025})
    assert_problem(r, 422, field="cursor")


def test_get_activity_by_id_and_by_foreign_id(client: httpx.Client) -> None:
    stored = publish(client, "user:bob", activity(foreign_id="ext-9", extra={"k": [1, "two"]}))
    r = client.get(f"/v1/activities/{stored['id']}")
    assert r.status_code == 200
    assert r.json() == stored
    r = client.get("/v1/feeds/user/bob/activities", params={"foreign_id": "ext-9"})
    assert r.status_code == 200
    assert r.json() == stored

    assert_problem(client.get(f"/v1/activities/{'0' * 32}"), 404, detail="0" * 32)
    assert_problem(client.get("/v1/activities/not-an-id"), 422, field="id")
    r = client.get("/v1/feeds/user/carol/activities", params={"foreign_id": "ext-9"})
    assert_problem(r, 404)
    r = client.get("/v1/feeds/user/bob/activities", params={"foreign_id": "nope"})
    assert_problem(r, 404)
    assert_problem(client.get("/v1/feeds/user/bob/activities"), 422, field="foreign_id")


# -- changing and removing -----------------------------------------------------


def test_patch_extra_is_visible_in_follower_feeds(client: httpx.Client) -> None:
    assert follow(client, "timeline:alice", "user:bob").status_code == 201
    stored = publish(client, "user:bob", activity(extra={"a": 1, "b": {"x": True}}))

    r = client.patch(
        f"/v1/activities/{stored['id']}", json={"set": {"c": [3], "b": None}, "unset": ["a"]}
    )
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated == {**stored, "extra": {"b": None, "c": [3]}}
    timeline, _ = walk(client, "/v1/feeds/timeline/alice", 10)
    assert timeline == [updated]
    own, _ = walk(client, "/v1/feeds/user/bob", 10)
    assert own == [updated]
    assert client.get(f"/v1/activities/{stored['id']}").json() == updated

    r = client.patch(f"/v1/activities/{stored['id']}", json={"unset": ["b", "c", "absent"]})
    assert r.status_code == 200
    assert r.json()["extra"] == {}
    assert walk(client, "/v1/feeds/timeline/alice", 10)[0][0]["extra"] == {}

    assert_problem(client.patch(f"/v1/activities/{'f' * 32}", json={}), 404)
    assert_problem(
        client.patch(f"/v1/activities/{stored['id']}", json={"set": []}), 422, field="set"
    )
    r = client.patch(f"/v1/activities/{stored['id']}", json={"set": {"big": "x" * 11_000}})
    assert_problem(r, 422, field="extra")
    r = client.patch(f"/v1/activities/{stored['id']}", json={"other": 1})
    assert_problem(r, 422, field="other")


def test_delete_by_id_and_by_foreign_id(client: httpx.Client) -> None:
    assert follow(client, "timeline:alice", "user:bob").status_code == 201
    one = publish(client, "user:bob", activity())
    two = publish(client, "user:bob", activity(foreign_id="gone-2"))
    keep = publish(client, "user:bob", activity())
    assert read_ids(client, "timeline:alice") == [keep["id"], two["id"], one["id"]]

    r = client.delete(f"/v1/feeds/user/bob/activities/{one['id']}")
    assert r.status_code == 204
    assert r.content == b""
    r = client.delete("/v1/feeds/user/bob/activities", params={"foreign_id": "gone-2"})
    assert r.status_code == 204
    assert read_ids(client, "timeline:alice") == [keep["id"]]
    assert read_ids(client, "user:bob") == [keep["id"]]
    assert_problem(client.get(f"/v1/activities/{one['id']}"), 404)
    r = client.get("/v1/feeds/user/bob/activities", params={"foreign_id": "gone-2"})
    assert_problem(r, 404)

    # Gone is gone; and an activity can only be removed from the feed it was added to.
    assert_problem(client.delete(f"/v1/feeds/user/bob/activities/{one['id']}"), 404)
    r = client.delete("/v1/feeds/user/bob/activities", params={"foreign_id": "gone-2"})
    assert_problem(r, 404)
    assert_problem(client.delete(f"/v1/feeds/timeline/alice/activities/{keep['id']}"), 404)
    r = client.delete("/v1/feeds/user/bob/activities", params={"foreign_id": ""})
    assert_problem(r, 422, field="foreign_id")
    assert read_ids(client, "timeline:alice") == [keep["id"]]


# -- follows -------------------------------------------------------------------


def test_follow_copies_history_up_to_copy_limit(client: httpx.Client) -> None:
    published = [publish(client, "user:bob", activity()) for _ in range(5)]
    newest = [a["id"] for a in reversed(published)]

    r = follow(client, "timeline:alice", "user:bob", copy_limit=2)
    assert r.status_code == 201, r.text
    assert r.json() == {"follower": "timeline:alice", "source": "user:bob", "created": True}
    assert read_ids(client, "timeline:alice") == newest[:2]

    r = follow(client, "timeline:alice", "user:bob", copy_limit=5)
    assert r.status_code == 200
    assert r.json() == {"follower": "timeline:alice", "source": "user:bob", "created": False}
    assert read_ids(client, "timeline:alice") == newest[:2]  # nothing copied again

    assert follow(client, "timeline:carol", "user:bob", copy_limit=0).status_code == 201
    assert read_ids(client, "timeline:carol") == []
    assert follow(client, "timeline:dave", "user:bob").status_code == 201  # default 100
    assert read_ids(client, "timeline:dave") == newest

    later = publish(client, "user:bob", activity())
    for feed in ("timeline:alice", "timeline:carol", "timeline:dave"):
        assert read_ids(client, feed)[0] == later["id"]

    assert_problem(
        follow(client, "timeline:x", "user:bob", copy_limit=1001), 422, field="copy_limit"
    )
    assert_problem(follow(client, "timeline:x", "user:bob", copy_limit=-1), 422, field="copy_limit")
    assert_problem(follow(client, "user:bob", "user:bob"), 422)
    assert_problem(follow(client, "timeline:x", "nogroup:bob"), 422)
    assert_problem(follow(client, "timeline:x", "user"), 422, detail="group:key")
    assert_problem(follow(client, "timeline:x", "us"), 422, field="source")


def test_unfollow_with_and_without_history(client: httpx.Client) -> None:
    for feed in ("timeline:alice", "timeline:carol"):
        assert follow(client, feed, "user:bob").status_code == 201
    old = publish(client, "user:bob", activity())
    direct = publish(client, "user:bob", activity(to=["timeline:alice"]))

    r = client.delete("/v1/feeds/timeline/alice/follows/user:bob")
    assert r.status_code == 204
    assert r.content == b""
    # What came through the follow is gone; what was addressed to the feed stays.
    assert read_ids(client, "timeline:alice") == [direct["id"]]

    r = client.delete("/v1/feeds/timeline/carol/follows/user:bob", params={"keep_history": "true"})
    assert r.status_code == 204
    assert read_ids(client, "timeline:carol") == [direct["id"], old["id"]]

    publish(client, "user:bob", activity())
    assert read_ids(client, "timeline:alice") == [direct["id"]]
    assert read_ids(client, "timeline:carol") == [direct["id"], old["id"]]
    # Not following: still 204.
    assert client.delete("/v1/feeds/timeline/alice/follows/user:bob").status_code == 204
    assert_problem(client.delete("/v1/feeds/timeline/alice/follows/nope"), 422)


def test_follow_batch(client: httpx.Client) -> None:
    published = [publish(client, "user:bob", activity()) for _ in range(3)]
    assert follow(client, "timeline:alice", "user:bob").status_code == 201
    pairs = [
        {"follower": "timeline:alice", "source": "user:bob"},  # exists
        {"follower": "timeline:carol", "source": "user:bob"},
        {"follower": "timeline:carol", "source": "user:dave"},
    ]
    r = client.post("/v1/follows:batch", json={"follows": pairs, "copy_limit": 1})
    assert r.status_code == 200, r.text
    assert r.json() == {"created": pairs[1:]}
    assert read_ids(client, "timeline:carol") == [published[-1]["id"]]

    r = client.post("/v1/follows:batch", json={"follows": pairs})
    assert r.json() == {"created": []}

    # One bad pair: nothing is written.
    bad = [
        {"follower": "timeline:erin", "source": "user:bob"},
        {"follower": "x:y", "source": "user:bob"},
    ]
    assert_problem(client.post("/v1/follows:batch", json={"follows": bad}), 422)
    items, _ = walk(client, "/v1/feeds/timeline/erin/following", 10)
    assert items == []
    assert_problem(client.post("/v1/follows:batch", json={"follows": []}), 422, field="follows")


def test_followers_and_following_cursor_walk(client: httpx.Client) -> None:
    followers = [f"timeline:u{i}" for i in range(7)]
    sources = [f"user:s{i}" for i in range(5)]
    pairs = [{"follower": f, "source": "user:bob"} for f in followers]
    pairs += [{"follower": "timeline:u0", "source": s} for s in sources]
    r = client.post("/v1/follows:batch", json={"follows": pairs})
    assert r.status_code == 200
    assert len(r.json()["created"]) == 12

    for limit, pages in [(1, 7), (3, 3), (100, 1)]:
        items, n = walk(client, "/v1/feeds/user/bob/followers", limit)
        assert [i["follower"] for i in items] == sorted(followers)
        assert {i["source"] for i in items} == {"user:bob"}
        assert n == pages
    for item in items:
        assert datetime.fromisoformat(item["created_at"]).tzinfo is not None

    items, n = walk(client, "/v1/feeds/timeline/u0/following", 2)
    assert [i["source"] for i in items] == sorted([*sources, "user:bob"])
    assert n == 3
    assert walk(client, "/v1/feeds/user/nobody/followers", 5) == ([], 1)

    for url in ("/v1/feeds/user/bob/followers", "/v1/feeds/timeline/u0/following"):
        assert_problem(client.get(url, params={"limit": 0}), 422, field="limit")
        assert_problem(client.get(url, params={"limit": 101}), 422, field="limit")
        assert_problem(client.get(url, params={"cursor": "bogus!"}), 422, field="cursor")


# -- operations ----------------------------------------------------------------


def test_healthz(client: httpx.Client) -> None:
    r = client.get("/healthz", headers={"Authorization": ""})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"status": "ok", "pending_deliveries": 0}


def test_openapi_and_docs(sql_client: httpx.Client) -> None:
    r = sql_client.get("/openapi.json", headers={"Authorization": ""})
    assert r.status_code == 200
    schema = r.json()
    assert schema["openapi"].startswith("3.")
    assert {
        "/v1/feeds/{group}/{key}",
        "/v1/feeds/{group}/{key}/activities",
        "/v1/feeds/{group}/{key}/activities:batch",
        "/v1/feeds/{group}/{key}/activities/{activity_id}",
        "/v1/activities/{activity_id}",
        "/v1/feeds/{group}/{key}/follows",
        "/v1/feeds/{group}/{key}/follows/{source}",
        "/v1/follows:batch",
        "/v1/feeds/{group}/{key}/followers",
        "/v1/feeds/{group}/{key}/following",
        "/v1/feeds/{group}/{key}/seen",
        "/v1/feeds/{group}/{key}/read",
        "/v1/feeds/{group}/{key}/events",
        "/v1/firehose",
        "/v1/activities/{activity_id}/reactions",
        "/v1/reactions/{reaction_id}",
        "/v1/reactions/{reaction_id}/children",
        "/v1/reactions/{reaction_id}/restore",
        "/v1/users",
        "/v1/users/{user_id}",
        "/v1/users/by-handle/{handle}",
        "/v1/feeds/{group}/{key}/stats",
        "/v1/objects/{kind}/{object_id}",
        "/v1/users/{user_id}/mutes",
        "/v1/users/{user_id}/mutes/{target}",
        "/v1/users/{user_id}/blocks",
        "/v1/users/{user_id}/blocks/{target}",
        "/v1/users/{user_id}/filters",
        "/v1/users/{user_id}/filters/{filter_id}",
        "/healthz",
        "/metrics",
    } == set(schema["paths"])
    r = sql_client.get("/docs", headers={"Authorization": ""})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "/openapi.json" in r.text


# -- errors ----------------------------------------------------------------------


def test_not_found_problems(sql_client: httpx.Client) -> None:
    assert_problem(sql_client.get("/no/such/route"), 404)
    assert_problem(sql_client.get("/v1/feeds/user/bob/extra/segments"), 404)
    assert_problem(sql_client.get(f"/v1/activities/{'a' * 32}"), 404)


def test_feed_page_route_answers_get_only(sql_client: httpx.Client) -> None:
    # Starlette serves this route (not FastAPI's handler); its methods stay GET only.
    for method in ("POST", "PUT", "DELETE"):
        r = sql_client.request(method, "/v1/feeds/user/bob")
        assert_problem(r, 405)
        assert r.headers["allow"] == "GET"
    r = sql_client.head("/v1/feeds/user/bob")
    assert r.status_code == 405


def test_validation_problems(sql_client: httpx.Client) -> None:
    r = sql_client.post("/v1/feeds/nogroup/bob/activities", json=activity())
    assert_problem(r, 422, detail="nogroup")
    assert_problem(sql_client.get("/v1/feeds/nogroup/bob"), 422, detail="nogroup")
    assert_problem(sql_client.get("/v1/feeds/user/bad%20key"), 422)
    r = sql_client.post("/v1/feeds/user/bob/activities", json={"verb": "v", "object": "o"})
    assert_problem(r, 422, field="actor")
    r = sql_client.post("/v1/feeds/user/bob/activities", json=activity(extra={"x": "y" * 11_000}))
    assert_problem(r, 422, field="extra")
    r = sql_client.post("/v1/feeds/user/bob/activities", json=activity(time="1969-12-31T23:59:59Z"))
    assert_problem(r, 422, field="time")
    r = sql_client.post(
        "/v1/feeds/user/bob/activities",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert_problem(r, 422)
    assert read_ids(sql_client, "user:bob") == []


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_time_at_the_edge_of_datetime_is_a_validation_error(
    sql_client: httpx.Client, when: str
) -> None:
    r = sql_client.post("/v1/feeds/user/bob/activities", json=activity(time=when))
    assert_problem(r, 422, field="time")


def test_body_limit_with_content_length(sql_client: httpx.Client) -> None:
    headers = {"Content-Type": "application/json"}
    url = "/v1/feeds/user/bob/activities"
    too_big = b"{" + b" " * (MAX_BODY_BYTES - 1) + b"}"
    assert len(too_big) == MAX_BODY_BYTES + 1
    r = sql_client.post(url, content=too_big, headers=headers)
    assert_problem(r, 413, detail=str(MAX_BODY_BYTES))
    # At the limit the body is read (and found wanting).
    r = sql_client.post(url, content=too_big[1:], headers=headers)
    assert_problem(r, 422)


def test_body_limit_without_content_length(sql_client: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"actor": "bob", "verb": "post", "object": "o", "extra": {"pad": "'
        for _ in range(12):
            yield b"x" * 100_000
        yield b'"}}'

    r = sql_client.post(
        "/v1/feeds/user/bob/activities",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert "content-length" not in r.request.headers
    assert r.request.headers["transfer-encoding"] == "chunked"
    assert_problem(r, 413, detail=str(MAX_BODY_BYTES))


def test_an_idle_feed_read_again_answers_206_until_rebuilt(database_url: str) -> None:
    # Given alice, idle for 31 days, and bob's posts since (deliveries run by hand)
    with live_api("sql", database_url, task_runner="manual") as live:
        engine = live.engine
        now = [T0]
        engine.clock.now = lambda: now[0]
        with httpx.Client(base_url=live.url, headers=live.headers(), timeout=10) as c:
            assert follow(c, "timeline:alice", "user:bob").status_code == 201
            assert c.get(path("timeline:alice")).status_code == 200
            now[0] += timedelta(days=31)
            assert engine.admin.sweep_readers() == ["timeline:alice"]
            posted = [publish(c, "user:bob", activity(time=now[0].isoformat()))["id"]]
            engine.admin.drain()
            # When she reads: 206 with Retry-After, and the complete page
            first = c.get(path("timeline:alice"))
            assert first.status_code == 206
            assert first.headers["retry-after"] == "2"
            assert [a["id"] for a in first.json()["results"]] == posted
            # Then once rebuilt: 200 from the feed itself
            engine.admin.drain()
            again = c.get(path("timeline:alice"))
            assert again.status_code == 200
            assert again.json() == first.json()
