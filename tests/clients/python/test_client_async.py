"""Every method of the asyncio client, against a real ``tidings serve`` on
SQLite: the same calls as the blocking client's, awaited."""

from __future__ import annotations

import asyncio

import pytest

from client_services import SERVER_TOKEN, Service, user_token
from tidings_client import AsyncClient, Invalid, NotFound
from tidings_client.types import ActivityIn


def post(n: int, actor: str = "axel", **more: object) -> ActivityIn:
    activity: ActivityIn = {"actor": actor, "verb": "post", "object": f"note:{n}"}
    return activity | more  # type: ignore[return-value]


async def feeds_and_activities(client: AsyncClient) -> None:
    one = await client.publish("user:axel", post(0, foreign_id="x0"))
    await client.publish_batch("user:axel", [post(n) for n in range(1, 5)])
    assert (await client.get_by_foreign_id("user:axel", "x0"))["id"] == one["id"]
    assert (await client.get_activity(one["id"], enrich=True))["id"] == one["id"]
    assert (await client.update_activity(one["id"], set={"a": 1}))["extra"] == {"a": 1}
    page = await client.read("user:axel", limit=2)
    assert page["next"] is not None
    assert len([a async for a in client.activities("user:axel", limit=2)]) == 5
    assert (await client.read_as2("user:axel"))["type"] == "OrderedCollectionPage"
    await client.remove_activity("user:axel", one["id"])
    await client.publish("user:axel", post(9, foreign_id="x9"))
    await client.remove_by_foreign_id("user:axel", "x9")
    assert len((await client.read("user:axel"))["results"]) == 4
    with pytest.raises(Invalid):
        await client.read("user:axel", limit=0)


async def follows_users_objects(client: AsyncClient) -> None:
    assert (await client.follow("timeline:ada", "user:axel", copy_limit=5))["created"]
    assert (await client.follow_many([("timeline:ada", "user:bea")]))["created"]
    assert len((await client.following("timeline:ada"))["results"]) == 2
    assert (await client.followers("user:axel"))["results"][0]["follower"] == "timeline:ada"
    assert (await client.feed_stats("timeline:ada"))["following"] == 2
    await client.unfollow("timeline:ada", "user:bea", keep_history=True)
    await client.create_user("ada", "Ada", {"a": 1})
    assert (await client.get_user("ada"))["profile"] == {"a": 1}
    assert (await client.user_by_handle("ADA"))["id"] == "ada"
    assert (await client.update_user("ada", profile={"b": 2}))["profile"] == {"b": 2}
    await client.delete_user("ada")
    await client.put_object("song", "1", {"t": "x"})
    assert (await client.get_object("song", "1"))["data"] == {"t": "x"}
    await client.delete_object("song", "1")
    with pytest.raises(NotFound):
        await client.get_object("song", "1")


async def reactions_and_groups(client: AsyncClient) -> None:
    target = await client.publish("user:cal", post(1, "cal"))
    like = await client.add_reaction(target["id"], "like", "dee", to=["notification:cal"])
    reply = await client.add_reaction(target["id"], "comment", "cal", parent=like["id"])
    assert (await client.get_reaction(like["id"]))["children_counts"] == {"comment": 1}
    assert (await client.reaction_children(like["id"]))["results"][0]["id"] == reply["id"]
    assert len((await client.reactions(target["id"], kind="like"))["results"]) == 1
    assert (await client.update_reaction(reply["id"], {"x": 1}))["data"] == {"x": 1}
    await client.remove_reaction(reply["id"])
    for _ in range(200):
        page = await client.read_aggregates("notification:cal")
        if page["results"]:
            break
        await asyncio.sleep(0.05)
    assert [g["group"] async for g in client.aggregates("notification:cal")]
    assert (await client.mark_seen("notification:cal"))["unseen"] == 0
    assert (await client.mark_read("notification:cal", [page["results"][0]["group"]])) == {
        "unseen": 0,
        "unread": 0,
    }
    assert (await client.health())["status"] == "ok"
    assert "tidings" in await client.metrics()


async def rules(url: str) -> None:
    async with AsyncClient(url, user_token("eli")) as eli:
        await eli.mute("eli", "fox")
        assert (await eli.mutes("eli"))[0]["target"] == "fox"
        await eli.unmute("eli", "fox")
        await eli.block("eli", "gus")
        assert await eli.blocks("eli") == [{"target": "gus"}]
        await eli.unblock("eli", "gus")
        made = await eli.add_filter("eli", ["word"], whole_word=False, duration_s=60)
        assert (await eli.filters("eli"))[0]["id"] == made["id"]
        await eli.delete_filter("eli", made["id"])


def test_every_async_method(tidings_service: Service) -> None:
    async def scenario() -> None:
        async with AsyncClient(tidings_service.url, SERVER_TOKEN) as client:
            await feeds_and_activities(client)
            await follows_users_objects(client)
            await reactions_and_groups(client)
        await rules(tidings_service.url)

    asyncio.run(scenario())
