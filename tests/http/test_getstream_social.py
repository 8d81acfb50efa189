"""getstream's own Python client (stream-python, sync) against ``tidings serve``:
reactions (children, ``target_feeds``, the lists by activity and by parent),
the reaction flags of feed reads, users, collections and the ``enrich/`` reads.

One server for the module and deployment (SQLite; PostgreSQL + Redis), a
process of its own, about a second to start; each test uses feeds and users
of its own, so the order they run in does not matter. What does not touch
the store (who may do what, refusals) runs on SQLite only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
import stream
from stream import exceptions
from stream.client import StreamClient

from getstream_serve import DEPLOYMENTS, ON_SQLITE, stream_serve
from http_server import SECRET as V1_SECRET
from tidings.http.auth import mint
from waiting import wait_until

KEY, SECRET = "social-app", "s3cret-" * 6
GROUPS = ["user", "timeline", "notification"]


@pytest.fixture(scope="module", params=DEPLOYMENTS)
def base_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    keys = [{"key": KEY, "secret": SECRET, "groups": GROUPS}]
    with stream_serve(request, tmp_path_factory.mktemp("social"), keys) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> StreamClient:
    made: StreamClient = stream.connect(KEY, SECRET, base_url=base_url)
    return made


def _raw(base_url: str, method: str, path: str, token: str, **kwargs: Any) -> dict[str, Any]:
    """A request as the clients send it, with a token the test chose."""
    headers = {"Authorization": token, "stream-auth-type": "jwt"}
    url = f"{base_url}/api/v1.0/{path}"
    params = {"api_key": KEY, **kwargs.pop("params", {})}
    body: dict[str, Any] = httpx.request(
        method, url, headers=headers, params=params, **kwargs
    ).json()
    return body


def _post(client: StreamClient, author: str, n: int = 1, **fields: Any) -> dict[str, Any]:
    activity = {"actor": author, "verb": "post", "object": f"post:{n}", **fields}
    added: dict[str, Any] = client.feed("user", author).add_activity(activity)
    return added


# -- reactions -----------------------------------------------------------------


def test_a_reaction_is_added_read_changed_and_deleted(client: StreamClient) -> None:
    post = _post(client, "r_author")
    added = client.reactions.add("comment", post["id"], "r_bob", data={"text": "nice"})
    assert uuid.UUID(added["id"])
    assert (added["kind"], added["activity_id"], added["user_id"]) == (
        "comment", post["id"], "r_bob",
    )  # fmt: skip
    assert added["data"] == {"text": "nice"}
    assert added["parent"] == ""
    assert isinstance(added["created_at"], datetime)  # (the client parses Stream's times)
    assert added["updated_at"] == added["created_at"]

    got = client.reactions.get(added["id"])
    assert {k: v for k, v in got.items() if k != "duration"} == {
        k: v for k, v in added.items() if k != "duration"
    }
    changed = client.reactions.update(added["id"], data={"text": "very nice"})
    assert changed["data"] == {"text": "very nice"}
    assert client.reactions.get(added["id"])["data"] == {"text": "very nice"}

    client.reactions.delete(added["id"])
    with pytest.raises(exceptions.DoesNotExistException):
        client.reactions.get(added["id"])


def test_children_are_counted_listed_and_carried(client: StreamClient) -> None:
    post = _post(client, "c_author")
    comment = client.reactions.add("comment", post["id"], "c_bob", data={"text": "hi"})
    replies = [
        client.reactions.add_child("reply", comment["id"], f"c_u{i}", data={"n": i})
        for i in range(3)
    ]
    assert replies[0]["parent"] == comment["id"]
    assert replies[0]["activity_id"] == post["id"]

    parent = client.reactions.get(comment["id"])
    assert parent["children_counts"] == {"reply": 3}
    assert [r["id"] for r in parent["latest_children"]["reply"]] == [r["id"] for r in replies[::-1]]
    listed = client.reactions.filter(reaction_id=comment["id"], kind="reply", limit=2)
    assert [r["id"] for r in listed["results"]] == [replies[2]["id"], replies[1]["id"]]
    assert "id_lt=" in listed["next"]
    rest = client.reactions.filter(reaction_id=comment["id"], id_lt=replies[1]["id"])
    assert [r["id"] for r in rest["results"]] == [replies[0]["id"]]
    assert rest["next"] == ""

    client.reactions.delete(comment["id"])  # (its children go with it)
    with pytest.raises(exceptions.DoesNotExistException):
        client.reactions.get(replies[0]["id"])


def test_reactions_are_listed_by_activity_and_kind(client: StreamClient) -> None:
    post = _post(client, "l_author")
    likes = [client.reactions.add("like", post["id"], f"l_u{i}")["id"] for i in range(3)]
    comment = client.reactions.add("comment", post["id"], "l_u0")["id"]

    every = client.reactions.filter(activity_id=post["id"])["results"]
    assert [r["id"] for r in every] == [comment, *likes[::-1]]
    liked = client.reactions.filter(activity_id=post["id"], kind="like", id_gt=likes[0])
    assert [r["id"] for r in liked["results"]] == likes[:0:-1]
    with_data = client.reactions.filter(activity_id=post["id"], with_activity_data=True)
    assert with_data["activity"]["id"] == post["id"]

    again = client.reactions.add("like", post["id"], "l_u0")  # like is unique per user
    assert again["id"] == likes[0]

    other = _post(client, "l_author", 2)
    later = client.reactions.add("like", other["id"], "l_u0")["id"]
    by_user = client.reactions.filter(user_id="l_u0")["results"]
    assert [r["id"] for r in by_user] == [later, comment, likes[0]]
    by_kind = client.reactions.filter(user_id="l_u0", kind="like", id_lt=later)["results"]
    assert [r["id"] for r in by_kind] == [likes[0]]


def test_target_feeds_publish_the_reaction_with_its_extra_data(client: StreamClient) -> None:
    post = _post(client, "t_author")
    reaction = client.reactions.add(
        "like",
        post["id"],
        "t_bob",
        target_feeds=["notification:t_author", "timeline:t_bob"],
        target_feeds_extra_data={"note": "bob liked your post"},
    )
    assert reaction["target_feeds"] == ["notification:t_author", "timeline:t_bob"]
    mine = client.feed("timeline", "t_bob").get()["results"]
    assert [(a["actor"], a["verb"], a["note"]) for a in mine] == [
        ("t_bob", "like", "bob liked your post")
    ]
    assert mine[0]["foreign_id"] == f"reaction:{reaction['id'].replace('-', '')}"

    client.reactions.delete(reaction["id"])  # takes its activity back
    wait_until(
        lambda: not client.feed("timeline", "t_bob").get()["results"],
        what="the reaction's activity retracted",
    )


def test_a_soft_delete_hides_a_reaction_and_restore_brings_it_back(
    client: StreamClient,
) -> None:
    post = _post(client, "s_author")
    comment = client.reactions.add(
        "comment", post["id"], "s_bob", data={"text": "hm"}, target_feeds=["notification:s_author"]
    )
    reply = client.reactions.add_child("comment", comment["id"], "s_carol")
    client.reactions.add("like", post["id"], "s_carol")
    feed = client.feed("user", "s_author")
    flags = {"own": True, "recent": True, "counts": True}

    def seen() -> tuple[Any, ...]:
        [read] = feed.get(reactions=flags, user_id="s_bob")["results"]
        listed = client.reactions.filter(activity_id=post["id"])["results"]
        notices = client.feed("notification", "s_author").get()["results"]
        return (
            read["reaction_counts"],
            read["own_reactions"],
            read["latest_reactions"],
            listed,
            [a["activity_count"] for a in notices],
        )

    before = seen()
    assert before[0] == {"comment": 1, "like": 1}
    client.reactions.delete(comment["id"], soft=True)
    counts, own, latest, listed, notices = seen()
    assert (counts, own, notices) == ({"like": 1}, {}, [])
    assert set(latest) == {"like"}
    assert [r["kind"] for r in listed] == ["like"]
    for gone in (comment, reply):
        with pytest.raises(exceptions.DoesNotExistException):
            client.reactions.get(gone["id"])
    with pytest.raises(exceptions.DoesNotExistException, match="already"):
        client.reactions.delete(comment["id"], soft=True)

    client.reactions.restore(comment["id"])
    # (its notice goes out again as any activity does: through the runner)
    wait_until(lambda: seen() == before, what="the reaction and its notice restored")
    assert client.reactions.get(reply["id"])["data"] == reply["data"]
    with pytest.raises(exceptions.DoesNotExistException, match="is not removed"):
        client.reactions.restore(comment["id"])

    client.reactions.delete(comment["id"], soft=True)
    client.reactions.delete(comment["id"])  # for good, now
    with pytest.raises(exceptions.DoesNotExistException, match="does not exist"):
        client.reactions.restore(comment["id"])
    assert seen()[0] == {"like": 1}


@ON_SQLITE
def test_bad_soft_deletes_and_restores_are_stream_errors(
    client: StreamClient, base_url: str
) -> None:
    post = _post(client, "r_author")
    mine = client.reactions.add("like", post["id"], "r_bob")
    with pytest.raises(exceptions.DoesNotExistException, match="does not exist"):
        client.reactions.restore(str(uuid.uuid4()))
    client.reactions.delete(mine["id"], soft=True)
    token = client.create_user_token("r_eve")
    refused = _raw(base_url, "PUT", f"reaction/{mine['id']}/restore/", token)
    assert (refused["code"], refused["status_code"]) == (17, 403)
    client.reactions.add("like", post["id"], "r_bob")  # liked again meanwhile
    with pytest.raises(exceptions.InputException, match="holds one only"):
        client.reactions.restore(mine["id"])
    server = client.create_jwt_token("reactions", "*", feed_id="*")
    bad = _raw(base_url, "DELETE", f"reaction/{mine['id']}/", server, params={"soft": "perhaps"})
    assert (bad["code"], bad["exception"]) == (4, "InputException")
    # Its owner's token deletes it for good.
    own = _raw(base_url, "DELETE", f"reaction/{mine['id']}/", client.create_user_token("r_bob"))
    assert set(own) == {"duration"}


@ON_SQLITE
def test_a_restore_through_streams_route_is_refused_where_adding_would_be(
    client: StreamClient, base_url: str
) -> None:
    # Given bob's comment, removed softly, on a post of alice, who has blocked
    # him since (through tidings' own /v1 route, as Stream has no such call)
    post = _post(client, "b_alice")
    comment = client.reactions.add("comment", post["id"], "b_bob", data={"text": "hey"})
    bob = client.create_user_token("b_bob")
    assert set(_raw(base_url, "DELETE", f"reaction/{comment['id']}/", bob, params={"soft": "true"}))
    alice = {"Authorization": f"Bearer {mint(V1_SECRET, 'b_alice')}"}
    blocked = httpx.post(
        f"{base_url}/v1/users/b_alice/blocks", json={"target": "b_bob"}, headers=alice
    )
    assert blocked.status_code == 201, blocked.text

    # When bob restores it through Stream's route, Then it is refused as his
    # adding a reaction there would be, in Stream's error shape, and stays removed
    refused = _raw(base_url, "PUT", f"reaction/{comment['id']}/restore/", bob)
    assert (refused["exception"], refused["code"], refused["status_code"]) == (
        "NotAllowedException", 17, 403,
    )  # fmt: skip
    assert "b_bob" in refused["detail"]
    with pytest.raises(exceptions.DoesNotExistException):
        client.reactions.get(comment["id"])
    # The application's own (server) token may still bring it back.
    client.reactions.restore(comment["id"])
    assert client.reactions.get(comment["id"])["data"] == {"text": "hey"}


@ON_SQLITE
def test_a_user_token_reacts_as_itself_only(client: StreamClient, base_url: str) -> None:
    post = _post(client, "u_author")
    token = client.create_user_token("u_bob")
    own = {"kind": "like", "activity_id": post["id"], "user_id": "u_bob"}
    added = _raw(base_url, "POST", "reaction/", token, json=own)
    assert added["user_id"] == "u_bob"
    refused = _raw(base_url, "POST", "reaction/", token, json={**own, "user_id": "u_eve"})
    assert refused["code"] == 17
    chosen = _raw(base_url, "POST", "reaction/", token, json={**own, "id": str(uuid.uuid4())})
    assert (chosen["code"], chosen["status_code"]) == (4, 400)
    assert "id" in chosen["detail"]

    others = client.reactions.add("comment", post["id"], "u_eve")
    assert (
        _raw(base_url, "GET", "reaction/user_id/u_bob/", token)["results"][0]["id"] == added["id"]
    )
    refused = _raw(base_url, "GET", "reaction/user_id/u_eve/", token)
    assert refused["code"] == 17
    refused = _raw(base_url, "DELETE", f"reaction/{others['id']}/", token)
    assert (refused["code"], refused["status_code"]) == (17, 403)
    deleted = _raw(base_url, "DELETE", f"reaction/{added['id']}/", token)
    assert set(deleted) == {"duration"}
    assert client.reactions.get(others["id"])["user_id"] == "u_eve"


# -- reaction flags on feed reads ----------------------------------------------


def test_feed_reads_carry_own_recent_and_counted_reactions(client: StreamClient) -> None:
    post = _post(client, "f_author")
    client.reactions.add("like", post["id"], "f_author")
    client.reactions.add("like", post["id"], "f_bob")
    client.reactions.add("comment", post["id"], "f_bob", data={"text": "yo"})
    feed = client.feed("user", "f_author")

    [read] = feed.get(reactions={"own": True, "recent": True, "counts": True})["results"]
    assert read["reaction_counts"] == {"like": 2, "comment": 1}
    assert [r["user_id"] for r in read["own_reactions"]["like"]] == ["f_author"]
    assert "comment" not in read["own_reactions"]
    assert [r["user_id"] for r in read["latest_reactions"]["like"]] == ["f_bob", "f_author"]
    assert read["latest_reactions"]["comment"][0]["data"] == {"text": "yo"}

    [liked] = feed.get(reactions={"counts": True, "kinds": ["like"]})["results"]
    assert liked["reaction_counts"] == {"like": 2}
    [bobs] = feed.get(reactions={"own": True}, user_id="f_bob")["results"]
    assert sorted(bobs["own_reactions"]) == ["comment", "like"]
    [plain] = feed.get()["results"]
    assert "reaction_counts" not in plain


# -- users ---------------------------------------------------------------------


def test_users_are_added_read_changed_and_deleted(client: StreamClient) -> None:
    added = client.users.add("ann", {"name": "Ann"})
    assert (added["id"], added["data"]) == ("ann", {"name": "Ann"})
    assert isinstance(added["created_at"], datetime)
    assert isinstance(added["updated_at"], datetime)
    with pytest.raises(exceptions.StreamApiException) as taken:
        client.users.add("ann", {"name": "Other"})
    assert taken.value.status_code == 409
    held = client.users.add("ann", {"name": "Other"}, get_or_create=True)
    assert held["data"] == {"name": "Ann"}

    assert client.users.get("ann")["data"] == {"name": "Ann"}
    assert client.users.update("ann", {"name": "Annie"})["data"] == {"name": "Annie"}
    assert client.users.get("ann")["data"] == {"name": "Annie"}
    client.users.delete("ann")
    with pytest.raises(exceptions.DoesNotExistException):
        client.users.get("ann")


def test_a_user_comes_with_follow_counts(client: StreamClient) -> None:
    client.users.add("star", {})
    for name in ("fan1", "fan2"):
        client.feed("timeline", name).follow("user", "star")
    counted = client.users.get("star", with_follow_counts=True)
    assert (counted["followers_count"], counted["following_count"]) == (2, 0)
    assert "followers_count" not in client.users.get("star")


@ON_SQLITE
def test_a_user_token_writes_only_its_own_user(client: StreamClient, base_url: str) -> None:
    token = client.create_user_token("self_user")
    made = _raw(base_url, "POST", "user/", token, json={"id": "self_user", "data": {"a": 1}})
    assert made["id"] == "self_user"
    refused = _raw(base_url, "POST", "user/", token, json={"id": "someone", "data": {}})
    assert refused["code"] == 17
    assert _raw(base_url, "GET", "user/self_user/", token)["data"] == {"a": 1}


# -- collections ---------------------------------------------------------------


def test_collection_entries_are_added_read_changed_and_deleted(client: StreamClient) -> None:
    entry = client.collections.add("food", {"name": "pizza"}, id="p1")
    assert (entry["id"], entry["collection"], entry["foreign_id"]) == ("p1", "food", "food:p1")
    assert entry["data"] == {"name": "pizza"}
    with pytest.raises(exceptions.StreamApiException) as taken:
        client.collections.add("food", {"name": "again"}, id="p1")
    assert taken.value.status_code == 409
    generated = client.collections.add("food", {"name": "soup"})
    assert uuid.UUID(generated["id"])

    assert client.collections.get("food", "p1")["data"] == {"name": "pizza"}
    assert client.collections.update("food", "p1", {"name": "calzone"})["data"] == {
        "name": "calzone"
    }
    client.collections.delete("food", "p1")
    with pytest.raises(exceptions.DoesNotExistException):
        client.collections.get("food", "p1")
    with pytest.raises(exceptions.DoesNotExistException):
        client.collections.update("food", "p1", {"name": "gone"})


# -- enrichment ----------------------------------------------------------------


def test_enriched_reads_resolve_references(client: StreamClient) -> None:
    client.users.add("e_alice", {"name": "Alice"})
    client.collections.add("photo", {"url": "a.jpg"}, id="e1")
    post = _post(client, "e_alice")
    reaction = client.reactions.add("like", post["id"], "e_alice")
    feed = client.feed("user", "e_feed")
    feed.add_activity(
        {
            "actor": client.users.create_reference("e_alice"),
            "verb": "share",
            "object": client.collections.create_reference("photo", "e1"),
            "target": "place:nowhere",
            "liked": f"SR:{reaction['id']}",
            "missing": "SU:nobody",
        }
    )
    [read] = feed.get(enrich=True)["results"]
    assert (read["actor"]["id"], read["actor"]["data"]) == ("e_alice", {"name": "Alice"})
    assert read["object"]["foreign_id"] == "photo:e1"
    assert read["object"]["data"] == {"url": "a.jpg"}
    assert read["liked"]["id"] == reaction["id"]
    assert (read["target"], read["missing"]) == ("place:nowhere", "SU:nobody")

    [plain] = feed.get()["results"]
    assert plain["actor"] == "SU:e_alice"  # (only enrich/ reads resolve)

    [with_users] = client.feed("user", "e_alice").get(reactions={"recent": True})["results"]
    assert with_users["latest_reactions"]["like"][0]["user"]["data"] == {"name": "Alice"}


@ON_SQLITE
def test_a_user_changes_only_the_entries_it_added(client: StreamClient, base_url: str) -> None:
    ann, bob = client.create_user_token("c_ann"), client.create_user_token("c_bob")
    made = _raw(base_url, "POST", "collections/notes/", ann, json={"id": "n1", "data": {"v": 1}})
    assert made["foreign_id"] == "notes:n1"
    assert _raw(base_url, "GET", "collections/notes/n1/", bob)["data"] == {"v": 1}
    refused = _raw(base_url, "PUT", "collections/notes/n1/", bob, json={"data": {"v": 2}})
    assert refused["code"] == 17
    changed = _raw(base_url, "PUT", "collections/notes/n1/", ann, json={"data": {"v": 3}})
    assert changed["data"] == {"v": 3}
    assert client.collections.update("notes", "n1", {"v": 4})["data"] == {"v": 4}  # (the app)


# -- the async client ----------------------------------------------------------


def test_the_async_client_reacts_and_reads_enriched(base_url: str) -> None:
    async def scenario() -> dict[str, Any]:
        aclient = stream.connect(KEY, SECRET, base_url=base_url, use_async=True)
        await aclient.users.add("a_ann", {"name": "Ann"}, get_or_create=True)
        feed = aclient.feed("user", "a_ann")
        post = await feed.add_activity({"actor": "SU:a_ann", "verb": "post", "object": "x:1"})
        comment = await aclient.reactions.add("comment", post["id"], "a_ann")
        await aclient.reactions.add_child("reply", comment["id"], "a_bob")
        replies = await aclient.reactions.filter(reaction_id=comment["id"])
        assert [r["user_id"] for r in replies["results"]] == ["a_bob"]
        [read] = (await feed.get(enrich=True, reactions={"counts": True}))["results"]
        await aclient.reactions.delete(comment["id"])
        found: dict[str, Any] = read
        return found

    read = asyncio.run(scenario())
    assert read["actor"]["data"] == {"name": "Ann"}
    assert read["reaction_counts"] == {"comment": 1}
