"""Every method of the blocking client, against a real ``tidings serve`` on SQLite."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from client_services import SERVER_TOKEN, Service, user_token
from tidings_client import Client, Conflict, NotFound
from tidings_client.types import ActivityIn

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 20) -> T:
    """``probe()``'s first truthy answer (deliveries run in the server's runner)."""
    deadline = time.monotonic() + timeout
    while not (found := probe()):
        assert time.monotonic() < deadline, "not so in time"
        time.sleep(0.05)
    return found


@pytest.fixture
def client(tidings_service: Service) -> Iterator[Client]:
    with Client(tidings_service.url, SERVER_TOKEN) as made:
        yield made


def post(n: int, **more: object) -> ActivityIn:
    activity: ActivityIn = {"actor": "bob", "verb": "post", "object": f"note:{n}"}
    return activity | more  # type: ignore[return-value]


def test_publish_read_and_page_through_every_page(client: Client) -> None:
    one = client.publish("user:pages", post(0, foreign_id="p0", extra={"k": 1}))
    assert one["foreign_id"] == "p0"
    assert one["extra"] == {"k": 1}
    batch = client.publish_batch("user:pages", [post(n, foreign_id=f"p{n}") for n in range(1, 7)])
    assert [item["created"] for item in batch["results"]] == [True] * 6
    # The same foreign ids again: nothing new, the stored ones returned.
    again = client.publish("user:pages", post(0, foreign_id="p0"))
    assert again["id"] == one["id"]
    page = client.read("user:pages", limit=3)
    assert len(page["results"]) == 3
    assert page["next"] is not None
    pages = list(client.pages("user:pages", limit=3))
    assert [len(p["results"]) for p in pages] == [3, 3, 1]
    ids = [a["id"] for a in client.activities("user:pages", limit=2)]
    assert len(ids) == len(set(ids)) == 7
    assert ids == [a["id"] for p in pages for a in p["results"]]


def test_activities_by_id_foreign_id_update_and_removal(client: Client) -> None:
    stored = client.publish("user:acts", post(1, foreign_id="a1"))
    assert client.get_activity(stored["id"])["object"] == "note:1"
    assert client.get_by_foreign_id("user:acts", "a1")["id"] == stored["id"]
    updated = client.update_activity(stored["id"], set={"title": "hi"}, unset=[])
    assert updated["extra"] == {"title": "hi"}
    client.remove_by_foreign_id("user:acts", "a1")
    with pytest.raises(NotFound):
        client.get_activity(stored["id"])
    second = client.publish("user:acts", post(2))
    client.remove_activity("user:acts", second["id"])
    assert client.read("user:acts")["results"] == []


def test_enriched_reads_objects_and_users(client: Client) -> None:
    made = client.create_user("erin", "Erin", {"bio": "hi"})
    assert made["counts"] == {"followers": 0, "following": 0, "activities": 0}
    with pytest.raises(Conflict) as taken:
        client.create_user("erin2", "ERIN")
    assert taken.value.status == 409
    assert client.get_user("erin")["handle"] == "Erin"
    assert client.user_by_handle("erin")["id"] == "erin"
    assert client.update_user("erin", handle="Erin2", profile={"bio": "new"})["handle"] == "Erin2"
    stored = client.put_object("photo", "9", {"url": "x.png"})
    assert stored == {"type": "photo", "id": "9", "data": {"url": "x.png"}}
    assert client.get_object("photo", "9")["data"] == {"url": "x.png"}
    activity = client.publish("user:erin", {"actor": "erin", "verb": "post", "object": "photo:9"})
    enriched = client.get_activity(activity["id"], enrich=True)
    assert isinstance(enriched["object"], dict)
    assert isinstance(enriched["actor"], dict)
    assert client.read("user:erin", enrich=True, fields="bio")["results"][0]["actor"] != "erin"
    client.delete_object("photo", "9")
    with pytest.raises(NotFound):
        client.get_object("photo", "9")
    client.delete_user("erin")
    with pytest.raises(NotFound):
        client.get_user("erin")


def test_follows_stats_and_ranked_reads(client: Client) -> None:
    client.publish("user:src1", post(1))
    followed = client.follow("timeline:fan", "user:src1", copy_limit=10)
    assert followed == {"follower": "timeline:fan", "source": "user:src1", "created": True}
    assert client.follow("timeline:fan", "user:src1")["created"] is False
    batch = client.follow_many(
        [("timeline:fan", "user:src2"), ("timeline_ranked:fan", "user:src1")]
    )
    assert len(batch["created"]) == 2
    assert [r["source"] for r in client.following("timeline:fan")["results"]] == [
        "user:src1",
        "user:src2",
    ]
    assert client.followers("user:src1", limit=1)["next"] is not None
    assert client.feed_stats("user:src1") == {"followers": 2, "following": 0, "activities": 1}
    eventually(lambda: client.read("timeline:fan")["results"])
    ranked = eventually(lambda: client.read("timeline_ranked:fan", explain=True)["results"])
    assert ranked[0]["score"] is not None
    assert ranked[0]["explain"]
    client.unfollow("timeline:fan", "user:src1")
    assert client.read("timeline:fan")["results"] == []
    client.unfollow("timeline:fan", "user:src2", keep_history=True)


def test_groups_seen_read_and_reactions(client: Client) -> None:
    target = client.publish("user:carol", {"actor": "carol", "verb": "post", "object": "note:c"})
    for actor in ("dan", "eve", "fay"):
        reacted = client.add_reaction(target["id"], "like", actor, to=["notification:carol"])
        assert reacted["kind"] == "like"
    comment = client.add_reaction(target["id"], "comment", "dan", data={"text": "nice"})
    reply = client.add_reaction(
        target["id"], "comment", "carol", data={"t": "ty"}, parent=comment["id"]
    )
    assert client.get_reaction(reply["id"])["parent"] == comment["id"]
    assert client.reaction_children(comment["id"])["results"][0]["id"] == reply["id"]
    assert len(client.reactions(target["id"], kind="like")["results"]) == 3
    assert client.update_reaction(comment["id"], {"text": "great"})["data"] == {"text": "great"}
    client.remove_reaction(reply["id"], soft=True)
    assert client.reaction_children(comment["id"])["results"] == []
    assert client.restore_reaction(reply["id"])["id"] == reply["id"]
    client.remove_reaction(reply["id"])
    assert client.reaction_children(comment["id"])["results"] == []
    counted = client.read("user:carol", reactions="counts")["results"][0]
    assert counted.get("reaction_counts") == {"like": 3, "comment": 1}
    page = eventually(lambda: client.read_aggregates("notification:carol"))
    assert page["results"]
    assert page["unseen"] == 1
    group = page["results"][0]
    assert group["activity_count"] == 3
    assert [g["group"] for g in client.aggregates("notification:carol", limit=1)] == [
        group["group"]
    ]
    assert client.mark_seen("notification:carol", [group["group"]]) == {"unseen": 0, "unread": 1}
    assert client.mark_read("notification:carol") == {"unseen": 0, "unread": 0}
    assert client.read_aggregates("notification:carol", mark_seen=True)["unread"] == 0


def test_rules_of_a_user_with_a_user_token(tidings_service: Service, client: Client) -> None:
    with Client(tidings_service.url, user_token("gil")) as gil:
        assert gil.mute("gil", "ham", duration_s=60)["until_ms"] is not None
        assert [m["target"] for m in gil.mutes("gil")] == ["ham"]
        gil.unmute("gil", "ham")
        assert gil.mutes("gil") == []
        assert gil.block("gil", "ian") == {"target": "ian"}
        assert gil.blocks("gil") == [{"target": "ian"}]
        gil.unblock("gil", "ian")
        made = gil.add_filter("gil", ["spoiler"], contexts=["timeline"])
        assert made["contexts"] == ["timeline"]
        assert [f["id"] for f in gil.filters("gil")] == [made["id"]]
        gil.delete_filter("gil", made["id"])
        with pytest.raises(NotFound):
            gil.delete_filter("gil", made["id"])


def test_as2_health_and_metrics(client: Client) -> None:
    client.publish("user:fedi", {"actor": "fedi", "verb": "like", "object": "note:1"})
    page = client.read_as2("user:fedi", limit=5)
    assert page["type"] == "OrderedCollectionPage"
    assert page["orderedItems"][0]["type"] == "Like"
    assert client.health()["status"] == "ok"
    assert "tidings" in client.metrics()
