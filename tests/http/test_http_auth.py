"""Who may do what over HTTP: 401 for every /v1 endpoint without a usable token, 403 for
user tokens outside their own feeds, and the user-token cases that must work."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from http_server import SECRET, LiveApi, live_api
from tidings.http.problems import MEDIA_TYPE

# A valid id that names no activity: auth is checked before anything is looked up.
ACTIVITY_ID = "0" * 32
ACTIVITY = {"actor": "bob", "verb": "post", "object": "note:1"}

#: Every operation under /v1 (method, path template, concrete path, JSON body).
ENDPOINTS: list[tuple[str, str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/feeds/{group}/{key}", "/v1/feeds/user/bob", None),
    ("POST", "/v1/feeds/{group}/{key}/activities", "/v1/feeds/user/bob/activities", ACTIVITY),
    (
        "POST",
        "/v1/feeds/{group}/{key}/activities:batch",
        "/v1/feeds/user/bob/activities:batch",
        {"activities": [ACTIVITY]},
    ),
    (
        "GET",
        "/v1/feeds/{group}/{key}/activities",
        "/v1/feeds/user/bob/activities?foreign_id=f",
        None,
    ),
    (
        "DELETE",
        "/v1/feeds/{group}/{key}/activities",
        "/v1/feeds/user/bob/activities?foreign_id=f",
        None,
    ),
    (
        "DELETE",
        "/v1/feeds/{group}/{key}/activities/{activity_id}",
        f"/v1/feeds/user/bob/activities/{ACTIVITY_ID}",
        None,
    ),
    ("GET", "/v1/activities/{activity_id}", f"/v1/activities/{ACTIVITY_ID}", None),
    ("PATCH", "/v1/activities/{activity_id}", f"/v1/activities/{ACTIVITY_ID}", {"set": {}}),
    (
        "POST",
        "/v1/feeds/{group}/{key}/follows",
        "/v1/feeds/timeline/bob/follows",
        {"source": "user:carol"},
    ),
    (
        "DELETE",
        "/v1/feeds/{group}/{key}/follows/{source}",
        "/v1/feeds/timeline/bob/follows/user:carol",
        None,
    ),
    (
        "POST",
        "/v1/follows:batch",
        "/v1/follows:batch",
        {"follows": [{"follower": "timeline:bob", "source": "user:carol"}]},
    ),
    ("GET", "/v1/feeds/{group}/{key}/followers", "/v1/feeds/user/bob/followers", None),
    ("GET", "/v1/feeds/{group}/{key}/following", "/v1/feeds/timeline/bob/following", None),
    ("POST", "/v1/feeds/{group}/{key}/seen", "/v1/feeds/notification/bob/seen", {"all": True}),
    ("POST", "/v1/feeds/{group}/{key}/read", "/v1/feeds/notification/bob/read", {"all": True}),
]

#: Operations under /v1 that are public on purpose (not in the OpenAPI schema either).
PUBLIC = {("GET", "/v1/ping")}


def _now() -> int:
    return int(time.time())


BAD_AUTHORIZATION: dict[str, str | None] = {
    "missing": None,
    "empty": "",
    "other scheme": "Token x",
    "bearer without token": "Bearer",
    "basic": "Basic dXNlcjpwYXNz",
    "two words": "Bearer not a.jwt",
    "not a jwt": "Bearer not.a.jwt",
    "expired": "Bearer "
    + jwt.encode({"sub": "bob", "exp": _now() - 60, "iat": _now() - 120}, SECRET, "HS256"),
    "other secret": "Bearer " + jwt.encode({"sub": "*", "scope": "server"}, "y" * 40, "HS256"),
    "star without scope": "Bearer " + jwt.encode({"sub": "*"}, SECRET, "HS256"),
    "star with user scope": "Bearer " + jwt.encode({"sub": "*", "scope": "user"}, SECRET, "HS256"),
    "no subject": "Bearer " + jwt.encode({"scope": "server"}, SECRET, "HS256"),
    "empty subject": "Bearer " + jwt.encode({"sub": ""}, SECRET, "HS256"),
    "alg none": "Bearer " + jwt.encode({"sub": "*", "scope": "server"}, None, "none"),
    "HS512": "Bearer " + jwt.encode({"sub": "*", "scope": "server"}, SECRET + "z" * 30, "HS512"),
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    """One service for the module (SQL store): authorisation does not depend on the store."""
    tmp: Path = tmp_path_factory.mktemp("http-auth")
    with pytest.MonkeyPatch.context() as mp:  # as conftest's _isolated_settings, module-wide
        for name in list(os.environ):
            if name.startswith("TIDINGS_"):
                mp.delenv(name)
        mp.setenv("TIDINGS_CONFIG", str(tmp / "absent.toml"))
        groups = {"site": {"public": True}}
        with live_api("sql", f"sqlite:///{tmp / 'auth.db'}", groups=groups) as api:
            yield api


@pytest.fixture(scope="module")
def anonymous(live: LiveApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=10) as c:
        yield c


@pytest.fixture(scope="module")
def server(live: LiveApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, headers=live.headers(), timeout=10) as c:
        yield c


@pytest.fixture(scope="module")
def alice(live: LiveApi) -> Iterator[httpx.Client]:
    """A user token for alice."""
    with httpx.Client(base_url=live.url, headers=live.headers("alice"), timeout=10) as c:
        yield c


def assert_problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].split(";")[0] == MEDIA_TYPE
    body: dict[str, Any] = r.json()
    assert {"type", "title", "status", "detail"} <= set(body)
    assert body["status"] == status
    return body


def ids(client: httpx.Client, url: str) -> list[str]:
    r = client.get(url, params={"limit": 100})
    assert r.status_code == 200, r.text
    return [a["id"] for a in r.json()["results"]]


# -- 401 -------------------------------------------------------------------------


def test_the_matrix_covers_every_v1_operation(anonymous: httpx.Client) -> None:
    schema = anonymous.get("/openapi.json").json()
    documented = {
        (method.upper(), template)
        for template, item in schema["paths"].items()
        if template.startswith("/v1/")
        for method in item
    }
    assert documented == {(m, t) for m, t, _, _ in ENDPOINTS}
    for method, template in documented:
        assert schema["paths"][template][method.lower()]["security"] == [{"HTTPBearer": []}]
    for method, url in PUBLIC:
        assert anonymous.request(method, url).status_code == 200


@pytest.mark.parametrize(
    "authorization", list(BAD_AUTHORIZATION.values()), ids=list(BAD_AUTHORIZATION)
)
@pytest.mark.parametrize(
    ("method", "url", "body"),
    [(m, u, b) for m, _, u, b in ENDPOINTS],
    ids=[f"{m} {t}" for m, t, _, _ in ENDPOINTS],
)
def test_no_usable_token_is_401(
    anonymous: httpx.Client,
    server: httpx.Client,
    method: str,
    url: str,
    body: dict[str, Any] | None,
    authorization: str | None,
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    r = anonymous.request(method, url, json=body, headers=headers)
    problem = assert_problem(r, 401)
    assert r.headers["www-authenticate"] == "Bearer"
    assert "field" not in problem
    # Nothing was written.
    assert ids(server, "/v1/feeds/user/bob") == []
    assert server.get("/v1/feeds/timeline/bob/following").json()["results"] == []


def test_401_details_say_what_is_wrong(anonymous: httpx.Client) -> None:
    def detail(authorization: str | None) -> str:
        headers = {} if authorization is None else {"Authorization": authorization}
        r = anonymous.get("/v1/feeds/user/bob", headers=headers)
        text: str = assert_problem(r, 401)["detail"]
        return text

    assert "missing" in detail(None)
    assert "Bearer" in detail("Token x")
    assert "expired" in detail(BAD_AUTHORIZATION["expired"])
    assert "signature" in detail(BAD_AUTHORIZATION["other secret"])
    assert "scope" in detail(BAD_AUTHORIZATION["star without scope"])


def test_tokens_that_work(anonymous: httpx.Client, live: LiveApi) -> None:
    fresh = jwt.encode({"sub": "alice", "exp": _now() + 60}, SECRET, "HS256")
    for authorization in (
        f"Bearer {live.server_token}",
        f"bearer {live.server_token}",  # the scheme is case-insensitive
        f"Bearer {live.token('alice')}",
        f"Bearer {fresh}",
    ):
        r = anonymous.get("/v1/feeds/timeline/alice", headers={"Authorization": authorization})
        assert r.status_code == 200, (authorization, r.text)


# -- 403 -------------------------------------------------------------------------


def test_user_reads_only_own_feeds_and_public_groups(
    alice: httpx.Client, server: httpx.Client
) -> None:
    published = server.post("/v1/feeds/site/1/activities", json={**ACTIVITY, "foreign_id": "s1"})
    assert published.status_code == 201

    for url in (
        "/v1/feeds/timeline/alice",
        "/v1/feeds/user/alice/followers",
        "/v1/feeds/timeline/alice/following",
        "/v1/feeds/site/1",  # public group
        "/v1/feeds/site/1/followers",
        "/v1/feeds/site/1/following",
    ):
        assert alice.get(url).status_code == 200, url
    assert alice.get("/v1/feeds/site/1").json()["results"] == [published.json()]
    r = alice.get("/v1/feeds/site/1/activities", params={"foreign_id": "s1"})
    assert r.status_code == 200
    assert r.json() == published.json()

    for url in (
        "/v1/feeds/timeline/bob",
        "/v1/feeds/user/bob",
        "/v1/feeds/notification/bob",
        "/v1/feeds/user/bob/followers",
        "/v1/feeds/timeline/bob/following",
        "/v1/feeds/user/bob/activities?foreign_id=x",
        "/v1/feeds/timeline/alicex",
    ):
        problem = assert_problem(alice.get(url), 403)
        assert "alice" in problem["detail"]


def test_user_publishes_only_as_self_into_own_feeds(
    alice: httpx.Client, server: httpx.Client
) -> None:
    as_bob = {**ACTIVITY, "actor": "bob"}
    as_alice = {**ACTIVITY, "actor": "alice"}
    assert_problem(alice.post("/v1/feeds/user/alice/activities", json=as_bob), 403)
    assert_problem(alice.post("/v1/feeds/user/bob/activities", json=as_alice), 403)
    assert_problem(alice.post("/v1/feeds/user/bob/activities", json=as_bob), 403)
    for items in ([as_alice, as_bob], [as_bob], [as_alice, {**as_alice, "actor": "Alice"}]):
        r = alice.post("/v1/feeds/user/alice/activities:batch", json={"activities": items})
        assert_problem(r, 403)
    r = alice.post("/v1/feeds/user/bob/activities:batch", json={"activities": [as_alice]})
    assert_problem(r, 403)
    assert ids(server, "/v1/feeds/user/alice") == []
    assert ids(server, "/v1/feeds/user/bob") == []

    r = alice.post("/v1/feeds/user/alice/activities", json={**as_alice, "foreign_id": "a1"})
    assert r.status_code == 201, r.text
    r = alice.post("/v1/feeds/user/alice/activities:batch", json={"activities": [as_alice]})
    assert r.status_code == 200, r.text
    assert len(ids(server, "/v1/feeds/user/alice")) == 2


def test_user_changes_only_own_activities(alice: httpx.Client, server: httpx.Client) -> None:
    bobs = server.post(
        "/v1/feeds/user/bob/activities", json={**ACTIVITY, "foreign_id": "b-own"}
    ).json()
    assert_problem(alice.get(f"/v1/activities/{bobs['id']}"), 403)
    assert_problem(alice.patch(f"/v1/activities/{bobs['id']}", json={"set": {"x": 1}}), 403)
    assert_problem(alice.delete(f"/v1/feeds/user/bob/activities/{bobs['id']}"), 403)
    r = alice.delete("/v1/feeds/user/bob/activities", params={"foreign_id": "b-own"})
    assert_problem(r, 403)
    assert server.get(f"/v1/activities/{bobs['id']}").json() == bobs

    mine = alice.post(
        "/v1/feeds/user/alice/activities",
        json={**ACTIVITY, "actor": "alice", "foreign_id": "a-own"},
    ).json()
    assert alice.get(f"/v1/activities/{mine['id']}").json() == mine
    r = alice.patch(f"/v1/activities/{mine['id']}", json={"set": {"x": 1}})
    assert r.status_code == 200
    assert r.json()["extra"] == {"x": 1}
    assert alice.delete(f"/v1/feeds/user/alice/activities/{mine['id']}").status_code == 204
    assert_problem(server.get(f"/v1/activities/{mine['id']}"), 404)


def test_user_follows_only_from_own_feeds(alice: httpx.Client, server: httpx.Client) -> None:
    r = alice.post("/v1/feeds/timeline/bob/follows", json={"source": "user:carol"})
    assert_problem(r, 403)
    assert server.get("/v1/feeds/timeline/bob/following").json()["results"] == []

    r = alice.post("/v1/feeds/timeline/alice/follows", json={"source": "user:carol"})
    assert r.status_code == 201, r.text
    r = alice.post("/v1/feeds/timeline/alice/follows", json={"source": "user:carol"})
    assert r.status_code == 200

    # Someone else's follow cannot be undone by alice.
    assert (
        server.post("/v1/feeds/timeline/bob/follows", json={"source": "user:carol"}).status_code
        == 201
    )
    assert_problem(alice.delete("/v1/feeds/timeline/bob/follows/user:carol"), 403)
    following = server.get("/v1/feeds/timeline/bob/following").json()["results"]
    assert [f["source"] for f in following] == ["user:carol"]

    # A batch with one foreign follower writes nothing.
    pairs = [
        {"follower": "timeline:alice", "source": "user:dave"},
        {"follower": "timeline:bob", "source": "user:dave"},
    ]
    assert_problem(alice.post("/v1/follows:batch", json={"follows": pairs}), 403)
    assert server.get("/v1/feeds/user/dave/followers").json()["results"] == []
    r = alice.post("/v1/follows:batch", json={"follows": pairs[:1]})
    assert r.status_code == 200
    assert r.json() == {"created": pairs[:1]}

    assert alice.delete("/v1/feeds/timeline/alice/follows/user:dave").status_code == 204
    sources = [
        f["source"] for f in alice.get("/v1/feeds/timeline/alice/following").json()["results"]
    ]
    assert sources == ["user:carol"]


def test_user_marks_only_own_notifications(alice: httpx.Client, server: httpx.Client) -> None:
    like = {**ACTIVITY, "actor": "carol", "verb": "like", "object": "photo:1"}
    for who in ("alice", "bob"):
        r = server.post(
            "/v1/feeds/user/carol/activities", json={**like, "to": [f"notification:{who}"]}
        )
        assert r.status_code == 201
    for verb in ("seen", "read"):
        r = alice.post(f"/v1/feeds/notification/bob/{verb}", json={"all": True})
        assert "alice" in assert_problem(r, 403)["detail"]
    r = alice.get("/v1/feeds/notification/bob", params={"mark_seen": "true"})
    assert_problem(r, 403)
    bobs = server.get("/v1/feeds/notification/bob").json()
    assert (bobs["unseen"], bobs["unread"]) == (1, 1)
    r = alice.post("/v1/feeds/notification/alice/read", json={"all": True})
    assert r.status_code == 200
    assert r.json() == {"unseen": 0, "unread": 0}


def test_user_flow(alice: httpx.Client, server: httpx.Client) -> None:
    """A user follows someone, publishes, and reads their own timeline."""
    assert alice.post(
        "/v1/feeds/timeline/alice/follows", json={"source": "user:erin"}
    ).status_code in (200, 201)
    erins = server.post(
        "/v1/feeds/user/erin/activities", json={**ACTIVITY, "actor": "erin", "object": "e:1"}
    ).json()
    own = alice.post(
        "/v1/feeds/user/alice/activities",
        json={**ACTIVITY, "actor": "alice", "object": "a:1", "to": ["timeline:alice"]},
    ).json()
    timeline = alice.get("/v1/feeds/timeline/alice").json()["results"]
    assert [a["id"] for a in timeline][:2] == [own["id"], erins["id"]]
