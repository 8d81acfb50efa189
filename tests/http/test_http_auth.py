"""Who may do what over HTTP: 401 for every /v1 endpoint without a usable token, 403 for
user tokens outside their own feeds, and the user-token cases that must work."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from http_server import SECRET, LiveApi, live_api
from tidings.core.limits import MAX_BATCH_TO
from tidings.http.auth import TokenCache, Unauthenticated, mint
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
        {"source": "site:carol"},
    ),
    (
        "DELETE",
        "/v1/feeds/{group}/{key}/follows/{source}",
        "/v1/feeds/timeline/bob/follows/site:carol",
        None,
    ),
    (
        "POST",
        "/v1/follows:batch",
        "/v1/follows:batch",
        {"follows": [{"follower": "timeline:bob", "source": "site:carol"}]},
    ),
    ("GET", "/v1/feeds/{group}/{key}/followers", "/v1/feeds/user/bob/followers", None),
    ("GET", "/v1/feeds/{group}/{key}/following", "/v1/feeds/timeline/bob/following", None),
    ("POST", "/v1/feeds/{group}/{key}/seen", "/v1/feeds/notification/bob/seen", {"all": True}),
    ("POST", "/v1/feeds/{group}/{key}/read", "/v1/feeds/notification/bob/read", {"all": True}),
    ("GET", "/v1/feeds/{group}/{key}/events", "/v1/feeds/timeline/bob/events", None),
    ("GET", "/v1/firehose", "/v1/firehose?track=cat", None),
    (
        "POST",
        "/v1/activities/{activity_id}/reactions",
        f"/v1/activities/{ACTIVITY_ID}/reactions",
        {"kind": "like", "user": "bob"},
    ),
    (
        "GET",
        "/v1/activities/{activity_id}/reactions",
        f"/v1/activities/{ACTIVITY_ID}/reactions",
        None,
    ),
    ("GET", "/v1/reactions/{reaction_id}", f"/v1/reactions/{ACTIVITY_ID}", None),
    (
        "GET",
        "/v1/reactions/{reaction_id}/children",
        f"/v1/reactions/{ACTIVITY_ID}/children",
        None,
    ),
    (
        "PATCH",
        "/v1/reactions/{reaction_id}",
        f"/v1/reactions/{ACTIVITY_ID}",
        {"data": {}},
    ),
    ("DELETE", "/v1/reactions/{reaction_id}", f"/v1/reactions/{ACTIVITY_ID}", None),
    (
        "POST",
        "/v1/reactions/{reaction_id}/restore",
        f"/v1/reactions/{ACTIVITY_ID}/restore",
        None,
    ),
    ("POST", "/v1/users", "/v1/users", {"id": "bob", "handle": "bob"}),
    ("GET", "/v1/users/{user_id}", "/v1/users/bob", None),
    ("PATCH", "/v1/users/{user_id}", "/v1/users/bob", {"handle": "bobby"}),
    ("DELETE", "/v1/users/{user_id}", "/v1/users/bob", None),
    ("GET", "/v1/users/by-handle/{handle}", "/v1/users/by-handle/bob", None),
    ("GET", "/v1/feeds/{group}/{key}/stats", "/v1/feeds/user/bob/stats", None),
    ("PUT", "/v1/objects/{kind}/{object_id}", "/v1/objects/photo/1", {"data": {}}),
    ("GET", "/v1/objects/{kind}/{object_id}", "/v1/objects/photo/1", None),
    ("DELETE", "/v1/objects/{kind}/{object_id}", "/v1/objects/photo/1", None),
    ("POST", "/v1/users/{user_id}/mutes", "/v1/users/bob/mutes", {"target": "carol"}),
    ("GET", "/v1/users/{user_id}/mutes", "/v1/users/bob/mutes", None),
    ("DELETE", "/v1/users/{user_id}/mutes/{target}", "/v1/users/bob/mutes/carol", None),
    ("POST", "/v1/users/{user_id}/blocks", "/v1/users/bob/blocks", {"target": "carol"}),
    ("GET", "/v1/users/{user_id}/blocks", "/v1/users/bob/blocks", None),
    ("DELETE", "/v1/users/{user_id}/blocks/{target}", "/v1/users/bob/blocks/carol", None),
    ("POST", "/v1/users/{user_id}/filters", "/v1/users/bob/filters", {"keywords": ["x"]}),
    ("GET", "/v1/users/{user_id}/filters", "/v1/users/bob/filters", None),
    ("DELETE", "/v1/users/{user_id}/filters/{filter_id}", "/v1/users/bob/filters/x", None),
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
    # PyJWT accepts a numeric string as exp; the token cache would keep it forever.
    "exp a string": "Bearer " + jwt.encode({"sub": "bob", "exp": str(_now() + 3600)}, SECRET),
    "exp a boolean": "Bearer " + jwt.encode({"sub": "bob", "exp": True}, SECRET),
    # Beyond a float: once a plain-text 500 (OverflowError).
    "exp 10**400": "Bearer " + jwt.encode({"sub": "bob", "exp": 10**400}, SECRET),
    "nbf 10**400": "Bearer " + jwt.encode({"sub": "bob", "nbf": 10**400}, SECRET),
    "iat 10**400": "Bearer " + jwt.encode({"sub": "bob", "iat": 10**400}, SECRET),
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
        # Profiles (`user`) are public by default; closed here, the rules for
        # a private group apply to them (test_profiles_are_public_by_default).
        groups = {"site": {"public": True}, "user": {"public": False}}
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
    assert "exp" in detail(BAD_AUTHORIZATION["exp a string"])
    assert "exp" in detail(BAD_AUTHORIZATION["exp a boolean"])
    assert "exp is out of range" in detail(BAD_AUTHORIZATION["exp 10**400"])


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


def test_a_token_whose_exp_is_not_a_number_is_refused_not_cached() -> None:
    """PyJWT takes a numeric string for exp; the cache would then take the token
    for one without expiry and accept it forever."""
    cache = TokenCache(SECRET)
    for exp in (str(_now() + 2), True, None):
        token = jwt.encode({"sub": "bob", "exp": exp}, SECRET)
        with pytest.raises(Unauthenticated, match="exp"):
            cache.verify(f"Bearer {token}")
    expires = _now() + 60.5  # a float is a number too
    fine = jwt.encode({"sub": "bob", "exp": expires}, SECRET)
    assert cache.verify(f"Bearer {fine}").expires_at == expires


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
    r = alice.post("/v1/feeds/timeline/bob/follows", json={"source": "site:carol"})
    assert_problem(r, 403)
    assert server.get("/v1/feeds/timeline/bob/following").json()["results"] == []

    r = alice.post("/v1/feeds/timeline/alice/follows", json={"source": "site:carol"})
    assert r.status_code == 201, r.text
    r = alice.post("/v1/feeds/timeline/alice/follows", json={"source": "site:carol"})
    assert r.status_code == 200

    # Someone else's follow cannot be undone by alice.
    assert (
        server.post("/v1/feeds/timeline/bob/follows", json={"source": "site:carol"}).status_code
        == 201
    )
    assert_problem(alice.delete("/v1/feeds/timeline/bob/follows/site:carol"), 403)
    following = server.get("/v1/feeds/timeline/bob/following").json()["results"]
    assert [f["source"] for f in following] == ["site:carol"]

    # A batch with one foreign follower writes nothing.
    pairs = [
        {"follower": "timeline:alice", "source": "site:dave"},
        {"follower": "timeline:bob", "source": "site:dave"},
    ]
    assert_problem(alice.post("/v1/follows:batch", json={"follows": pairs}), 403)
    assert server.get("/v1/feeds/site/dave/followers").json()["results"] == []
    r = alice.post("/v1/follows:batch", json={"follows": pairs[:1]})
    assert r.status_code == 200
    assert r.json() == {"created": pairs[:1]}

    assert alice.delete("/v1/feeds/timeline/alice/follows/site:dave").status_code == 204
    sources = [
        f["source"] for f in alice.get("/v1/feeds/timeline/alice/following").json()["results"]
    ]
    assert sources == ["site:carol"]


def test_user_follows_only_sources_it_may_read(alice: httpx.Client, server: httpx.Client) -> None:
    """Following reads the source: a user token may follow its own feeds and those of
    public groups, nothing else (else a follow would read nick's notifications)."""
    for source in ("notification:nick", "timeline:nick", "user:nick"):
        r = alice.post("/v1/feeds/timeline/alice/follows", json={"source": source})
        detail = assert_problem(r, 403)["detail"]
        assert source in detail
        assert "alice" in detail
        # The batch is refused whole, however many of its pairs are fine.
        pairs = [
            {"follower": "timeline:alice", "source": "site:ok"},
            {"follower": "timeline:alice", "source": source},
        ]
        assert_problem(alice.post("/v1/follows:batch", json={"follows": pairs}), 403)
    following = server.get("/v1/feeds/timeline/alice/following").json()["results"]
    assert {f["source"] for f in following} <= {"site:carol", "site:erin"}
    assert server.get("/v1/feeds/site/ok/followers").json()["results"] == []

    # What is published into nick's feeds does not reach alice.
    secret = {**ACTIVITY, "object": "secret:1"}
    for feed in ("notification/nick", "timeline/nick", "user/nick"):
        assert server.post(f"/v1/feeds/{feed}/activities", json=secret).status_code == 201
    timeline = alice.get("/v1/feeds/timeline/alice").json()["results"]
    assert [a for a in timeline if a["object"] == "secret:1"] == []

    # Her own feeds and public groups she may follow; a server token, anything.
    assert alice.post(
        "/v1/feeds/timeline_aggregated/alice/follows", json={"source": "user:alice"}
    ).status_code in (200, 201)
    pairs = [{"follower": "timeline:alice", "source": "site:ok"}]
    assert alice.post("/v1/follows:batch", json={"follows": pairs}).status_code == 200
    r = server.post("/v1/feeds/timeline/alice/follows", json={"source": "user:nick"})
    assert r.status_code == 201
    assert server.delete("/v1/feeds/timeline/alice/follows/user:nick").status_code == 204


def test_user_addresses_in_to_only_addressable_feeds(
    alice: httpx.Client, server: httpx.Client
) -> None:
    """`to` writes into other feeds: from a user token only into the user's own feeds
    and feeds of addressable groups (defaults: notification groups, timeline,
    timeline_aggregated; not user, nor a configured flat group)."""
    as_alice = {**ACTIVITY, "actor": "alice", "object": "to:1"}
    for target in ("user:tom", "site:1"):
        r = alice.post(
            "/v1/feeds/user/alice/activities",
            json={**as_alice, "to": ["notification:tom", target]},
        )
        detail = assert_problem(r, 403)["detail"]
        assert target in detail
        assert "addressable" in detail
        batch = {"activities": [as_alice, {**as_alice, "to": [target]}]}
        assert_problem(alice.post("/v1/feeds/user/alice/activities:batch", json=batch), 403)
    # Nothing was written anywhere.
    for feed in ("user/alice", "user/tom", "site/1", "timeline/tom"):
        results = server.get(f"/v1/feeds/{feed}").json()["results"]
        assert [a for a in results if a["object"] == "to:1"] == [], feed
    assert server.get("/v1/feeds/notification/tom").json()["results"] == []

    to = ["timeline:tom", "timeline_aggregated:tom", "notification:tom", "timeline:alice"]
    r = alice.post("/v1/feeds/user/alice/activities", json={**as_alice, "to": to})
    assert r.status_code == 201, r.text
    r = alice.post(
        "/v1/feeds/user/alice/activities:batch", json={"activities": [{**as_alice, "to": to}]}
    )
    assert r.status_code == 200, r.text
    # A server token addresses any feed.
    r = server.post("/v1/feeds/user/carol/activities", json={**ACTIVITY, "to": ["user:tom"]})
    assert r.status_code == 201


def test_to_targets_per_batch_are_limited(alice: httpx.Client, server: httpx.Client) -> None:
    """100 activities of 100 `to` feeds each would be 10,000 writes: a batch
    counts its `to` feeds against MAX_BATCH_TO."""
    many = [f"notification:n{i}" for i in range(100)]
    item = {**ACTIVITY, "actor": "alice", "object": "many:1", "to": many}
    over = MAX_BATCH_TO // len(many) + 1
    for client in (alice, server):
        r = client.post("/v1/feeds/user/alice/activities:batch", json={"activities": [item] * over})
        detail = assert_problem(r, 422)["detail"]
        assert f"{over * len(many):,}" in detail
        assert f"{MAX_BATCH_TO:,}" in detail
    assert "many:1" not in [
        a["object"] for a in server.get("/v1/feeds/user/alice").json()["results"]
    ]
    assert server.get("/v1/feeds/notification/n0").json()["results"] == []
    r = alice.post(
        "/v1/feeds/user/alice/activities:batch",
        json={"activities": [item] * (MAX_BATCH_TO // len(many))},
    )
    assert r.status_code == 200, r.text


def test_owner_removes_what_to_put_in_their_feed(
    live: LiveApi, alice: httpx.Client, server: httpx.Client
) -> None:
    """owen removes alice's activity from his feeds, one entry at a time; it stays in
    her feed and his other feeds, and a rebuild does not bring it back."""
    owen = httpx.Client(base_url=live.url, headers=live.headers("owen"), timeout=10)
    with owen:
        r = alice.post(
            "/v1/feeds/user/alice/activities",
            json={
                **ACTIVITY,
                "actor": "alice",
                "object": "spam:1",
                "to": ["timeline:owen", "notification:owen"],
            },
        )
        assert r.status_code == 201, r.text
        spam = r.json()["id"]
        assert spam in ids(owen, "/v1/feeds/timeline/owen")
        # Only the feed's owner removes its entries.
        assert_problem(alice.delete(f"/v1/feeds/timeline/owen/activities/{spam}"), 403)
        assert owen.delete(f"/v1/feeds/timeline/owen/activities/{spam}").status_code == 204
        assert spam not in ids(owen, "/v1/feeds/timeline/owen")
        # Again: it is no longer there.
        assert_problem(owen.delete(f"/v1/feeds/timeline/owen/activities/{spam}"), 404)
        # Alice's feed and owen's notifications still hold it.
        assert spam in ids(alice, "/v1/feeds/user/alice")
        aggregates = owen.get("/v1/feeds/notification/owen").json()["results"]
        assert spam in [a["id"] for g in aggregates for a in g["activities"]]
        list(live.engine.admin.rebuild(["timeline:owen", "notification:owen"]))
        assert spam not in ids(owen, "/v1/feeds/timeline/owen")
        assert owen.delete(f"/v1/feeds/notification/owen/activities/{spam}").status_code == 204
        list(live.engine.admin.rebuild(["notification:owen"]))
        aggregates = owen.get("/v1/feeds/notification/owen").json()["results"]
        assert spam not in [a["id"] for g in aggregates for a in g["activities"]]
        assert server.get(f"/v1/activities/{spam}").status_code == 200
        assert spam in ids(alice, "/v1/feeds/user/alice")
        # Nor may owen remove it from alice's feed.
        assert_problem(owen.delete(f"/v1/feeds/user/alice/activities/{spam}"), 403)


def test_addressable_is_configured_per_group(tmp_path: Path) -> None:
    groups = {
        "inbox": {"addressable": True},
        "alerts": {"kind": "notification", "addressable": False},
        "wall": {},
        "timeline": {"max_length": 100},  # configured again: addressable is not carried over
    }
    url = f"sqlite:///{tmp_path / 'groups.db'}"
    with (
        live_api("sql", url, groups=groups) as api,
        httpx.Client(base_url=api.url, headers=api.headers("alice"), timeout=10) as alice,
    ):

        def publish(target: str) -> int:
            r = alice.post(
                "/v1/feeds/user/alice/activities",
                json={**ACTIVITY, "actor": "alice", "to": [target]},
            )
            return r.status_code

        assert publish("inbox:bob") == 201
        assert publish("notification:bob") == 201
        assert publish("alerts:bob") == 403
        assert publish("wall:bob") == 403
        assert publish("timeline:bob") == 403
        assert publish("wall:alice") == 201  # her own feed


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
        "/v1/feeds/timeline/alice/follows", json={"source": "site:erin"}
    ).status_code in (200, 201)
    erins = server.post(
        "/v1/feeds/site/erin/activities", json={**ACTIVITY, "actor": "erin", "object": "e:1"}
    ).json()
    own = alice.post(
        "/v1/feeds/user/alice/activities",
        json={**ACTIVITY, "actor": "alice", "object": "a:1", "to": ["timeline:alice"]},
    ).json()
    timeline = alice.get("/v1/feeds/timeline/alice").json()["results"]
    assert [a["id"] for a in timeline][:2] == [own["id"], erins["id"]]


def test_profiles_are_public_by_default(tmp_path: Path) -> None:
    """A user token reads any `user:` feed and follows it (as the web app's
    Follow button does); timelines and notifications stay their owners'."""
    with live_api("sql", f"sqlite:///{tmp_path / 'p.db'}") as api:
        server = api.headers()
        post = {**ACTIVITY, "actor": "bob", "foreign_id": "p1"}
        made = httpx.post(f"{api.url}/v1/feeds/user/bob/activities", json=post, headers=server)
        assert made.status_code == 201
        alice = api.headers("alice")
        page = httpx.get(f"{api.url}/v1/feeds/user/bob", headers=alice)
        assert page.status_code == 200
        assert [a["id"] for a in page.json()["results"]] == [made.json()["id"]]
        follow = {"source": "user:bob"}
        r = httpx.post(f"{api.url}/v1/feeds/timeline/alice/follows", json=follow, headers=alice)
        assert r.status_code == 201
        timeline = httpx.get(f"{api.url}/v1/feeds/timeline/alice", headers=alice).json()
        assert [a["id"] for a in timeline["results"]] == [made.json()["id"]]
        for private in ("timeline/bob", "notification/bob"):
            assert_problem(httpx.get(f"{api.url}/v1/feeds/{private}", headers=alice), 403)


def test_a_public_profile_is_closed_to_those_its_owner_blocks(tmp_path: Path) -> None:
    with live_api("sql", f"sqlite:///{tmp_path / 'b.db'}") as api:
        server = api.headers()
        post = {**ACTIVITY, "actor": "bob"}
        made = httpx.post(f"{api.url}/v1/feeds/user/bob/activities", json=post, headers=server)
        activity_id = made.json()["id"]
        api.engine.rules.block("bob", "alice")
        alice, carol = api.headers("alice"), api.headers("carol")
        for path in (
            "/v1/feeds/user/bob",
            "/v1/feeds/user/bob/events",
            "/v1/feeds/user/bob/followers",
            "/v1/feeds/user/bob/activities?foreign_id=x",
            f"/v1/activities/{activity_id}/reactions",
        ):
            detail = assert_problem(httpx.get(f"{api.url}{path}", headers=alice), 403)["detail"]
            assert "alice" in detail, path
        # Everyone else still reads it; bob's block is of alice alone.
        assert httpx.get(f"{api.url}/v1/feeds/user/bob", headers=carol).status_code == 200
        assert (
            httpx.get(f"{api.url}/v1/feeds/user/alice", headers=api.headers("bob")).status_code
            == 200
        )


def test_user_changes_only_objects_it_created(tmp_path: Path) -> None:
    """With user_object_types, any user could once write over (or delete) any
    object of those types: alice replaced bob's photo under his post."""
    url = f"sqlite:///{tmp_path / 'objects.db'}"
    with (
        live_api("sql", url, user_object_types=["photo"]) as api,
        httpx.Client(base_url=api.url, headers=api.headers(), timeout=10) as server,
        httpx.Client(base_url=api.url, headers=api.headers("alice"), timeout=10) as alice,
        httpx.Client(base_url=api.url, headers=api.headers("bob"), timeout=10) as bob,
        httpx.Client(base_url=api.url, headers=api.headers("carol"), timeout=10) as carol,
    ):
        mine = {"data": {"url": "https://bob.example/b1.jpg"}}
        evil = {"data": {"url": "https://evil.example/x.jpg"}}
        assert bob.put("/v1/objects/photo/b1", json=mine).status_code == 201
        post = {"actor": "bob", "verb": "post", "object": "photo:b1"}
        assert bob.post("/v1/feeds/user/bob/activities", json=post).status_code == 201

        detail = assert_problem(alice.put("/v1/objects/photo/b1", json=evil), 403)["detail"]
        assert "'bob'" in detail
        assert "created" in detail
        assert_problem(alice.delete("/v1/objects/photo/b1"), 403)
        read = carol.get("/v1/feeds/user/bob", params={"enrich": "true"}).json()
        assert read["results"][0]["object"]["data"] == mine["data"]  # nothing written

        assert server.put("/v1/objects/photo/s1", json=mine).status_code == 201
        assert_problem(alice.put("/v1/objects/photo/s1", json=evil), 403)
        assert_problem(alice.delete("/v1/objects/photo/s1"), 403)
        assert server.get("/v1/objects/photo/s1").json()["data"] == mine["data"]

        # Its creator changes and deletes it; the server changes anything.
        assert bob.put("/v1/objects/photo/b1", json=evil).status_code == 200
        assert server.put("/v1/objects/photo/b1", json=mine).status_code == 200
        assert bob.put("/v1/objects/photo/b1", json=mine).status_code == 200  # still bob's
        assert bob.delete("/v1/objects/photo/b1").status_code == 204
        # Its tombstone stays bob's: nobody else takes the ref over.
        assert_problem(alice.put("/v1/objects/photo/b1", json=evil), 403)
        assert bob.put("/v1/objects/photo/b1", json=mine).status_code == 201
        assert alice.put("/v1/objects/photo/a1", json=evil).status_code == 201
        assert server.delete("/v1/objects/photo/a1").status_code == 204
        assert_problem(alice.delete("/v1/objects/photo/gone"), 404)


@pytest.mark.parametrize(
    "authorization", list(BAD_AUTHORIZATION.values()), ids=list(BAD_AUTHORIZATION)
)
def test_a_websocket_with_no_usable_token_is_401(live: LiveApi, authorization: str | None) -> None:
    """As for every other route (the handshake once answered a bare 403)."""
    headers = {} if authorization is None else {"Authorization": authorization}
    url = live.url.replace("http://", "ws://") + "/v1/stream"
    with pytest.raises(InvalidStatus) as refused, ws_connect(url, additional_headers=headers):
        pass
    assert refused.value.response.status_code == 401
    assert refused.value.response.headers["www-authenticate"] == "Bearer"


def test_user_firehose_carries_only_feeds_it_may_read(live: LiveApi, server: httpx.Client) -> None:
    """By the read rule, over the feed each activity was published in: here
    `user` is private and `site` public."""
    token = mint(SECRET, "alice", scopes=["firehose"])
    with (
        httpx.Client(base_url=live.url, timeout=10) as client,
        client.stream("GET", "/v1/firehose", headers={"Authorization": f"Bearer {token}"}) as hose,
    ):
        lines = hose.iter_lines()
        assert next(lines) == ": connected"
        for feed, actor in (("user/bob", "bob"), ("timeline/bob", "bob"), ("user/alice", "alice")):
            r = server.post(f"/v1/feeds/{feed}/activities", json={**ACTIVITY, "actor": actor})
            assert r.status_code == 201, r.text
        r = server.post("/v1/feeds/site/9/activities", json=ACTIVITY)
        assert r.status_code == 201, r.text
        data = (json.loads(line[6:]) for line in lines if line.startswith("data: "))
        assert [next(data)["feed"], next(data)["feed"]] == ["user:alice", "site:9"]


def test_a_blocked_user_may_not_change_their_reactions_but_may_remove_them(
    tmp_path: Path,
) -> None:
    """Once alice blocks bob, bob may neither add to her activities nor change
    what he said there (also on one she addressed to him); he may still take
    it back. A server token changes anything."""
    with (
        live_api("sql", f"sqlite:///{tmp_path / 'r.db'}") as api,
        httpx.Client(base_url=api.url, headers=api.headers(), timeout=10) as server,
        httpx.Client(base_url=api.url, headers=api.headers("alice"), timeout=10) as alice,
        httpx.Client(base_url=api.url, headers=api.headers("bob"), timeout=10) as bob,
    ):
        posted = {**ACTIVITY, "actor": "alice"}
        public = alice.post("/v1/feeds/user/alice/activities", json=posted).json()["id"]
        to_bob = alice.post(
            "/v1/feeds/user/alice/activities", json={**posted, "to": ["notification:bob"]}
        ).json()["id"]
        comments = []
        for activity_id in (public, to_bob):
            r = bob.post(
                f"/v1/activities/{activity_id}/reactions",
                json={"kind": "comment", "user": "bob", "data": {"text": "hi"}},
            )
            assert r.status_code == 201, r.text
            comments.append(r.json()["id"])
        assert alice.post("/v1/users/alice/blocks", json={"target": "bob"}).status_code == 201

        for activity_id, comment in zip((public, to_bob), comments, strict=True):
            r = bob.patch(f"/v1/reactions/{comment}", json={"data": {"text": "edited"}})
            assert "bob" in assert_problem(r, 403)["detail"]
            r = bob.post(
                f"/v1/activities/{activity_id}/reactions", json={"kind": "like", "user": "bob"}
            )
            assert_problem(r, 403)
            assert server.get(f"/v1/reactions/{comment}").json()["data"] == {"text": "hi"}
        assert bob.delete(f"/v1/reactions/{comments[0]}").status_code == 204
        assert_problem(server.get(f"/v1/reactions/{comments[0]}"), 404)
        r = server.patch(f"/v1/reactions/{comments[1]}", json={"data": {"text": "by the app"}})
        assert r.status_code == 200, r.text
        # Nor may he bring back what he removed softly before the block:
        # restoring adds again.
        assert (
            bob.delete(f"/v1/reactions/{comments[1]}", params={"soft": "true"}).status_code == 204
        )
        assert (
            "bob" in assert_problem(bob.post(f"/v1/reactions/{comments[1]}/restore"), 403)["detail"]
        )
        assert_problem(server.get(f"/v1/reactions/{comments[1]}"), 404)
        restored = server.post(f"/v1/reactions/{comments[1]}/restore")
        assert restored.status_code == 200, restored.text
