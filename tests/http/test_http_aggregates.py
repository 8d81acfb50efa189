"""Aggregated and notification feeds over HTTP: aggregate pages, cursors, seen/read."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from test_http import assert_problem, follow, publish

from http_server import LiveApi, live_api

DAY = datetime(2026, 3, 1, 9, tzinfo=UTC)


@pytest.fixture(params=["sql", pytest.param("redis", marks=pytest.mark.redis)])
def client(request: pytest.FixtureRequest, database_url: str) -> Iterator[httpx.Client]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    live: LiveApi
    with (
        live_api(request.param, database_url, redis_url) as live,
        httpx.Client(base_url=live.url, headers=live.headers(), timeout=10) as c,
    ):
        yield c


def like(actor: str, obj: str, minute: int, **fields: Any) -> dict[str, Any]:
    when = DAY + timedelta(minutes=minute)
    return {"actor": actor, "verb": "like", "object": obj, "time": when.isoformat(), **fields}


def test_aggregated_timeline_aggregates_by_actor_verb_day(client: httpx.Client) -> None:
    # Given alice's aggregated timeline follows bob and carol
    assert follow(client, "timeline_aggregated:alice", "user:bob").status_code == 201
    assert follow(client, "timeline_aggregated:alice", "user:carol").status_code == 201
    # When bob likes three photos and carol one
    bobs = [publish(client, "user:bob", like("bob", f"photo:{i}", i)) for i in range(3)]
    carols = publish(client, "user:carol", like("carol", "photo:9", 10))
    # Then the timeline shows carol's aggregate first, then "bob liked 3 photos"
    r = client.get("/v1/feeds/timeline_aggregated/alice")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"results", "next"}  # no seen/read on aggregated feeds
    first, second = body["results"]
    assert first["group"] == "carol:like:2026-03-01"
    assert [a["id"] for a in first["activities"]] == [carols["id"]]
    assert second["group"] == "bob:like:2026-03-01"
    assert (second["activity_count"], second["actor_count"], second["verb"]) == (3, 1, "like")
    assert [a["id"] for a in second["activities"]] == [b["id"] for b in reversed(bobs)]
    assert second["created_at"] == bobs[0]["time"]
    assert second["updated_at"] == bobs[-1]["time"]
    assert "is_seen" not in second


def test_notification_counts_seen_and_read(client: httpx.Client) -> None:
    # Given five people like carol's photo and one comments
    for i, actor in enumerate(["ann", "ben", "cid", "dee", "eve"]):
        publish(client, f"user:{actor}", like(actor, "photo:1", i, to=["notification:carol"]))
    comment = {**like("ann", "photo:1", 9, to=["notification:carol"]), "verb": "comment"}
    publish(client, "user:ann", comment)
    page = client.get("/v1/feeds/notification/carol").json()
    assert (page["unseen"], page["unread"]) == (2, 2)
    likes = next(g for g in page["results"] if g["verb"] == "like")
    assert (likes["activity_count"], likes["actor_count"]) == (5, 5)
    assert (likes["is_seen"], likes["is_read"]) == (False, False)
    # When she marks the likes seen
    r = client.post("/v1/feeds/notification/carol/seen", json={"groups": [likes["group"]]})
    assert r.status_code == 200, r.text
    assert r.json() == {"unseen": 1, "unread": 2}
    # Then reading with mark_seen shows the earlier state and the counts after
    page = client.get("/v1/feeds/notification/carol", params={"mark_seen": "true"}).json()
    assert [g["is_seen"] for g in page["results"]] == [False, True]
    assert (page["unseen"], page["unread"]) == (0, 2)
    r = client.post("/v1/feeds/notification/carol/read", json={"all": True})
    assert r.json() == {"unseen": 0, "unread": 0}
    # And a new like makes the aggregate unseen and unread again
    publish(client, "user:fay", like("fay", "photo:1", 20, to=["notification:carol"]))
    page = client.get("/v1/feeds/notification/carol").json()
    assert (page["unseen"], page["unread"]) == (1, 1)
    assert page["results"][0]["activity_count"] == 6


def test_aggregate_cursor_walk_never_repeats(client: httpx.Client) -> None:
    for i in range(7):
        publish(client, f"user:u{i}", like(f"u{i}", f"photo:{i}", i, to=["notification:z"]))
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        body = client.get("/v1/feeds/notification/z", params=params).json()
        seen += [g["group"] for g in body["results"]]
        if len(seen) == 3:
            # An aggregate not yet shown gains a like between pages: it is not skipped.
            publish(client, "user:x", like("x", "photo:1", 30, to=["notification:z"]))
        cursor = body["next"]
        if cursor is None:
            break
    assert seen == [f"like:photo:{i}:2026-03-01" for i in reversed(range(7))]


def test_aggregate_errors_are_problems(client: httpx.Client) -> None:
    bad: list[dict[str, Any]] = [{}, {"all": False}, {"groups": []}, {"groups": ["a"], "all": True}]
    for body in bad:
        assert_problem(client.post("/v1/feeds/notification/c/seen", json=body), 422)
    assert_problem(client.post("/v1/feeds/timeline/c/seen", json={"all": True}), 422)
    assert_problem(client.post("/v1/feeds/timeline_aggregated/c/read", json={"all": True}), 422)
    r = client.get("/v1/feeds/timeline/c", params={"mark_seen": "true"})
    assert_problem(r, 422, field="mark_seen")
    r = client.get("/v1/feeds/notification/c", params={"mark_seen": "maybe"})
    assert_problem(r, 422, field="mark_seen")
    assert_problem(client.get("/v1/feeds/notification/c", params={"cursor": "abc"}), 422)
    r = client.get("/v1/feeds/timeline_aggregated/c", params={"limit": 0})
    assert_problem(r, 422, field="limit")
