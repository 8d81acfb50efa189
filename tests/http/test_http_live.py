"""Live events over HTTP: SSE for a feed and the firehose, one WebSocket for
many feeds; resume by Last-Event-ID, auth, bad input."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from http_server import SECRET, LiveApi, live_api
from tidings.http.auth import mint


@pytest.fixture(params=["sql", "redis"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveApi]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    with live_api(
        request.param, f"sqlite:///{tmp_path / 'live.db'}", redis_url, sse_heartbeat_seconds=0.3
    ) as made:
        yield made


class Sse:
    """An open SSE response, read frame by frame."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def frame(self) -> dict[str, Any]:
        """The next event (comments skipped): its fields, data parsed."""
        fields: dict[str, Any] = {}
        for line in self.lines:
            if line == "":
                if "event" in fields:
                    return fields
                fields = {}
                continue
            if line.startswith(":"):
                fields.setdefault("comments", []).append(line)
                continue
            name, _, value = line.partition(": ")
            fields[name] = json.loads(value) if name == "data" else value
        raise AssertionError("the stream ended")

    def comment(self) -> str:
        for line in self.lines:
            if line.startswith(":"):
                return line
        raise AssertionError("the stream ended")


def post(api: LiveApi, actor: str, obj: str, **more: Any) -> str:
    r = httpx.post(
        f"{api.url}/v1/feeds/user/{actor}/activities",
        json={"actor": actor, "verb": "post", "object": obj, **more},
        headers=api.headers(),
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def follow(api: LiveApi, follower: str, source: str) -> None:
    group, key = follower.split(":")
    r = httpx.post(
        f"{api.url}/v1/feeds/{group}/{key}/follows", json={"source": source}, headers=api.headers()
    )
    assert r.status_code in (200, 201), r.text


def test_sse_sends_feed_events_and_resumes_after_the_last_id(api: LiveApi) -> None:
    follow(api, "timeline:alice", "user:bob")
    url = f"{api.url}/v1/feeds/timeline/alice/events"
    with (
        httpx.Client(timeout=10, headers=api.headers("alice")) as client,
        client.stream("GET", url) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        sse = Sse(response)
        first = post(api, "bob", "note:0")
        event = sse.frame()
        assert event["event"] == "activity.added"
        assert event["data"]["id"] == first
        last = event["id"]
        assert sse.comment() == ": heartbeat"  # (every 0.3 s here)
        missed = [post(api, "bob", f"note:{n}") for n in range(1, 4)]
        with client.stream("GET", url, headers={"last-event-id": last}) as response:
            sse = Sse(response)
            got = [sse.frame() for _ in range(3)]
            assert [e["data"]["id"] for e in got] == missed
        with client.stream("GET", url, params={"last_event_id": got[0]["id"]}) as response:
            sse = Sse(response)
            assert [sse.frame()["data"]["id"] for _ in range(2)] == missed[1:]


def test_a_lost_id_gets_resync(api: LiveApi) -> None:
    url = f"{api.url}/v1/feeds/timeline/alice/events"
    with (
        httpx.Client(timeout=10, headers=api.headers("alice")) as client,
        client.stream("GET", url, headers={"last-event-id": "1000-0"}) as response,
    ):
        event = Sse(response).frame()
        assert event["event"] == "resync"
        assert "id" not in event


@pytest.mark.parametrize(
    ("who", "path", "status"),
    [
        (None, "/v1/feeds/timeline/alice/events", 401),
        ("bob", "/v1/feeds/timeline/alice/events", 403),
        ("bob", "/v1/feeds/notification/alice/events", 403),
        ("alice", "/v1/feeds/nosuch/alice/events", 422),
        ("alice", "/v1/feeds/timeline/alice/events?last_event_id=yesterday", 422),
        ("alice", "/v1/firehose", 403),
    ],
)
def test_sse_refuses_with_a_problem(api: LiveApi, who: str | None, path: str, status: int) -> None:
    headers = {} if who is None else api.headers(who)
    r = httpx.get(f"{api.url}{path}", headers=headers, timeout=10)
    assert r.status_code == status
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["status"] == status


@pytest.mark.parametrize(
    ("params", "field", "limit"),
    [
        ({"track": ",".join(f"w{n}" for n in range(401))}, "track", "400"),
        ({"follow": ",".join(f"u{n}" for n in range(5001))}, "follow", "5000"),
        ({"locations": ",".join(["0,0,1,1"] * 26)}, "locations", "25"),
        ({"sample": "0"}, "sample", "0.01"),
    ],
)
def test_firehose_filters_beyond_the_limits_are_refused(
    api: LiveApi, params: dict[str, str], field: str, limit: str
) -> None:
    response = httpx.get(f"{api.url}/v1/firehose", params=params, headers=api.headers(), timeout=10)
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field
    assert limit in body["detail"]


def test_the_firehose_streams_matches_to_a_firehose_token(api: LiveApi) -> None:
    token = mint(SECRET, "analytics", scopes=["firehose"])
    with (
        httpx.Client(timeout=10, headers={"authorization": f"Bearer {token}"}) as client,
        client.stream("GET", f"{api.url}/v1/firehose", params={"track": "sunset"}) as response,
    ):
        assert response.status_code == 200
        sse = Sse(response)
        post(api, "bob", "photo:1", extra={"caption": "a cat"})
        kept = post(api, "bob", "photo:2", extra={"caption": "SUNSET"})
        event = sse.frame()
        assert event["event"] == "activity.added"
        assert event["data"]["id"] == kept
        r = httpx.delete(f"{api.url}/v1/feeds/user/bob/activities/{kept}", headers=api.headers())
        assert r.status_code in (200, 204), r.text
        assert sse.frame()["event"] == "delete"


def test_a_user_tokens_firehose_applies_its_rules(api: LiveApi) -> None:
    token = mint(SECRET, "analyst", scopes=["firehose"])
    headers = {"authorization": f"Bearer {token}"}
    r = httpx.post(f"{api.url}/v1/users/analyst/mutes", json={"target": "bob"}, headers=headers)
    assert r.status_code == 201, r.text
    body = {"keywords": ["spoiler"], "contexts": ["firehose"]}
    r = httpx.post(f"{api.url}/v1/users/analyst/filters", json=body, headers=headers)
    assert r.status_code == 201, r.text
    with (
        httpx.Client(timeout=10, headers=headers) as client,
        client.stream("GET", f"{api.url}/v1/firehose") as response,
    ):
        sse = Sse(response)
        post(api, "bob", "photo:1")
        post(api, "carol", "photo:2", extra={"caption": "a spoiler"})
        kept = post(api, "carol", "photo:3")
        event = sse.frame()
        assert event["data"]["id"] == kept


def ws_url(api: LiveApi) -> str:
    return api.url.replace("http://", "ws://") + "/v1/stream"


def test_one_websocket_carries_many_feeds(api: LiveApi) -> None:
    follow(api, "timeline:alice", "user:bob")
    headers = {"authorization": f"Bearer {api.token('alice')}"}
    with ws_connect(ws_url(api), additional_headers=headers) as ws:
        for feed in ("timeline:alice", "notification:alice"):
            ws.send(json.dumps({"type": "subscribe", "feed": feed}))
            assert json.loads(ws.recv(5)) == {"type": "subscribed", "feed": feed}
        ws.send(json.dumps({"type": "subscribe", "feed": "timeline:bob"}))
        assert "may not read" in json.loads(ws.recv(5))["error"]
        ws.send("{nope")
        assert json.loads(ws.recv(5)) == {"type": "error", "error": "not JSON"}
        ws.send(json.dumps({"type": "subscribed", "feed": "timeline:alice"}))
        refused = "type must be subscribe or unsubscribe, not 'subscribed'"
        assert json.loads(ws.recv(5)) == {"type": "error", "error": refused}
        activity = post(api, "bob", "photo:1", to=["notification:alice"])
        got = [json.loads(ws.recv(5)) for _ in range(3)]
        by_feed = {(m["feed"], m["type"]) for m in got}
        assert by_feed == {
            ("timeline:alice", "activity.added"),
            ("notification:alice", "group.updated"),
            ("notification:alice", "counts.changed"),
        }
        added = next(m for m in got if m["feed"] == "timeline:alice")
        assert added["data"]["id"] == activity
        ws.send(json.dumps({"type": "unsubscribe", "feed": "notification:alice"}))
        assert json.loads(ws.recv(5))["type"] == "unsubscribed"
        post(api, "bob", "photo:2", to=["notification:alice"])
        message = json.loads(ws.recv(5))
        assert message["feed"] == "timeline:alice"


def test_websocket_events_can_be_enriched(api: LiveApi) -> None:
    httpx.post(
        f"{api.url}/v1/users",
        json={"id": "bob", "handle": "Bob", "profile": {"avatar": "b.png"}},
        headers=api.headers(),
    )
    follow(api, "timeline:alice", "user:bob")
    headers = {"authorization": f"Bearer {api.token('alice')}"}
    with ws_connect(ws_url(api), additional_headers=headers) as ws:
        ws.send(json.dumps({"type": "subscribe", "feed": "timeline:alice", "enrich": "yes"}))
        assert "enrich" in json.loads(ws.recv(5))["error"]
        ws.send(json.dumps({"type": "subscribe", "feed": "timeline:alice", "enrich": True}))
        assert json.loads(ws.recv(5))["type"] == "subscribed"
        post(api, "bob", "photo:1")
        message = json.loads(ws.recv(5))
        assert message["data"]["actor"]["handle"] == "Bob"


def test_a_browser_sends_its_token_as_the_subprotocol(api: LiveApi) -> None:
    with ws_connect(ws_url(api), subprotocols=[api.token("alice")]) as ws:  # type: ignore[list-item]
        ws.send(json.dumps({"type": "subscribe", "feed": "timeline:alice"}))
        assert json.loads(ws.recv(5))["type"] == "subscribed"


@pytest.mark.parametrize("token", [None, "expired", "garbage"])
def test_a_websocket_without_a_usable_token_is_refused_401(api: LiveApi, token: str | None) -> None:
    """As SSE answers: a 401 problem at the handshake (it was a bare 403)."""
    headers = {}
    if token == "expired":
        expired = jwt.encode({"sub": "alice", "exp": int(time.time()) - 60}, SECRET)
        headers = {"authorization": f"Bearer {expired}"}
    elif token == "garbage":
        headers = {"authorization": "Bearer not.a.jwt"}
    with (
        pytest.raises(InvalidStatus) as refused,
        ws_connect(ws_url(api), additional_headers=headers),
    ):
        pass
    response = refused.value.response
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    body = json.loads(response.body or b"")
    assert body["status"] == 401
    assert ("missing" if token is None else "expired" if token == "expired" else "invalid") in (
        body["detail"]
    )


def test_the_firehose_over_the_websocket_needs_the_scope(api: LiveApi) -> None:
    user = {"authorization": f"Bearer {api.token('alice')}"}
    with ws_connect(ws_url(api), additional_headers=user) as ws:
        ws.send(json.dumps({"type": "subscribe", "firehose": {"track": "cat"}}))
        assert "firehose" in json.loads(ws.recv(5))["error"]
    with ws_connect(ws_url(api), additional_headers=api.headers()) as ws:
        ws.send(json.dumps({"type": "subscribe", "firehose": {"follow": ["bob"]}}))
        assert json.loads(ws.recv(5))["type"] == "subscribed"
        kept = post(api, "bob", "note:1")
        message = json.loads(ws.recv(5))
        assert (message["feed"], message["data"]["id"]) == ("$firehose", kept)


def test_a_firehose_filter_that_is_not_text_is_an_error_on_an_open_socket(api: LiveApi) -> None:
    """Numbers where text goes once raised in the handler and dropped the socket."""
    with ws_connect(ws_url(api), additional_headers=api.headers()) as ws:
        for filters in ({"track": 5}, {"follow": 7}, {"locations": 1.5}, {"sample": True}):
            ws.send(json.dumps({"type": "subscribe", "firehose": filters}))
            (field,) = filters
            assert json.loads(ws.recv(5)) == {
                "type": "error",
                "error": f"{field}: must be a "
                + ("number" if field == "sample" else "string of comma-separated values")
                + f", not {filters[field]}",
            }
        ws.send(json.dumps({"type": "subscribe", "firehose": {"track": ["cat"], "sample": 5}}))
        assert json.loads(ws.recv(5))["type"] == "subscribed"
        kept = post(api, "bob", "note:1", extra={"caption": "a cat"})
        assert json.loads(ws.recv(5))["data"]["id"] == kept


def test_many_subscribers_each_get_the_event(api: LiveApi) -> None:
    follow(api, "timeline:alice", "user:bob")
    url = f"{api.url}/v1/feeds/timeline/alice/events"
    got: list[str] = []
    ready = threading.Barrier(9)

    def listen() -> None:
        with (
            httpx.Client(timeout=10, headers=api.headers("alice")) as client,
            client.stream("GET", url) as response,
        ):
            sse = Sse(response)
            sse.comment()  # connected
            ready.wait()
            got.append(sse.frame()["data"]["id"])

    threads = [threading.Thread(target=listen) for _ in range(8)]
    for t in threads:
        t.start()
    ready.wait()
    activity = post(api, "bob", "note:1")
    for t in threads:
        t.join(10)
    assert got == [activity] * 8


# -- two API processes, one Redis -------------------------------------------------------------


def serve_process(tmp_path: Path, db: str, redis_url: str, name: str) -> tuple[Any, str]:
    import os
    import subprocess
    import sys

    from http_server import free_port

    port = free_port()
    env = {**os.environ, "TIDINGS_SECRET": SECRET, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "tidings.cli", "--database-url", db, "--redis-url", redis_url]
    with (tmp_path / f"{name}.log").open("wb") as log:
        proc = subprocess.Popen(
            [*argv, "serve", "--port", str(port)], stdout=log, stderr=log, env=env
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, (tmp_path / f"{name}.log").read_text()
        time.sleep(0.1)


def test_resume_on_another_process_after_sigkill(tmp_path: Path, redis_url: str) -> None:
    db = f"sqlite:///{tmp_path / 'two.db'}"
    one, one_url = serve_process(tmp_path, db, redis_url, "one")
    two, two_url = serve_process(tmp_path, db, redis_url, "two")
    server = {"authorization": f"Bearer {mint(SECRET, '*', server=True)}"}
    alice = {"authorization": f"Bearer {mint(SECRET, 'alice')}"}
    try:
        r = httpx.post(
            f"{two_url}/v1/feeds/timeline/alice/follows",
            json={"source": "user:bob"},
            headers=server,
        )
        assert r.status_code == 201, r.text

        def publish(url: str, n: int) -> str:
            body = {"actor": "bob", "verb": "post", "object": f"note:{n}"}
            r = httpx.post(f"{url}/v1/feeds/user/bob/activities", json=body, headers=server)
            assert r.status_code == 201, r.text
            return str(r.json()["id"])

        with (
            httpx.Client(timeout=10, headers=alice) as client,
            client.stream("GET", f"{one_url}/v1/feeds/timeline/alice/events") as response,
        ):
            sse = Sse(response)
            sse.comment()
            first = publish(two_url, 0)  # delivered by process two, seen through Redis
            event = sse.frame()
            assert event["data"]["id"] == first
            one.kill()  # SIGKILL, mid-stream
            one.wait()
        missed = [publish(two_url, n) for n in range(1, 6)]
        with (
            httpx.Client(timeout=10, headers=alice) as client,
            client.stream(
                "GET",
                f"{two_url}/v1/feeds/timeline/alice/events",
                headers={"last-event-id": event["id"]},
            ) as response,
        ):
            sse = Sse(response)
            got: list[str] = []
            while len(got) < len(missed):
                frame = sse.frame()
                got.append(frame["data"]["id"])
            assert got == missed
    finally:
        for proc in (one, two):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(20)


def test_a_stream_ends_when_its_token_expires(api: LiveApi) -> None:
    token = mint(SECRET, "alice", ttl_seconds=2)
    url = f"{api.url}/v1/feeds/timeline/alice/events"
    with (
        httpx.Client(timeout=10, headers={"authorization": f"Bearer {token}"}) as client,
        client.stream("GET", url) as response,
    ):
        event = Sse(response).frame()
        assert event["event"] == "error"
        assert event["data"] == {"error": "token expired"}
    token = mint(SECRET, "alice", ttl_seconds=2)
    with ws_connect(ws_url(api), additional_headers={"authorization": f"Bearer {token}"}) as ws:
        message = json.loads(ws.recv(10))
        assert message["data"] == {"error": "token expired"}


def test_sse_events_can_be_enriched(api: LiveApi) -> None:
    httpx.post(
        f"{api.url}/v1/users",
        json={"id": "bob", "handle": "Bob", "profile": {"avatar": "b.png", "bio": "x"}},
        headers=api.headers(),
    )
    follow(api, "timeline:alice", "user:bob")
    url = f"{api.url}/v1/feeds/timeline/alice/events"
    with (
        httpx.Client(timeout=10, headers=api.headers("alice")) as client,
        client.stream("GET", url, params={"enrich": "true", "fields": "avatar"}) as response,
    ):
        sse = Sse(response)
        post(api, "bob", "note:1")
        event = sse.frame()
        assert event["data"]["actor"] == {
            "id": "bob",
            "handle": "Bob",
            "profile": {"avatar": "b.png"},
        }


def test_a_block_closes_open_streams_of_the_blockers_feeds_and_firehose(api: LiveApi) -> None:
    """alice watches bob's public profile feed and the firehose; once bob blocks
    her, neither shows his activities any more (a new stream is refused)."""
    alice = api.token("alice")
    firehose_token = mint(SECRET, "alice", scopes=["firehose"])
    profile = f"{api.url}/v1/feeds/user/bob/events"
    with (
        httpx.Client(timeout=10) as client,
        client.stream("GET", profile, headers={"Authorization": f"Bearer {alice}"}) as feed,
        client.stream(
            "GET",
            f"{api.url}/v1/firehose",
            headers={"Authorization": f"Bearer {firehose_token}"},
        ) as hose,
    ):
        on_feed, on_hose = Sse(feed), Sse(hose)
        before = post(api, "bob", "note:before")
        assert on_feed.frame()["data"]["id"] == before
        assert on_hose.frame()["data"]["id"] == before
        api.engine.rules.block("bob", "alice")
        post(api, "bob", "note:after")
        marker = post(api, "carol", "note:carol")  # the firehose goes on for others' activities
        assert on_hose.frame()["data"]["id"] == marker
        # Nothing of bob's came on his feed's stream: its next line is a heartbeat.
        assert next(line for line in on_feed.lines if line) == ": heartbeat"
        refused = client.get(profile, headers={"Authorization": f"Bearer {alice}"})
        assert refused.status_code == 403


def test_a_user_tokens_firehose_carries_only_feeds_it_may_read(api: LiveApi) -> None:
    """alice's firehose token (the web app mints one for every user) sees, over
    SSE and the WebSocket, only activities published in feeds she may read:
    not bob's notifications or timeline, nor what `to` or a reaction put into
    others' feeds; a public group's feeds still come, and a server token's
    firehose carries everything."""
    alice = {"authorization": f"Bearer {mint(SECRET, 'alice', scopes=['firehose'])}"}
    seen = post(api, "dave", "note:seen")  # reacted to below

    def publish(feed: str, actor: str, **more: Any) -> str:
        group, key = feed.split(":")
        r = httpx.post(
            f"{api.url}/v1/feeds/{group}/{key}/activities",
            json={"actor": actor, "verb": "post", "object": "note:x", **more},
            headers=api.headers(None if actor != key else actor),
        )
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    with (
        httpx.Client(timeout=10) as client,
        client.stream("GET", f"{api.url}/v1/firehose", headers=alice) as mine,
        client.stream("GET", f"{api.url}/v1/firehose", headers=api.headers()) as everything,
        ws_connect(ws_url(api), additional_headers=alice) as ws,
    ):
        ws.send(json.dumps({"type": "subscribe", "firehose": {}}))
        assert json.loads(ws.recv(5))["type"] == "subscribed"
        on_sse, on_server = Sse(mine), Sse(everything)
        private = [
            publish("notification:bob", "carol"),  # by the server
            publish("timeline:bob", "bob"),
            publish("timeline:bob", "bob", to=["notification:carol", "timeline:alice"]),
        ]
        r = httpx.post(
            f"{api.url}/v1/activities/{seen}/reactions",
            json={"kind": "like", "user": "carol", "to": ["notification:dave"]},
            headers=api.headers(),
        )
        assert r.status_code == 201, r.text
        r = httpx.delete(
            f"{api.url}/v1/feeds/timeline/bob/activities/{private[1]}", headers=api.headers()
        )
        assert r.status_code in (200, 204), r.text
        public = publish("user:bob", "bob")
        assert on_sse.frame()["data"]["id"] == public
        message = json.loads(ws.recv(5))
        assert (message["type"], message["data"]["id"]) == ("activity.added", public)
        got = [on_server.frame() for _ in range(6)]
        assert [(e["event"], e["data"]["feed"]) for e in got] == [
            ("activity.added", "notification:bob"),
            ("activity.added", "timeline:bob"),
            ("activity.added", "timeline:bob"),
            ("activity.added", "notification:dave"),
            ("delete", "timeline:bob"),
            ("activity.added", "user:bob"),
        ]


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[LiveApi]:
    """The service with small live limits: 3 feeds and 1 firehose a WebSocket,
    3 live connections a user."""
    database = f"sqlite:///{tmp_path / 'capped.db'}"
    with live_api("sql", database, websocket_max_feeds=3, live_connections_per_user=3) as made:
        yield made


def send(ws: ClientConnection, **message: Any) -> dict[str, Any]:
    """Send ``message`` over ``ws``; the reply."""
    ws.send(json.dumps(message))
    reply: dict[str, Any] = json.loads(ws.recv(5))
    return reply


def test_a_websocket_subscribes_to_at_most_its_limit_of_feeds(capped: LiveApi) -> None:
    with ws_connect(ws_url(capped), additional_headers=capped.headers("alice")) as ws:
        for feed in ("timeline:alice", "notification:alice", "user:alice"):
            assert send(ws, type="subscribe", feed=feed)["type"] == "subscribed"
        refused = send(ws, type="subscribe", feed="user:bob")
        assert refused["type"] == "error"
        assert "at most 3 feeds (websocket_max_feeds)" in refused["error"]
        # A feed subscribed already is not one more (its enrichment may change).
        again = send(ws, type="subscribe", feed="timeline:alice", enrich=True)
        assert again["type"] == "subscribed"
        # A subscribe that fails is not counted.
        assert send(ws, type="unsubscribe", feed="user:alice")["type"] == "unsubscribed"
        bad = send(ws, type="subscribe", feed="user:bob", last_event_id="yesterday")
        assert bad["type"] == "error"
        assert send(ws, type="subscribe", feed="user:bob") == {
            "type": "subscribed",
            "feed": "user:bob",
        }
    with ws_connect(ws_url(capped), additional_headers=capped.headers()) as ws:
        assert send(ws, type="subscribe", firehose={})["type"] == "subscribed"
        refused = send(ws, type="subscribe", firehose={"track": "cat"})
        assert "at most 1 firehose(s) open (websocket_max_firehoses)" in refused["error"]


def test_a_user_holds_at_most_its_limit_of_live_connections(capped: LiveApi) -> None:
    events = f"{capped.url}/v1/feeds/timeline/alice/events"
    with httpx.Client(timeout=10, headers=capped.headers("alice")) as client, ExitStack() as held:
        first = held.enter_context(client.stream("GET", events))
        held.enter_context(client.stream("GET", events))
        alice = capped.headers("alice")
        socket = held.enter_context(ws_connect(ws_url(capped), additional_headers=alice))
        with client.stream("GET", events) as refused:
            assert refused.status_code == 429
            refused.read()
        assert refused.headers["content-type"] == "application/problem+json"
        assert "'alice' has 3 live connections" in refused.json()["detail"]
        assert "(live_connections_per_user)" in refused.json()["detail"]
        with pytest.raises(InvalidStatus) as handshake:
            ws_connect(ws_url(capped), additional_headers=alice)
        assert handshake.value.response.status_code == 429
        # Others' are their own; server tokens are not counted.
        assert send(socket, type="subscribe", feed="timeline:alice")["type"] == "subscribed"
        other = capped.headers("bob")
        with httpx.stream("GET", f"{capped.url}/v1/feeds/timeline/bob/events", headers=other) as r:
            assert r.status_code == 200
        for _ in range(4):
            held.enter_context(ws_connect(ws_url(capped), additional_headers=capped.headers()))
        # One closed, one more may open (once the server has seen it close).
        first.close()
        deadline = time.monotonic() + 10
        while (status := _opens(client, events)) == 429:
            assert time.monotonic() < deadline, "a closed connection still counts"
            time.sleep(0.05)
        assert status == 200


def _opens(client: httpx.Client, url: str) -> int:
    """The status of a stream of ``url``, closed once it answers."""
    with client.stream("GET", url) as response:
        return response.status_code
