"""Users, objects, counts and enrichment over HTTP, and who may do what."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from http_server import LiveApi, live_api
from jsonld_as2 import expand
from tidings.core import as2
from tidings.http.problems import MEDIA_TYPE


@pytest.fixture
def api(database_url: str) -> Iterator[LiveApi]:
    with live_api("sql", database_url, user_object_types=["note"]) as live:
        yield live


@pytest.fixture
def server(api: LiveApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, headers=api.headers(), timeout=10) as c:
        yield c


def as_user(api: LiveApi, name: str) -> httpx.Client:
    return httpx.Client(base_url=api.url, headers=api.headers(name), timeout=10)


def problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].split(";")[0] == MEDIA_TYPE
    body: dict[str, Any] = r.json()
    return body


def test_users_their_handles_and_counts(server: httpx.Client) -> None:
    r = server.post("/v1/users", json={"id": "alice", "handle": "Alice", "profile": {"a": 1}})
    assert r.status_code == 201, r.text
    assert r.json() == {
        "id": "alice",
        "handle": "Alice",
        "profile": {"a": 1},
        "counts": {"followers": 0, "following": 0, "activities": 0},
    }
    taken = server.post("/v1/users", json={"id": "eve", "handle": "\uff21\uff2c\uff29\uff23\uff25"})
    assert problem(taken, 409)["field"] == "handle"
    assert server.get("/v1/users/by-handle/ALICE").json()["id"] == "alice"
    server.post("/v1/feeds/timeline/bob/follows", json={"source": "user:alice"})
    server.post(
        "/v1/feeds/user/alice/activities", json={"actor": "alice", "verb": "post", "object": "n:1"}
    )
    assert server.get("/v1/users/alice").json()["counts"] == {
        "followers": 1,
        "following": 0,
        "activities": 1,
    }
    assert server.get("/v1/feeds/timeline/bob/stats").json() == {
        "followers": 0,
        "following": 1,
        "activities": 0,
    }
    renamed = server.patch("/v1/users/alice", json={"handle": "alicia"})
    assert renamed.json()["handle"] == "alicia"
    assert server.get("/v1/users/by-handle/alice").json()["id"] == "alice"
    assert server.delete("/v1/users/alice").status_code == 204
    problem(server.get("/v1/users/alice"), 404)
    problem(server.get("/v1/users/by-handle/nobody"), 404)
    problem(server.post("/v1/users", json={"id": "x", "handle": "has space"}), 422)
    problem(
        server.post("/v1/users", json={"id": "x", "handle": "x", "profile": {"b": "y" * 11_000}}),
        422,
    )
    problem(server.get("/v1/feeds/nope/x/stats"), 422)


def test_objects_and_enrichment(server: httpx.Client) -> None:
    server.post("/v1/users", json={"id": "bob", "handle": "Bob", "profile": {"avatar": "b.png"}})
    put = server.put("/v1/objects/photo/17", json={"data": {"url": "17.jpg"}})
    assert put.status_code == 201
    assert server.put("/v1/objects/photo/17", json={"data": {"url": "x.jpg"}}).status_code == 200
    assert server.get("/v1/objects/photo/17").json() == {
        "type": "photo",
        "id": "17",
        "data": {"url": "x.jpg"},
    }
    server.post("/v1/feeds/timeline/alice/follows", json={"source": "user:bob"})
    made = server.post(
        "/v1/feeds/user/bob/activities",
        json={"actor": "bob", "verb": "post", "object": "photo:17", "target": "photo:18"},
    ).json()
    page = server.get("/v1/feeds/timeline/alice", params={"enrich": "true"}).json()
    activity = page["results"][0]
    assert activity["actor"] == {"id": "bob", "handle": "Bob", "profile": {"avatar": "b.png"}}
    assert activity["object"]["data"] == {"url": "x.jpg"}
    assert activity["target"] == "photo:18"
    one = server.get(f"/v1/activities/{made['id']}", params={"enrich": "true", "fields": "nothing"})
    assert one.json()["actor"]["profile"] == {}
    assert server.delete("/v1/objects/photo/17").status_code == 204
    problem(server.get("/v1/objects/photo/17"), 404)
    page = server.get("/v1/feeds/timeline/alice", params={"enrich": "true"}).json()
    assert page["results"][0]["object"] == {"type": "photo", "id": "17", "deleted": True}
    plain = server.get("/v1/feeds/timeline/alice").json()["results"][0]
    assert plain["actor"] == "bob"
    problem(server.get("/v1/feeds/timeline/alice", params={"enrich": "maybe"}), 422)


def test_who_may_write_users_and_objects(api: LiveApi, server: httpx.Client) -> None:
    with as_user(api, "alice") as alice:
        problem(alice.post("/v1/users", json={"id": "bob", "handle": "bob"}), 403)
        assert alice.post("/v1/users", json={"id": "alice", "handle": "alice"}).status_code == 201
        server.post("/v1/users", json={"id": "bob", "handle": "bob"})
        problem(alice.patch("/v1/users/bob", json={"handle": "evil"}), 403)
        problem(alice.delete("/v1/users/bob"), 403)
        assert alice.get("/v1/users/bob").status_code == 200
        assert alice.patch("/v1/users/alice", json={"profile": {"x": 1}}).status_code == 200
        problem(alice.put("/v1/objects/photo/1", json={"data": {}}), 403)
        assert alice.put("/v1/objects/note/1", json={"data": {}}).status_code == 201
        problem(alice.delete("/v1/objects/photo/1"), 403)
        assert alice.get("/v1/feeds/user/bob/stats").status_code == 200


def test_activitystreams_pages_expand_cleanly(server: httpx.Client) -> None:
    server.post("/v1/users", json={"id": "bob", "handle": "Bob", "profile": {"name": "Bob B"}})
    server.put("/v1/objects/photo/1", json={"data": {"url": "1.jpg"}})
    server.post("/v1/feeds/timeline/alice/follows", json={"source": "user:bob"})
    for verb in ("post", "like", "cheer"):
        body = {"actor": "bob", "verb": verb, "object": "photo:1", "extra": {"n": 1}}
        server.post("/v1/feeds/user/bob/activities", json=body)
    for params, headers in (
        ({"format": "as2", "limit": "2"}, {}),
        ({"limit": "2", "enrich": "true", "reactions": "counts"}, {"Accept": as2.MEDIA_TYPE}),
    ):
        r = server.get("/v1/feeds/timeline/alice", params=params, headers=headers)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith(as2.MEDIA_TYPE)
        doc = r.json()
        assert doc["type"] == "OrderedCollectionPage"
        assert [a["type"] for a in doc["orderedItems"]] == ["tidings:Activity", "Like"]
        assert doc["partOf"].endswith("/v1/feeds/timeline/alice")
        expanded = expand(doc)
        # orderedItems is as:items with an @list container: the order is kept.
        items = expanded[0]["https://www.w3.org/ns/activitystreams#items"][0]["@list"]
        assert len(items) == 2
        assert "limit=2" in doc["next"]  # the request's parameters carry over
        nxt = server.get(doc["next"])
        assert [a["type"] for a in nxt.json()["orderedItems"]] == ["Create"]
        expand(nxt.json())
    problem(server.get("/v1/feeds/timeline/alice", params={"format": "xml"}), 422)
    problem(server.get("/v1/feeds/notification/alice", params={"format": "as2"}), 422)
    # Asked for by Accept alone, a feed of aggregates comes as JSON.
    aggregates = server.get("/v1/feeds/notification/alice", headers={"Accept": as2.MEDIA_TYPE})
    assert aggregates.status_code == 200
    assert "results" in aggregates.json()
    assert server.get("/v1/feeds/timeline/alice", params={"format": "json"}).json()["results"]


def test_mutes_blocks_and_filters(api: LiveApi, server: httpx.Client) -> None:
    for actor in ("bob", "carol"):
        server.post("/v1/feeds/timeline/alice/follows", json={"source": f"user:{actor}"})
        body = {"actor": actor, "verb": "post", "object": "n:1", "extra": {"text": "spoiler ahead"}}
        server.post(f"/v1/feeds/user/{actor}/activities", json=body)
    with as_user(api, "alice") as alice, as_user(api, "bob") as bob:
        r = alice.post("/v1/users/alice/mutes", json={"target": "bob", "duration_s": 3600})
        assert r.status_code == 201, r.text
        assert r.json()["target"] == "bob"
        actors = [a["actor"] for a in alice.get("/v1/feeds/timeline/alice").json()["results"]]
        assert actors == ["carol"]
        assert [m["target"] for m in alice.get("/v1/users/alice/mutes").json()["results"]] == [
            "bob"
        ]
        assert alice.delete("/v1/users/alice/mutes/bob").status_code == 204
        problem(alice.delete("/v1/users/alice/mutes/bob"), 404)
        made = alice.post("/v1/users/alice/filters", json={"keywords": ["spoiler"]})
        assert made.status_code == 201, made.text
        assert alice.get("/v1/feeds/timeline/alice").json()["results"] == []
        fid = made.json()["id"]
        assert alice.delete(f"/v1/users/alice/filters/{fid}").status_code == 204
        problem(alice.post("/v1/users/alice/filters", json={"keywords": []}), 422)
        problem(
            alice.post("/v1/users/alice/filters", json={"keywords": ["x"], "contexts": ["home"]}),
            422,
        )
        problem(alice.post("/v1/users/alice/mutes", json={"target": "bob", "duration_s": 0}), 422)
        # Own rules only.
        problem(bob.get("/v1/users/alice/mutes"), 403)
        problem(bob.post("/v1/users/alice/blocks", json={"target": "carol"}), 403)
        assert alice.post("/v1/users/alice/blocks", json={"target": "bob"}).status_code == 201
        assert alice.get("/v1/users/alice/blocks").json()["results"] == [{"target": "bob"}]
        refused = server.post("/v1/feeds/timeline/bob/follows", json={"source": "user:alice"})
        assert "blocks" in problem(refused, 403)["detail"]
        actors = [a["actor"] for a in alice.get("/v1/feeds/timeline/alice").json()["results"]]
        assert actors == ["carol"]
        assert alice.delete("/v1/users/alice/blocks/bob").status_code == 204


def test_look_alike_handles_are_refused(api: LiveApi, server: httpx.Client) -> None:
    cyrillic_admin = "\u0430\u0501\u043c\u0456\u043f"  # a komi-de em i pe: reads "admin"
    cyrillic_alice = "\u0430\u04cf\u0456\u0441\u0435"  # a palochka i es ie: reads "alice"
    mixed = problem(server.post("/v1/users", json={"id": "x", "handle": "\u0430dmin"}), 422)
    assert mixed["field"] == "handle"
    assert "mixes the scripts Cyrillic (U+0430), Latin" in mixed["detail"]
    reserved = problem(server.post("/v1/users", json={"id": "x", "handle": cyrillic_admin}), 409)
    assert (reserved["field"], reserved["detail"]) == (
        "handle",
        f"handle {cyrillic_admin!r} is reserved",
    )
    assert server.post("/v1/users", json={"id": "alice", "handle": "Alice"}).status_code == 201
    for handle in (cyrillic_alice, "AIice", "a1ice"):
        taken = problem(server.post("/v1/users", json={"id": "x", "handle": handle}), 409)
        assert (taken["field"], taken["detail"]) == ("handle", f"handle {handle!r} is taken")
        assert server.get(f"/v1/users/by-handle/{handle}").json()["id"] == "alice"
    problem(server.get("/v1/users/x"), 404)
    renamed = server.patch("/v1/users/alice", json={"handle": "supp\u043ert"})
    assert "mixes the scripts" in problem(renamed, 422)["detail"]
    assert server.get("/v1/users/alice").json()["handle"] == "Alice"


def test_a_deleted_user_id_is_kept_for_the_keep_time(api: LiveApi, server: httpx.Client) -> None:
    now = datetime.now(UTC)
    api.engine.clock.now = lambda: now
    server.post("/v1/users", json={"id": "gone", "handle": "gone"})
    server.post(
        "/v1/feeds/user/gone/activities", json={"actor": "gone", "verb": "post", "object": "n:1"}
    )
    assert server.delete("/v1/users/gone").status_code == 204
    again = problem(server.post("/v1/users", json={"id": "gone", "handle": "back"}), 409)
    assert again["field"] == "id"
    assert "'gone' was deleted; its id is kept for handle_keep_seconds" in again["detail"]
    problem(server.get("/v1/users/gone"), 404)
    keep = api.engine.settings.handle_keep_seconds
    api.engine.clock.now = lambda: now + timedelta(seconds=keep + 1)
    made = server.post("/v1/users", json={"id": "gone", "handle": "back"})
    assert made.status_code == 201, made.text
    assert made.json()["counts"]["activities"] == 0
    page = server.get("/v1/feeds/user/gone", params={"enrich": "true"}).json()
    assert page["results"][0]["actor"] == {"id": "gone", "deleted": True}


def test_rule_targets_are_checked(api: LiveApi, server: httpx.Client) -> None:
    with as_user(api, "alice") as alice:
        refused = {
            rule: problem(alice.post(f"/v1/users/alice/{rule}s", json={"target": "alice"}), 422)
            for rule in ("mute", "block")
        }
        for rule, body in refused.items():
            assert (body["field"], body["detail"]) == ("target", f"a user cannot {rule} themselves")
        for target in ("*", "bob/../x", "user:bob"):
            for rule in ("mutes", "blocks"):
                r = alice.post(f"/v1/users/alice/{rule}", json={"target": target})
                body = problem(r, 422)
                assert body["field"] == "target"
                assert "the key of the user's feeds" in body["detail"]
                assert repr(target) in body["detail"]
        assert alice.get("/v1/users/alice/mutes").json()["results"] == []
        assert alice.get("/v1/users/alice/blocks").json()["results"] == []
