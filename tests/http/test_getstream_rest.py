"""getstream's own Python client (stream-python, sync and async) against ``tidings serve``:
``activity_to_targets``, the collections calls over many entries (``upsert``,
``select``, ``delete_many``), and Stream's hosted services that tidings does
not offer, answered in Stream's format.

One server for the module (SQLite, a process of its own, about a second to
start); each test uses feeds and entries of its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import stream
from stream import exceptions
from stream.client import StreamClient

from http_server import tidings_serve

KEY, SECRET = "rest-app", "s3cret-" * 6
GROUPS = ["user", "timeline"]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"TIDINGS_STREAM_KEYS": json.dumps([{"key": KEY, "secret": SECRET, "groups": GROUPS}])}
    with tidings_serve(tmp_path_factory.mktemp("rest"), secret="x" * 40, env=env) as served:
        # The client calls api.<host> for any host but localhost.
        yield served.url.replace("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def client(base_url: str) -> StreamClient:
    made: StreamClient = stream.connect(KEY, SECRET, base_url=base_url)
    return made


def ids(client: StreamClient, feed: str) -> list[str]:
    slug, user_id = feed.split(":")
    return [a["id"] for a in client.feed(slug, user_id).get()["results"]]


# -- activity_to_targets -------------------------------------------------------------


def test_new_targets_replace_the_to_and_move_the_activity(client: StreamClient) -> None:
    feed = client.feed("user", "mover")
    activity = {"actor": "mover", "verb": "post", "object": "post:1", "foreign_id": "mv:1"}
    added = feed.add_activity({**activity, "to": ["timeline:mv_a"]})
    assert ids(client, "timeline:mv_a") == [added["id"]]

    moved = feed.update_activity_to_targets("mv:1", added["time"], new_targets=["timeline:mv_b"])

    assert moved["activity"]["to"] == ["timeline:mv_b"]
    assert moved["activity"]["id"] == added["id"]
    assert ids(client, "timeline:mv_a") == []
    assert ids(client, "timeline:mv_b") == [added["id"]]
    assert ids(client, "user:mover") == [added["id"]]


def test_added_and_removed_targets(client: StreamClient) -> None:
    feed = client.feed("user", "editor")
    activity = {"actor": "editor", "verb": "post", "object": "post:2", "foreign_id": "ed:2"}
    added = feed.add_activity({**activity, "to": ["timeline:ed_a", "timeline:ed_b"]})

    changed = feed.update_activity_to_targets(
        "ed:2", added["time"], added_targets=["timeline:ed_c"], removed_targets=["timeline:ed_a"]
    )

    assert changed["activity"]["to"] == ["timeline:ed_b", "timeline:ed_c"]
    assert [ids(client, f"timeline:ed_{x}") for x in "abc"] == [[], [added["id"]], [added["id"]]]
    # Removing the activity takes it from its targets as they are now.
    feed.remove_activity(foreign_id="ed:2")
    assert ids(client, "timeline:ed_c") == []


def test_targets_refusals(client: StreamClient) -> None:
    feed = client.feed("user", "refused")
    activity = {"actor": "refused", "verb": "post", "object": "post:3", "foreign_id": "rf:3"}
    added = feed.add_activity(activity)
    with pytest.raises(exceptions.DoesNotExistException, match="no activity of user:refused"):
        feed.update_activity_to_targets("rf:404", added["time"], new_targets=["timeline:x"])
    with pytest.raises(exceptions.DoesNotExistException):
        feed.update_activity_to_targets("rf:3", "2001-01-01T00:00:00", new_targets=["timeline:x"])
    with pytest.raises(exceptions.FeedConfigException, match="notification"):
        feed.update_activity_to_targets("rf:3", added["time"], added_targets=["notification:x"])
    with pytest.raises(exceptions.InputException, match="not both"):
        feed.update_activity_to_targets(
            "rf:3", added["time"], new_targets=["timeline:x"], added_targets=["timeline:y"]
        )
    with pytest.raises(exceptions.InputException, match="both added and removed"):
        feed.update_activity_to_targets(
            "rf:3", added["time"], added_targets=["timeline:y"], removed_targets=["timeline:y"]
        )
    assert ids(client, "timeline:y") == []


# -- collections over many entries ---------------------------------------------------


def test_upsert_select_and_delete_many(client: StreamClient) -> None:
    upserted = client.collections.upsert(
        "books", [{"id": "b1", "title": "Dune"}, {"id": "b2", "title": "Emma"}]
    )
    assert [e["data"] for e in upserted["data"]["books"]] == [
        {"title": "Dune"},
        {"title": "Emma"},
    ]
    client.collections.upsert("books", {"id": "b1", "title": "Dune Messiah"})

    selected = client.collections.select("books", ["b1", "b2", "b404"])["response"]["data"]
    assert [(e["id"], e["foreign_id"], e["data"]) for e in selected] == [
        ("b1", "books:b1", {"title": "Dune Messiah"}),
        ("b2", "books:b2", {"title": "Emma"}),
    ]
    # The single-entry call reads what upsert stored.
    assert client.collections.get("books", "b2")["data"] == {"title": "Emma"}

    client.collections.delete_many("books", ["b1", "b404"])
    left = client.collections.select("books", ["b1", "b2"])["response"]["data"]
    assert [e["id"] for e in left] == ["b2"]


def test_collections_batches_refuse_bad_input_and_user_tokens(
    client: StreamClient, base_url: str
) -> None:
    with pytest.raises(exceptions.InputException, match=r"data\.Books\.0"):
        client.collections.upsert("Books", [{"id": "x", "title": "bad name"}])
    with pytest.raises(exceptions.InputException, match=r"data\.books\.1.*with an id"):
        client.collections.upsert("books", [{"id": "ok", "n": 1}, {"n": 2}])
    # Nothing of a refused call is written.
    assert client.collections.select("books", ["ok"])["response"]["data"] == []
    with pytest.raises(exceptions.InputException, match="limit is 100"):
        client.collections.upsert("books", [{"id": str(i)} for i in range(101)])

    user_token = client.create_user_token("reader")
    headers = {"Authorization": user_token, "stream-auth-type": "jwt"}
    refused = httpx.get(
        f"{base_url}/api/v1.0/collections/",
        params={"api_key": KEY, "foreign_ids": "books:b2"},
        headers=headers,
    ).json()
    assert (refused["code"], refused["exception"]) == (17, "NotAllowedException")
    assert "server token" in refused["detail"]


# -- what tidings does not offer -----------------------------------------------------


def test_hosted_services_are_refused_by_name(client: StreamClient, base_url: str) -> None:
    with pytest.raises(exceptions.NotAllowedException, match="personalization"):
        client.personalization.get("follow_recommendations", user_id="alice")
    with pytest.raises(exceptions.NotAllowedException, match="analytics"):
        client.track_impressions([{"content_list": ["1"], "user_data": "alice"}])
    with pytest.raises(exceptions.NotAllowedException, match="open graph"):
        client.og("https://example.com/")

    token = client.create_jwt_token("*", "*", feed_id="*")
    headers = {"Authorization": token, "stream-auth-type": "jwt"}
    calls: list[tuple[str, str, str]] = [
        ("POST", "files/", "file uploads"),
        ("DELETE", "images/", "image uploads"),
        ("GET", "images/process/", "image uploads"),
        ("POST", "moderation/flag", "moderation flags"),
        ("GET", "enrich/personalization/feed/", "personalization"),
    ]
    for method, path, service in calls:
        answer: dict[str, Any] = httpx.request(
            method, f"{base_url}/api/v1.0/{path}", params={"api_key": KEY}, headers=headers
        ).json()
        assert answer["exception"] == "NotAllowedException", path
        assert (answer["code"], answer["status_code"]) == (17, 501), path
        assert answer["detail"].startswith(service), path
        assert "duration" in answer


# -- the async client ----------------------------------------------------------------


def test_the_async_client_retargets_and_upserts(base_url: str) -> None:
    async def scenario() -> tuple[list[str], list[dict[str, Any]]]:
        aclient = stream.connect(KEY, SECRET, base_url=base_url, use_async=True)
        feed = aclient.feed("user", "a_mover")
        activity = {"actor": "a_mover", "verb": "post", "object": "p:1", "foreign_id": "am:1"}
        added = await feed.add_activity({**activity, "to": ["timeline:am_a"]})
        moved = await feed.update_activity_to_targets(
            "am:1", added["time"], added_targets=["timeline:am_b"]
        )
        await aclient.collections.upsert("songs", [{"id": "s1", "title": "Aria"}])
        selected = await aclient.collections.select("songs", ["s1"])
        to: list[str] = moved["activity"]["to"]
        entries: list[dict[str, Any]] = selected["response"]["data"]
        return to, entries

    to, entries = asyncio.run(scenario())
    assert to == ["timeline:am_a", "timeline:am_b"]
    assert [e["data"] for e in entries] == [{"title": "Aria"}]
