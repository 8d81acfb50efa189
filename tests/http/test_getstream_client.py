"""getstream's own Python client (stream-python, sync) against ``tidings serve``
with the Stream v2 protocol on: every call of the first slice, as an
application on Stream makes it, and the refusals it must understand.

One server for the module and deployment (SQLite; PostgreSQL + Redis), a
process of its own; each test uses feeds of its own, so the order they run
in does not matter. What does not touch the store (who may do what, bad
input) runs on SQLite only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import stream
from stream import exceptions
from stream.client import StreamClient

from getstream_serve import DEPLOYMENTS, ON_SQLITE, stream_serve
from waiting import wait_until

KEY, SECRET = "tidings-app", "s3cret-" * 6
OTHER_KEY, OTHER_SECRET = "other-app", "0ther-" * 7
GROUPS = ["user", "timeline", "timeline_aggregated"]


@pytest.fixture(scope="module", params=DEPLOYMENTS)
def base_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    keys = [
        {"key": KEY, "secret": SECRET, "groups": GROUPS},
        {"key": OTHER_KEY, "secret": OTHER_SECRET, "groups": ["user"]},
    ]
    with stream_serve(request, tmp_path_factory.mktemp("getstream"), keys) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> StreamClient:
    made: StreamClient = stream.connect(KEY, SECRET, base_url=base_url)
    return made


def _raw(base_url: str, method: str, path: str, token: str, **kwargs: Any) -> dict[str, Any]:
    """A request as the clients send it, with a token the test chose."""
    headers = {"Authorization": token, "stream-auth-type": "jwt"}
    params = {"api_key": KEY, **kwargs.pop("params", {})}
    url = f"{base_url}/api/v1.0/{path}"
    body: dict[str, Any] = httpx.request(
        method, url, headers=headers, params=params, **kwargs
    ).json()
    return body


def _activity(n: int, **fields: Any) -> dict[str, Any]:
    return {"actor": "alice", "verb": "post", "object": f"post:{n}", **fields}


# -- adding and reading --------------------------------------------------------


def test_an_added_activity_comes_back_in_streams_shape(client: StreamClient) -> None:
    feed = client.feed("user", "shape")
    when = datetime(2024, 5, 1, 12, 30, 15, 123456)  # naive: Stream reads it as UTC
    added = feed.add_activity(_activity(1, time=when, foreign_id="post:1", mood="happy"))

    assert set(added) == {
        "id", "actor", "verb", "object", "target", "time", "foreign_id", "origin", "to",
        "mood", "duration",
    }  # fmt: skip
    assert uuid.UUID(added["id"])
    assert added["time"] == when.replace(tzinfo=UTC)  # (the client parses it, as UTC)
    assert added["mood"] == "happy"  # a custom field, at the top level
    assert added["duration"].endswith("ms")

    [read] = feed.get()["results"]
    assert read == {k: v for k, v in added.items() if k != "duration"}


def test_to_delivers_and_its_tokens_are_dropped(client: StreamClient) -> None:
    feed = client.feed("user", "sender")
    # The client appends each target's token after a space.
    added = feed.add_activity(_activity(2, to=["timeline:recipient"]))
    assert added["to"] == ["timeline:recipient"]

    inbox = client.feed("timeline", "recipient")
    wait_until(lambda: inbox.get()["results"], what="the activity in the inbox")
    [delivered] = inbox.get()["results"]
    assert delivered["id"] == added["id"]
    assert delivered["origin"] == "user:sender"  # the feed it was published in


def test_many_activities_are_added_at_once(client: StreamClient) -> None:
    feed = client.feed("user", "batch")
    added = feed.add_activities([_activity(i, foreign_id=f"post:{i}") for i in range(3)])
    assert [a["foreign_id"] for a in added["activities"]] == ["post:0", "post:1", "post:2"]
    assert len(feed.get()["results"]) == 3


def test_pages_by_limit_offset_and_ids(client: StreamClient) -> None:
    feed = client.feed("user", "pages")
    for i in range(7):
        feed.add_activity(_activity(i))
    newest_first = [a["id"] for a in feed.get(limit=25)["results"]]
    assert len(newest_first) == 7
    assert newest_first == sorted(newest_first, reverse=True)  # ids sort by time

    first = feed.get(limit=3)
    assert [a["id"] for a in first["results"]] == newest_first[:3]
    assert "id_lt=" in first["next"]
    # A first page is read on the event loop; with offset, in a thread: the same page.
    in_thread = feed.get(limit=3, offset=0)
    assert (in_thread["results"], in_thread["next"]) == (first["results"], first["next"])
    walked, last = [], None
    while True:
        page = feed.get(limit=3, **({"id_lt": last} if last else {}))["results"]
        if not page:
            break
        walked += [a["id"] for a in page]
        last = page[-1]["id"]
    assert walked == newest_first

    ids = newest_first
    assert [a["id"] for a in feed.get(limit=2, offset=2)["results"]] == ids[2:4]
    assert [a["id"] for a in feed.get(id_lte=ids[3])["results"]] == ids[3:]
    assert [a["id"] for a in feed.get(id_gt=ids[2])["results"]] == ids[:2]
    assert [a["id"] for a in feed.get(id_gte=ids[2])["results"]] == ids[:3]
    assert [a["id"] for a in feed.get(id_lt=ids[1], id_gt=ids[4])["results"]] == ids[2:4]
    assert feed.get(limit=7)["next"] == ""


def test_removing_by_id_and_by_foreign_id(client: StreamClient) -> None:
    feed = client.feed("user", "removals")
    kept = feed.add_activity(_activity(1))
    by_id = feed.add_activity(_activity(2))
    feed.add_activity(_activity(3, foreign_id="post:3"))

    assert feed.remove_activity(by_id["id"])["removed"] == by_id["id"]
    assert feed.remove_activity(foreign_id="post:3")["removed"] == "post:3"
    assert [a["id"] for a in feed.get()["results"]] == [kept["id"]]
    with pytest.raises(exceptions.DoesNotExistException):
        feed.remove_activity(by_id["id"])


# -- follows -------------------------------------------------------------------


def test_follow_copies_and_unfollow_takes_back(client: StreamClient) -> None:
    source = client.feed("user", "author")
    old = [source.add_activity(_activity(i))["id"] for i in range(3)]
    timeline = client.feed("timeline", "reader")

    timeline.follow("user", "author", activity_copy_limit=2)
    assert [a["id"] for a in timeline.get()["results"]] == old[::-1][:2]

    new = source.add_activity(_activity(9))["id"]
    wait_until(lambda: len(timeline.get()["results"]) == 3, what="delivery to the follower")
    assert timeline.get()["results"][0]["id"] == new
    # Read where it came by the follow, an activity names the feed it came from;
    # read where it was published, none.
    assert {a["origin"] for a in timeline.get()["results"]} == {"user:author"}
    assert {a["origin"] for a in source.get()["results"]} == {None}

    timeline.unfollow("user", "author")
    assert timeline.get()["results"] == []

    timeline.follow("user", "author")
    timeline.unfollow("user", "author", keep_history=True)
    assert len(timeline.get()["results"]) == 4


def test_followers_and_following_lists(client: StreamClient) -> None:
    for name in ("f1", "f2", "f3"):
        client.feed("timeline", name).follow("user", "star")
    client.feed("timeline", "f1").follow("user", "other-star")

    followers = client.feed("user", "star").followers()["results"]
    assert [f["feed_id"] for f in followers] == ["timeline:f1", "timeline:f2", "timeline:f3"]
    assert {f["target_id"] for f in followers} == {"user:star"}
    assert isinstance(followers[0]["created_at"], datetime)
    assert [f["feed_id"] for f in client.feed("user", "star").followers(offset=1, limit=1)["results"]] == ["timeline:f2"]  # fmt: skip

    following = client.feed("timeline", "f1").following()["results"]
    assert [f["target_id"] for f in following] == ["user:other-star", "user:star"]
    filtered = client.feed("timeline", "f1").following(feeds=["user:star"])["results"]
    assert [f["target_id"] for f in filtered] == ["user:star"]


# -- who may do what -----------------------------------------------------------


@ON_SQLITE
def test_an_unknown_api_key_is_refused(base_url: str) -> None:
    stranger = stream.connect("no-such-key", SECRET, base_url=base_url)
    with pytest.raises(exceptions.ApiKeyException):
        stranger.feed("user", "x").get()


@ON_SQLITE
def test_a_token_signed_with_another_secret_is_refused(base_url: str) -> None:
    forger = stream.connect(KEY, OTHER_SECRET, base_url=base_url)
    with pytest.raises(exceptions.SignatureException, match="signature"):
        forger.feed("user", "x").get()


@ON_SQLITE
def test_a_key_reaches_only_its_groups(base_url: str) -> None:
    other = stream.connect(OTHER_KEY, OTHER_SECRET, base_url=base_url)
    other.feed("user", "x").get()
    with pytest.raises(exceptions.FeedConfigException, match="timeline"):
        other.feed("timeline", "x").get()


@ON_SQLITE
def test_a_user_token_reaches_its_own_feeds_only(client: StreamClient, base_url: str) -> None:
    token = client.create_user_token("alice")
    posted = _raw(base_url, "POST", "feed/user/alice/", token, json=_activity(1))
    assert posted["actor"] == "alice"
    assert _raw(base_url, "GET", "feed/user/alice/", token)["results"][0]["id"] == posted["id"]

    refused = _raw(base_url, "GET", "feed/timeline/bob/", token)
    assert (refused["code"], refused["exception"]) == (17, "NotAllowedException")
    assert refused["status_code"] == 403
    assert "alice" in refused["detail"]


@ON_SQLITE
def test_a_server_token_is_held_to_its_claims(client: StreamClient, base_url: str) -> None:
    read_only = client.create_jwt_token("feed", "read", feed_id="userscoped")
    assert _raw(base_url, "GET", "feed/user/scoped/", read_only)["results"] == []
    for method, path in [("GET", "feed/user/elsewhere/"), ("POST", "feed/user/scoped/")]:
        refused = _raw(base_url, method, path, read_only, json=_activity(1))
        assert refused["code"] == 17, refused


# -- bad input -----------------------------------------------------------------


@ON_SQLITE
@pytest.mark.parametrize(
    ("call", "error", "detail"),
    [
        (lambda f: f.add_activity({"actor": "a", "object": "o"}), "InputException", "verb"),
        (lambda f: f.add_activity(_activity(1, time="yesterday")), "InputException", "time"),
        (lambda f: f.get(limit=1000), "InputException", "limit"),
        (lambda f: f.get(id_lt="17"), "InputException", "id_lt"),
        (lambda f: f.follow("user", "x", activity_copy_limit=5000), "InputException", "1,000"),
        (lambda f: f.add_activity(_activity(1, to=["nope:1"])), "FeedConfigException", "nope"),
    ],
)
def test_bad_input_gets_streams_errors(
    client: StreamClient, call: Any, error: str, detail: str
) -> None:
    with pytest.raises(getattr(exceptions, error), match=detail) as raised:
        call(client.feed("timeline", "errors"))
    assert raised.value.status_code == 400


@ON_SQLITE
def test_errors_have_streams_fields(client: StreamClient, base_url: str) -> None:
    token = client.create_jwt_token("feed", "*", feed_id="*")
    body = _raw(base_url, "GET", "feed/user/x/", token, params={"ranking": "top"})
    assert set(body) == {"exception", "code", "detail", "status_code", "duration"}
    assert body["code"] == 6  # (a flat feed is not ranked)
    missing = _raw(base_url, "GET", "no/such/path/", token)
    assert (missing["code"], missing["status_code"]) == (16, 404)
