"""Reactions and ranked feeds over HTTP: the routes, who may do what, and the
feed read's ``reactions``, ``user`` and ``explain`` parameters."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from http_server import LiveApi, live_api
from tidings.http.problems import MEDIA_TYPE
from waiting import wait_until

GROUPS = {"ranked": {"kind": "ranked", "ranking": "likes * 10 + comments", "snapshot_seconds": 60}}


@pytest.fixture
def api(database_url: str) -> Iterator[LiveApi]:
    with live_api("sql", database_url, groups=GROUPS) as live:
        yield live


@pytest.fixture
def server(api: LiveApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, headers=api.headers(), timeout=10) as c:
        yield c


def user(api: LiveApi, name: str) -> httpx.Client:
    return httpx.Client(base_url=api.url, headers=api.headers(name), timeout=10)


def publish(server: httpx.Client, actor: str = "carol", n: int = 1) -> str:
    r = server.post(
        f"/v1/feeds/user/{actor}/activities",
        json={"actor": actor, "verb": "post", "object": f"photo:{n}"},
    )
    assert r.status_code == 201, r.text
    activity_id: str = r.json()["id"]
    return activity_id


def problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].split(";")[0] == MEDIA_TYPE
    body: dict[str, Any] = r.json()
    return body


def test_add_read_change_and_remove_reactions(api: LiveApi, server: httpx.Client) -> None:
    aid = publish(server)
    url = f"/v1/activities/{aid}/reactions"
    like = server.post(url, json={"kind": "like", "user": "alice"})
    assert like.status_code == 201, like.text
    again = server.post(url, json={"kind": "like", "user": "alice"})
    assert again.status_code == 200
    assert again.json()["id"] == like.json()["id"]
    comment = server.post(url, json={"kind": "comment", "user": "bob", "data": {"text": "hi"}})
    assert comment.status_code == 201
    cid = comment.json()["id"]
    reply = server.post(url, json={"kind": "comment", "user": "alice", "parent": cid})
    assert reply.status_code == 201
    assert reply.json()["parent"] == cid

    page = server.get(url, params={"limit": 1})
    assert page.status_code == 200
    assert [r["id"] for r in page.json()["results"]] == [cid]
    rest = server.get(url, params={"limit": 1, "cursor": page.json()["next"]}).json()
    assert [r["kind"] for r in rest["results"]] == ["like"]
    assert rest["next"] is None
    assert [r["id"] for r in server.get(url, params={"kind": "like"}).json()["results"]] == [
        like.json()["id"]
    ]
    children = server.get(f"/v1/reactions/{cid}/children").json()["results"]
    assert [r["id"] for r in children] == [reply.json()["id"]]
    assert server.get(f"/v1/reactions/{cid}").json()["children_counts"] == {"comment": 1}

    changed = server.patch(f"/v1/reactions/{cid}", json={"data": {"text": "hello"}})
    assert changed.status_code == 200
    assert changed.json()["data"] == {"text": "hello"}
    assert server.delete(f"/v1/reactions/{cid}").status_code == 204
    problem(server.get(f"/v1/reactions/{cid}"), 404)
    problem(server.get(f"/v1/reactions/{reply.json()['id']}"), 404)


def test_bad_input_is_a_clear_problem(server: httpx.Client) -> None:
    aid = publish(server)
    url = f"/v1/activities/{aid}/reactions"
    assert problem(server.post(url, json={"kind": "Like", "user": "a"}), 422)["field"] == "kind"
    big = {"kind": "comment", "user": "a", "data": {"t": "x" * 11_000}}
    assert "10,240" in problem(server.post(url, json=big), 422)["detail"]
    assert problem(server.post(url, json={"kind": "like"}), 422)
    missing = "/v1/activities/" + "0" * 32 + "/reactions"
    problem(server.post(missing, json={"kind": "like", "user": "a"}), 404)
    problem(server.post("/v1/activities/nope/reactions", json={"kind": "like", "user": "a"}), 422)
    problem(server.get(url, params={"cursor": "garbage"}), 422)
    problem(server.get("/v1/reactions/nope"), 422)
    assert server.get(url).json()["results"] == []


def test_user_tokens_react_as_themselves_and_remove_only_their_own(
    api: LiveApi, server: httpx.Client
) -> None:
    aid = publish(server)
    url = f"/v1/activities/{aid}/reactions"
    private = {"actor": "carol", "verb": "post", "object": "photo:9"}
    held = server.post("/v1/feeds/timeline/carol/activities", json=private).json()["id"]
    hidden = f"/v1/activities/{held}/reactions"
    with user(api, "mallory") as mallory:
        # Nothing of mallory's follows or holds carol's private activity: not
        # even its reactions. Her public profile's activities anyone may see.
        problem(mallory.post(hidden, json={"kind": "like", "user": "mallory"}), 403)
        problem(mallory.get(hidden), 403)
        assert mallory.get(url).status_code == 200
    for reader in ("alice", "bob"):
        server.post(f"/v1/feeds/timeline/{reader}/follows", json={"source": "user:carol"})
    with user(api, "alice") as alice, user(api, "bob") as bob:
        problem(alice.post(url, json={"kind": "like", "user": "bob"}), 403)
        mine = alice.post(url, json={"kind": "comment", "user": "alice"})
        assert mine.status_code == 201
        rid = mine.json()["id"]
        # Any token reads reactions.
        assert [r["id"] for r in bob.get(url).json()["results"]] == [rid]
        problem(bob.delete(f"/v1/reactions/{rid}"), 403)
        problem(bob.patch(f"/v1/reactions/{rid}", json={"data": {"x": 1}}), 403)
        # `to` only into feeds a user token may address.
        problem(alice.post(url, json={"kind": "like", "user": "alice", "to": ["user:carol"]}), 403)
        ok = alice.post(url, json={"kind": "like", "user": "alice", "to": ["notification:carol"]})
        assert ok.status_code == 201, ok.text
        assert alice.delete(f"/v1/reactions/{rid}").status_code == 204
    aggregates = server.get("/v1/feeds/notification/carol").json()["results"]
    assert [g["verb"] for g in aggregates] == ["like"]
    # Aggregates' activities carry reactions too (here: the notification's own, none).
    notice = aggregates[0]["activities"][0]["id"]
    server.post(f"/v1/activities/{notice}/reactions", json={"kind": "like", "user": "carol"})
    r = server.get(
        "/v1/feeds/notification/carol", params={"reactions": "counts,own", "user": "carol"}
    )
    activity = r.json()["results"][0]["activities"][0]
    assert activity["reaction_counts"] == {"like": 1}
    assert [x["user"] for x in activity["own_reactions"]["like"]] == ["carol"]


def test_soft_removal_and_restore(api: LiveApi, server: httpx.Client) -> None:
    aid = publish(server)
    url = f"/v1/activities/{aid}/reactions"
    server.post("/v1/feeds/timeline/alice/follows", json={"source": "user:carol"})
    with user(api, "alice") as alice, user(api, "bob") as bob:
        body = {"kind": "comment", "user": "alice", "to": ["notification:carol"]}
        comment = alice.post(url, json=body).json()
        rid = comment["id"]
        assert alice.delete(f"/v1/reactions/{rid}", params={"soft": "true"}).status_code == 204
        assert server.get(url).json()["results"] == []
        assert server.get("/v1/feeds/notification/carol").json()["results"] == []
        problem(server.get(f"/v1/reactions/{rid}"), 404)
        problem(alice.delete(f"/v1/reactions/{rid}", params={"soft": "true"}), 404)
        problem(bob.post(f"/v1/reactions/{rid}/restore"), 403)
        restored = alice.post(f"/v1/reactions/{rid}/restore")
        assert restored.status_code == 200, restored.text
        assert restored.json() == comment
    assert [r["id"] for r in server.get(url).json()["results"]] == [rid]
    wait_until(
        lambda: len(server.get("/v1/feeds/notification/carol").json()["results"]) == 1,
        what="the notice published again",
    )
    detail = problem(server.post(f"/v1/reactions/{rid}/restore"), 404)["detail"]
    assert "is not removed" in detail
    problem(server.post(f"/v1/reactions/{'0' * 32}/restore"), 404)
    # Removed softly, then for good: nothing left to restore.
    assert server.delete(f"/v1/reactions/{rid}", params={"soft": "true"}).status_code == 204
    assert server.delete(f"/v1/reactions/{rid}").status_code == 204
    problem(server.post(f"/v1/reactions/{rid}/restore"), 404)
    problem(server.delete(f"/v1/reactions/{rid}", params={"soft": "maybe"}), 422)


def test_feed_pages_carry_reactions_and_ranked_pages_scores(
    api: LiveApi, server: httpx.Client
) -> None:
    server.post("/v1/feeds/ranked/alice/follows", json={"source": "user:carol"})
    made = [publish(server, n=n) for n in range(4)]
    server.post(f"/v1/activities/{made[0]}/reactions", json={"kind": "like", "user": "alice"})
    with user(api, "alice") as alice:
        r = alice.get("/v1/feeds/ranked/alice", params={"limit": 2, "reactions": "counts,own"})
        assert r.status_code == 200, r.text
        first = r.json()
        assert [a["id"] for a in first["results"]] == [made[0], made[3]]
        assert [a["score"] for a in first["results"]] == [10.0, 0.0]
        assert first["results"][0]["reaction_counts"] == {"like": 1}
        assert [x["user"] for x in first["results"][0]["own_reactions"]["like"]] == ["alice"]
        problem(alice.get("/v1/feeds/ranked/alice", params={"user": "bob"}), 403)
        explained = alice.get("/v1/feeds/ranked/alice", params={"explain": "true"}).json()
        assert explained["results"][0]["explain"]["likes"] == 1.0
        second = alice.get("/v1/feeds/ranked/alice", params={"limit": 2, "cursor": first["next"]})
        assert [a["id"] for a in second.json()["results"]] == [made[2], made[1]]
        assert "renewed" not in second.json()
    problem(server.get("/v1/feeds/user/carol", params={"explain": "true"}), 422)
    problem(server.get("/v1/feeds/user/carol", params={"reactions": "all"}), 422)
    problem(server.get("/v1/feeds/notification/carol", params={"explain": "true"}), 422)
    problem(server.get("/v1/feeds/notification/carol", params={"reactions": "x"}), 422)
    flat = server.get("/v1/feeds/user/carol", params={"reactions": "counts", "user": "zed"})
    assert flat.json()["results"][-1]["reaction_counts"] == {"like": 1}


def test_renewed_and_expired_ranked_cursors(api: LiveApi, server: httpx.Client) -> None:
    server.post("/v1/feeds/ranked/alice/follows", json={"source": "user:carol"})
    made = [publish(server, n=n) for n in range(5)]
    now = datetime.now(UTC)
    api.engine.clock.now = lambda: now
    first = server.get("/v1/feeds/ranked/alice", params={"limit": 2}).json()
    api.engine.clock.now = lambda: now + timedelta(seconds=61)
    renewed = server.get("/v1/feeds/ranked/alice", params={"limit": 2, "cursor": first["next"]})
    assert renewed.json()["renewed"] is True
    shown = [a["id"] for a in first["results"] + renewed.json()["results"]]
    assert len(set(shown)) == 4
    assert set(shown) <= set(made)
    api.engine.clock.now = lambda: now + timedelta(seconds=10_000)
    gone = server.get("/v1/feeds/ranked/alice", params={"limit": 2, "cursor": first["next"]})
    assert "first page" in problem(gone, 410)["detail"]


def test_a_ranked_group_with_a_bad_expression_does_not_start(tmp_path: Path) -> None:
    bad = {"ranked": {"kind": "ranked", "ranking": "ln(likes"}}
    with (
        pytest.raises(ValueError, match="position"),
        live_api("sql", f"sqlite:///{tmp_path / 'x.db'}", groups=bad),
    ):
        pass
