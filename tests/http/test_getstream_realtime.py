"""Stream's realtime endpoint (Bayeux, as Faye speaks it): the channel names
and messages (pure), then the protocol over HTTP as the transports send it:
handshake, subscribe with the token in ``ext``, a connect answered with the
events, refusals, JSONP and CORS; and the same over a WebSocket.

getstream's own JS client drives it end to end in tests/getstream-js/. One
in-process server for the module; each test uses feeds of its own.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from websockets.sync.client import ClientConnection, connect

from http_server import LiveApi, live_api
from tidings.core.events import Event, EventType
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.faye import MAX_MESSAGES
from tidings.http.getstream.mapper import format_time, to_uuid
from tidings.http.getstream.realtime import ChannelError, channel_of, message, parse_channel
from tidings.http.getstream.shapes import group_id

KEY, SECRET = "app", "s3cret-" * 6
GROUPS = ["user", "timeline", "timeline_aggregated", "notification"]
FAYE = "/api/v1.0/faye"


# -- channels and messages -----------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "user", "feed"),
    [
        ("/site-1-feed-userana", "ana", "user:ana"),
        ("/site-1-feed-timeline_aggregatedana", "ana", "timeline_aggregated:ana"),
        ("/site-1-feed-timelineana", None, "timeline:ana"),
        ("/site-app_2-feed-userbo-b", None, "user:bo-b"),
    ],
)
def test_a_channel_names_one_feed(channel: str, user: str | None, feed: str) -> None:
    app_id, found = parse_channel(channel, GROUPS, user)
    assert found == feed
    assert channel_of(app_id, found) == channel


@pytest.mark.parametrize(
    "channel",
    [
        "/site-1-feed-timeline_aggregatedana",  # timeline + "_aggregatedana" fits too
        "/site-1-feed-inboxana",  # a group this key does not reach
        "/site-1-feed-user",  # no id
        "/site-1-userana",
        "/meta/connect",
        None,
    ],
)
def test_a_server_token_channel_must_name_exactly_one_feed(channel: object) -> None:
    with pytest.raises(ChannelError, match="channel"):
        parse_channel(channel, GROUPS, None)


def test_a_user_tokens_channel_must_be_of_its_own_feed() -> None:
    with pytest.raises(StreamError, match="its own feeds") as refused:
        parse_channel("/site-1-feed-userbo", GROUPS, "ana")
    assert refused.value.kind == Code.NOT_ALLOWED


def test_events_become_streams_realtime_messages() -> None:
    now = datetime(2024, 5, 1, 12, tzinfo=UTC)
    activity_id = "0" * 31 + "1"
    activity: dict[str, Any] = {
        "id": activity_id,
        "actor": "ana",
        "verb": "post",
        "object": "post:1",
        "time": "2024-05-01T11:59:00+00:00",
        "extra": {"mood": "calm"},
    }
    added = message(Event("timeline:bo", "1-0", EventType.ACTIVITY_ADDED, activity), "7", now)
    assert added is not None
    assert added["new"][0]["id"] == to_uuid(activity_id)
    assert added["new"][0]["mood"] == "calm"
    assert added["new"][0]["time"] == "2024-05-01T11:59:00.000000"
    assert {k: v for k, v in added.items() if k != "new"} == {
        "deleted": [],
        "deleted_foreign_ids": [],
        "feed": "timeline:bo",
        "app_id": "7",
        "published_at": "2024-05-01T12:00:00+00:00",
    }
    gone = Event("timeline:bo", "2-0", EventType.ACTIVITY_REMOVED, {"id": activity_id})
    removed = message(gone, "7", now)
    assert removed is not None
    assert (removed["new"], removed["deleted"]) == ([], [to_uuid(activity_id)])
    # One with a foreign_id names it, with its time, in deleted_foreign_ids.
    identity = {"id": activity_id, "foreign_id": "post:1", "time": "2024-05-01T11:59:00Z"}
    removed = message(Event("timeline:bo", "3-0", EventType.ACTIVITY_REMOVED, identity), "7", now)
    assert removed is not None
    assert removed["deleted_foreign_ids"] == [["post:1", "2024-05-01T11:59:00.000000"]]
    # Counts a delivery changed send nothing; a mark sends what it marked.
    counts = Event("notification:bo", "4-0", EventType.COUNTS_CHANGED, {"unseen": 1})
    assert message(counts, "7", now) is None
    marked = {"unseen": 0, "unread": 1, "marked": {"seen": True}}
    seen = message(Event("notification:bo", "5-0", EventType.COUNTS_CHANGED, marked), "7", now)
    assert seen is not None
    assert (seen["mark_seen"], seen["new"], seen["deleted"]) == ("all", [], [])
    assert "mark_read" not in seen
    some = {"unseen": 0, "unread": 0, "marked": {"seen": ["like:a,b"], "read": ["like:a,b"]}}
    read = message(Event("notification:bo", "6-0", EventType.COUNTS_CHANGED, some), "7", now)
    assert read is not None
    assert read["mark_seen"] == read["mark_read"] == ["like:a%2Cb"]  # (group ids, as reads show)


def test_an_aggregates_change_becomes_its_activities() -> None:
    """Stream sends an aggregated or notification feed's new activities, each
    with its group, not the groups; the members a change took out are deleted."""
    now = datetime(2024, 5, 1, 12, tzinfo=UTC)
    older, newer = "0" * 31 + "1", "0" * 31 + "2"
    members = [
        {"id": i, "actor": "ana", "verb": "like", "object": "p:1", "time": "2024-05-01T11:00:00Z"}
        for i in (newer, older)
    ]
    group = {"group": "like:p:1", "verb": "like", "activities": members, "added": [newer]}
    event = Event("notification:bo", "1-0", EventType.AGGREGATE_UPDATED, group)
    sent = message(event, "7", now, {newer: "user:ana"})
    assert sent is not None
    [new] = sent["new"]
    assert (new["id"], new["group"], new["origin"]) == (to_uuid(newer), "like:p:1", "user:ana")
    assert sent["deleted"] == []
    assert sent["feed"] == "notification:bo"

    emptied = {"group": "like:p:1", "removed": True, "withdrawn": [older, newer],
               "withdrawn_foreign_ids": [["like:9", "2024-05-01T11:00:00Z"]]}  # fmt: skip
    gone = message(Event("notification:bo", "2-0", EventType.AGGREGATE_UPDATED, emptied), "7", now)
    assert gone is not None
    assert (gone["new"], gone["deleted"]) == ([], [to_uuid(older), to_uuid(newer)])
    assert gone["deleted_foreign_ids"] == [["like:9", "2024-05-01T11:00:00.000000"]]
    # A change that adds no member shown and takes none out sends nothing.
    hidden = Event("notification:bo", "3-0", EventType.AGGREGATE_UPDATED, {**group, "added": []})
    assert message(hidden, "7", now) is None


# -- the protocol over HTTP ----------------------------------------------------


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    db = tmp_path_factory.mktemp("faye") / "x.db"
    keys = [{"key": KEY, "secret": SECRET, "groups": GROUPS}]
    with live_api("sql", f"sqlite:///{db}", stream_keys=keys) as made:
        yield made


@pytest.fixture(params=["sqlite", "postgres+redis"])
def either(request: pytest.FixtureRequest, api: LiveApi) -> Iterator[LiveApi]:
    """The module's server (SQLite, events in memory), or one on PostgreSQL +
    Redis (timelines and events through Redis streams) for this test alone."""
    if request.param == "sqlite":
        yield api
        return
    database_url = request.getfixturevalue("postgres_url")
    redis_url = request.getfixturevalue("redis_url")
    keys = [{"key": KEY, "secret": SECRET, "groups": GROUPS}]
    with live_api("redis", database_url, redis_url, stream_keys=keys) as made:
        yield made


def _send(api: LiveApi, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    answer = httpx.post(api.url + FAYE, json=list(messages), timeout=60)
    assert answer.status_code == 200, answer.text
    replies: list[dict[str, Any]] = answer.json()
    return replies


def _token(user: str) -> str:
    return jwt.encode({"user_id": user}, SECRET, algorithm="HS256")


def _handshake(api: LiveApi) -> str:
    offered = ["long-polling", "websocket"]
    [reply] = _send(api, {"channel": "/meta/handshake", "version": "1.0", "id": "1",
                          "supportedConnectionTypes": offered})  # fmt: skip
    assert reply["successful"] is True
    assert reply["supportedConnectionTypes"][:2] == ["websocket", "long-polling"]
    client_id: str = reply["clientId"]
    return client_id


def _subscribe(api: LiveApi, client: str, channel: str, **ext: str) -> dict[str, Any]:
    message = {"channel": "/meta/subscribe", "clientId": client, "subscription": channel,
               "id": "2", "ext": {"api_key": KEY, **ext}}  # fmt: skip
    [reply] = _send(api, message)
    return reply


def _connect(api: LiveApi, client: str) -> list[dict[str, Any]]:
    return _send(
        api, {"channel": "/meta/connect", "clientId": client, "connectionType": "long-polling"}
    )


def _disconnect(api: LiveApi, client: str) -> None:
    [reply] = _send(api, {"channel": "/meta/disconnect", "clientId": client})
    assert reply["successful"] is True


def test_a_subscribed_client_gets_the_feeds_events_on_connect(either: LiveApi) -> None:
    api = either
    client = _handshake(api)
    reply = _subscribe(api, client, "/site-9-feed-useral", signature=_token("al"))
    assert reply == {"channel": "/meta/subscribe", "successful": True, "id": "2",
                     "clientId": client, "subscription": "/site-9-feed-useral"}  # fmt: skip
    published = api.engine.add_activity("user:al", {"actor": "al", "verb": "post", "object": "p:1"})
    head, data = _connect(api, client)  # answered at once: an event waits
    assert head["successful"] is True
    assert head["advice"]["reconnect"] == "retry"
    assert data["channel"] == "/site-9-feed-useral"
    assert data["data"]["new"][0]["id"] == to_uuid(published.id)
    assert data["data"]["feed"] == "user:al"
    assert data["data"]["app_id"] == "9"

    # A connect that waits is answered when the next event comes.
    answered: list[list[dict[str, Any]]] = []
    waiting = threading.Thread(target=lambda: answered.append(_connect(api, client)))
    waiting.start()
    api.engine.remove_activity("user:al", published.id)
    waiting.join(timeout=60)
    [[_, removed, *_]] = answered  # (a second removal event may follow: told once)
    assert removed["data"]["deleted"] == [to_uuid(published.id)]

    _disconnect(api, client)
    [gone] = _connect(api, client)
    assert gone["successful"] is False
    assert gone["error"].startswith("401:")
    assert gone["advice"]["reconnect"] == "handshake"


def _data_until(
    api: LiveApi, client: str, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The data messages of connects until ``done`` says they are all there
    (each connect waits for the next events)."""
    got: list[dict[str, Any]] = []
    for _ in range(10):
        head, *data = _connect(api, client)
        assert head["successful"] is True
        got.extend(m["data"] for m in data)
        if done(got):
            return got
    raise AssertionError(f"still not there after 10 connects: {got}")


def test_a_notification_feed_sends_new_activities_with_their_group(either: LiveApi) -> None:
    """What a notification bell subscribes to: each activity that reaches the
    feed, with its group and the feed it came from, and its removal."""
    api = either
    client = _handshake(api)
    channel = "/site-9-feed-notificationnell"
    assert _subscribe(api, client, channel, signature=_token("nell"))["successful"] is True
    note = {"actor": "olli", "verb": "like", "object": "photo:1", "to": ["notification:nell"],
            "foreign_id": "like:1"}  # fmt: skip
    published = api.engine.add_activity("user:olli", note)

    [sent] = _data_until(api, client, bool)
    assert (sent["feed"], sent["app_id"], sent["deleted"]) == ("notification:nell", "9", [])
    [new] = sent["new"]
    assert new["id"] == to_uuid(published.id)
    assert new["origin"] == "user:olli"  # it came by its to
    assert new["group"] == api.engine.read_aggregates("notification:nell").results[0].key

    # Marking sends what it marked: every group, or those named (by their id).
    api.engine.mark_seen("notification:nell")
    [seen] = _data_until(api, client, bool)
    assert (seen["mark_seen"], seen["new"], seen["deleted"]) == ("all", [], [])
    api.engine.mark_read("notification:nell", [new["group"]])
    [read] = _data_until(api, client, bool)
    assert read["mark_read"] == read["mark_seen"] == [group_id(new["group"])]
    # A removal sends its id, and its foreign_id with its time.
    api.engine.remove_activity("user:olli", published.id)
    [removed] = _data_until(api, client, bool)
    assert (removed["new"], removed["deleted"]) == ([], [to_uuid(published.id)])
    assert removed["deleted_foreign_ids"] == [["like:1", format_time(published.time)]]
    # The removal, announced twice (its own write, then its outbox row's), is told once.
    again = api.engine.add_activity(
        "user:olli", {**note, "object": "photo:2", "foreign_id": "like:2"}
    )
    [after] = _data_until(api, client, bool)
    assert ([a["id"] for a in after["new"]], after["deleted"]) == ([to_uuid(again.id)], [])
    _disconnect(api, client)


@pytest.mark.parametrize(
    ("channel", "signature", "refusal"),
    [
        ("/site-9-feed-userbo", _token("cy"), "403:"),  # another user's feed
        ("/site-9-feed-usercy", jwt.encode({"user_id": "cy"}, "w" * 40), "SignatureException"),
        ("/site-9-feed-usercy", None, "Authorization"),  # no token
        ("/site-9-feed-timeline_rankedcy", _token("cy"), "403:"),  # not this key's group
        ("/chat/cy", _token("cy"), "405:"),
    ],
)
def test_a_subscription_is_refused_as_the_rest_protocol_would(
    api: LiveApi, channel: str, signature: str | None, refusal: str
) -> None:
    client = _handshake(api)
    reply = _subscribe(api, client, channel, **({"signature": signature} if signature else {}))
    assert reply["successful"] is False
    assert refusal in reply["error"]
    _disconnect(api, client)


def test_publishing_and_unknown_clients_are_refused(api: LiveApi) -> None:
    client = _handshake(api)
    [published] = _send(api, {"channel": "/site-9-feed-userdi", "data": {}, "clientId": client})
    assert published["successful"] is False
    assert published["error"].startswith("403:")
    [unknown] = _send(api, {"channel": "/meta/subscribe", "clientId": "nope", "subscription": "/x"})
    assert unknown["error"].startswith("401:")
    [refused] = _send(api, {"channel": "/meta/handshake", "supportedConnectionTypes": ["x"]})
    assert refused["error"].startswith("301:")
    _disconnect(api, client)


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b"[1]", json.dumps([{"channel": "/meta/x"}] * (MAX_MESSAGES + 1))],
)
def test_malformed_batches_are_refused(api: LiveApi, body: str | bytes) -> None:
    answer = httpx.post(api.url + FAYE, content=body)
    assert answer.status_code == 400
    assert answer.json()[0]["error"].startswith("400:")


def test_browser_transports_jsonp_and_cross_origin(api: LiveApi) -> None:
    """callback-polling (a GET answered as a script) and cross-origin-long-polling
    (a form POST answered with CORS headers)."""
    handshake = json.dumps([{"channel": "/meta/handshake", "supportedConnectionTypes":
                             ["callback-polling"]}])  # fmt: skip
    script = httpx.get(api.url + FAYE, params={"message": handshake, "jsonp": "__jsonp1__"})
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.text.startswith("/**/__jsonp1__([")
    assert script.text.endswith("]);")
    client = json.loads(script.text[len("/**/__jsonp1__(") : -2])[0]["clientId"]
    bad = httpx.get(api.url + FAYE, params={"message": handshake, "jsonp": "alert(1)//"})
    assert bad.status_code == 400

    origin = {"Origin": "https://app.example"}
    form = {"message": json.dumps([{"channel": "/meta/disconnect", "clientId": client}])}
    answer = httpx.post(api.url + FAYE, data=form, headers=origin)
    assert answer.json()[0]["successful"] is True
    assert answer.headers["access-control-allow-origin"] == "https://app.example"
    assert answer.headers["access-control-allow-credentials"] == "true"
    preflight = httpx.options(api.url + FAYE, headers=origin)
    assert preflight.status_code == 204


def test_the_endpoint_is_served_only_with_stream_keys(tmp_path: Path) -> None:
    with live_api("sql", f"sqlite:///{tmp_path / 'x.db'}") as plain:
        assert httpx.post(plain.url + FAYE, json=[]).status_code == 404


def test_a_feed_scoped_server_token_subscribes_to_what_its_claims_name(api: LiveApi) -> None:
    """As ``client.feed(...)`` with the secret signs it, or ``getReadOnlyToken``."""
    read_only = {"resource": "*", "action": "read", "feed_id": "timelineev"}
    token = jwt.encode(read_only, SECRET, algorithm="HS256")
    client = _handshake(api)
    assert _subscribe(api, client, "/site-9-feed-timelineev", signature=token)["successful"]
    other = _subscribe(api, client, "/site-9-feed-timelinefay", signature=token)
    assert other["successful"] is False
    assert "feed_id" in other["error"]
    _disconnect(api, client)


# -- the websocket transport ---------------------------------------------------


def _frames(socket: ClientConnection, until: Callable[[list[dict[str, Any]]], bool]) -> list[Any]:
    """The messages of the frames received until ``until`` holds for them all."""
    got: list[dict[str, Any]] = []
    while not until(got):
        got.extend(json.loads(socket.recv(timeout=30)))
    return got


def _replied(channel: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda got: any(m.get("channel") == channel and "successful" in m for m in got)


def test_the_websocket_transport_answers_a_subscribe_while_a_connect_waits(
    either: LiveApi,
) -> None:
    """As Faye's client uses it (its first choice): one frame per batch of
    messages; a connect waiting for events does not hold up what comes after."""
    api = either
    url = api.url.replace("http://", "ws://") + FAYE
    with connect(url) as socket:
        hello = {"channel": "/meta/handshake", "version": "1.0",
                 "supportedConnectionTypes": ["websocket"]}  # fmt: skip
        socket.send(json.dumps([hello]))
        [shaken] = _frames(socket, _replied("/meta/handshake"))
        client = shaken["clientId"]
        socket.send("[]")  # a ping: no answer
        # A connect first: it waits (no event yet), and the subscribe after it is answered.
        socket.send(json.dumps([{"channel": "/meta/connect", "clientId": client,
                                 "connectionType": "websocket"}]))  # fmt: skip
        channel = "/site-9-feed-userwes"
        socket.send(json.dumps([{"channel": "/meta/subscribe", "clientId": client,
                                 "subscription": channel,
                                 "ext": {"api_key": KEY, "signature": _token("wes")}}]))  # fmt: skip
        [subscribed] = _frames(socket, _replied("/meta/subscribe"))
        assert subscribed["successful"] is True, subscribed
        # An activity published now answers the waiting connect, with its data.
        note = {"actor": "wes", "verb": "post", "object": "p:1"}
        published = api.engine.add_activity("user:wes", note)
        got = _frames(socket, lambda got: any(m.get("channel") == channel for m in got))
        [data] = [m["data"] for m in got if m.get("channel") == channel]
        assert data["new"][0]["id"] == to_uuid(published.id)
        assert any(m.get("channel") == "/meta/connect" and m["successful"] for m in got)
        # Bad JSON is refused on the socket, which stays open.
        socket.send("{not json")
        [refused] = _frames(socket, _replied("/meta/unknown"))
        assert refused["error"].startswith("400:")
        socket.send(json.dumps([{"channel": "/meta/disconnect", "clientId": client}]))
        [gone] = _frames(socket, _replied("/meta/disconnect"))
        assert gone["successful"] is True
