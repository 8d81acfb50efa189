"""stream-python (sync) against ``tidings serve`` with the Stream v2 protocol:
aggregated and notification reads, ``ranking``, activities by identity
(get, replace, partial update) and the calls over many feeds (follow_many,
unfollow_many, add_to_many, follow stats).

One server for the module and deployment (SQLite; PostgreSQL + Redis), a
process of its own; each test uses feeds and foreign ids of its own, so the
order they run in does not matter. Refusals run on SQLite only.
"""

from __future__ import annotations

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
GROUPS = ["user", "timeline", "timeline_aggregated", "notification", "timeline_ranked"]
DAY = datetime(2024, 5, 1, 9, 0, 0)


@pytest.fixture(scope="module", params=DEPLOYMENTS)
def base_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    keys = [{"key": KEY, "secret": SECRET, "groups": GROUPS}]
    with stream_serve(request, tmp_path_factory.mktemp("gsgroups"), keys) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> StreamClient:
    made: StreamClient = stream.connect(KEY, SECRET, base_url=base_url)
    return made


def _activity(actor: str, verb: str, n: int, **fields: Any) -> dict[str, Any]:
    when = DAY.replace(minute=n % 60, second=n // 60)
    return {"actor": actor, "verb": verb, "object": f"post:{n}", "time": when, **fields}


# -- aggregated and notification reads ------------------------------------------


def test_an_aggregated_feed_reads_as_streams_groups(client: StreamClient) -> None:
    feed = client.feed("timeline_aggregated", "groups")
    for n in range(3):
        feed.add_activity(_activity("alice", "post", n))
    feed.add_activity(_activity("bob", "post", 10))

    page = feed.get()
    assert set(page) == {"results", "next", "duration"}
    newest, older = page["results"]
    assert set(newest) == {
        "id", "group", "verb", "activity_count", "actor_count", "activities",
        "created_at", "updated_at",
    }  # fmt: skip
    assert (newest["group"], newest["activity_count"], newest["actor_count"]) == (
        "bob:post:2024-05-01", 1, 1,
    )  # fmt: skip
    assert (older["group"], older["activity_count"], older["verb"]) == (
        "alice:post:2024-05-01", 3, "post",
    )  # fmt: skip
    assert [a["object"] for a in older["activities"]] == ["post:2", "post:1", "post:0"]
    assert {a["origin"] for a in older["activities"]} == {None}  # (published here)
    assert older["updated_at"] == datetime(2024, 5, 1, 9, 2, tzinfo=UTC)  # (parsed by the client)
    assert older["created_at"] == datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def test_groups_page_by_limit_offset_and_id_lt(client: StreamClient) -> None:
    feed = client.feed("timeline_aggregated", "paged")
    for n, actor in enumerate(["a1", "a2", "a3", "a4", "a5"]):
        feed.add_activity(_activity(actor, "post", n))
    every = [g["group"] for g in feed.get()["results"]]
    assert every == [f"a{i}:post:2024-05-01" for i in (5, 4, 3, 2, 1)]

    first = feed.get(limit=2)
    assert [g["group"] for g in first["results"]] == every[:2]
    assert "id_lt=" in first["next"]
    after = feed.get(limit=2, id_lt=first["results"][-1]["id"])["results"]
    assert [g["group"] for g in after] == every[2:4]
    assert [g["group"] for g in feed.get(limit=2, offset=3)["results"]] == every[3:]
    assert feed.get(limit=5)["next"] == ""
    with pytest.raises(exceptions.InputException, match="id_gt"):
        feed.get(id_gt=first["results"][0]["id"])


def test_a_notification_feed_marks_seen_and_read(client: StreamClient) -> None:
    feed = client.feed("notification", "inbox")
    for n, (actor, verb) in enumerate([("bob", "like"), ("carol", "like"), ("dave", "comment")]):
        feed.add_activity(_activity(actor, verb, n, object="post:1"))  # (grouped by object)

    page = feed.get()
    assert (page["unseen"], page["unread"]) == (2, 2)
    comment, like = page["results"]
    assert (like["activity_count"], like["actor_count"]) == (2, 2)
    assert (like["is_seen"], like["is_read"]) == (False, False)

    # The groups show their state from before the marks; the counts, from after.
    marked = feed.get(mark_seen=True)
    assert [g["is_seen"] for g in marked["results"]] == [False, False]
    assert (marked["unseen"], marked["unread"]) == (0, 2)

    read = feed.get(mark_read=[like["id"]])
    assert (read["unseen"], read["unread"]) == (0, 1)
    counts = feed.get(limit=0)  # the counts alone, as the React kit asks for them
    assert (counts["results"], counts["next"], counts["unseen"], counts["unread"]) == ([], "", 0, 1)
    states = {g["group"]: (g["is_seen"], g["is_read"]) for g in feed.get()["results"]}
    assert states == {like["group"]: (True, True), comment["group"]: (True, False)}


@ON_SQLITE
def test_marks_are_for_notification_feeds(client: StreamClient) -> None:
    with pytest.raises(exceptions.InputException, match="only notification feeds"):
        client.feed("timeline_aggregated", "unmarked").get(mark_seen=True)


def test_ranking_reads_a_ranked_group_and_is_refused_elsewhere(client: StreamClient) -> None:
    ranked = client.feed("timeline_ranked", "ranked")
    added = [ranked.add_activity(_activity("alice", "post", n))["id"] for n in range(3)]
    assert sorted(a["id"] for a in ranked.get(ranking="popularity")["results"]) == sorted(added)
    for feed in (client.feed("user", "flat"), client.feed("timeline_aggregated", "flat")):
        with pytest.raises(exceptions.FeedConfigException, match="not ranked"):
            feed.get(ranking="popularity")


# -- activities by identity ------------------------------------------------------


def test_activities_by_ids_and_by_foreign_id_and_time(client: StreamClient) -> None:
    feed = client.feed("user", "identity")
    one = feed.add_activity(_activity("alice", "post", 1, foreign_id="ident:1"))
    two = feed.add_activity(_activity("alice", "post", 2, foreign_id="ident:2"))

    by_ids = client.get_activities(ids=[two["id"], one["id"]])["results"]
    assert [a["id"] for a in by_ids] == [two["id"], one["id"]]
    assert by_ids[0] == {k: v for k, v in two.items() if k != "duration"}

    pairs = [("ident:1", one["time"]), ("ident:2", two["time"]), ("ident:2", DAY)]
    found = client.get_activities(foreign_id_times=pairs)["results"]
    assert [a["id"] for a in found] == [one["id"], two["id"]]  # (no activity at DAY)


def test_update_activities_replaces_custom_fields(client: StreamClient) -> None:
    feed = client.feed("user", "replaced")
    sent = _activity("alice", "post", 3, foreign_id="repl:3", mood="happy", tags=["a"])
    added = feed.add_activity(sent)

    client.update_activities([{**sent, "mood": "calm", "place": "Oslo", "tags": None}])
    [stored] = feed.get()["results"]
    assert (stored["id"], stored["mood"], stored["place"], stored["tags"]) == (
        added["id"], "calm", "Oslo", None,
    )  # fmt: skip
    client.update_activities([{k: v for k, v in sent.items() if k not in ("mood", "tags")}])
    assert "mood" not in feed.get()["results"][0]

    with pytest.raises(exceptions.DoesNotExistException, match="repl:404"):
        client.update_activities([{**sent, "foreign_id": "repl:404"}])
    with pytest.raises(exceptions.InputException, match="actor"):
        client.update_activities([{**sent, "actor": "mallory"}])


def test_partial_update_by_dotted_paths(client: StreamClient) -> None:
    feed = client.feed("user", "partial")
    product = {"name": "lamp", "price": {"eur": 20, "usd": 22}}
    added = feed.add_activity(_activity("alice", "post", 4, foreign_id="part:4", product=product))

    changed = client.activity_partial_update(
        id=added["id"],
        set={"product.price.eur": 18, "product.color": "red"},
        unset=["product.name"],
    )
    assert changed["activities"][0]["product"] == {"price": {"eur": 18, "usd": 22}, "color": "red"}
    by_identity = client.activity_partial_update(
        foreign_id="part:4", time=added["time"], set={"likes": 1}, unset=["product.price.usd"]
    )
    [shown] = by_identity["activities"]
    assert (shown["likes"], shown["product"]["price"]) == (1, {"eur": 18})
    assert feed.get()["results"][0]["product"] == {"price": {"eur": 18}, "color": "red"}

    # Refused whole: the second change goes through a value that is not an object.
    with pytest.raises(exceptions.InputException, match="not an object"):
        client.activities_partial_update(
            [
                {"id": added["id"], "set": {"likes": 2}},
                {"id": added["id"], "set": {"likes.count": 3}},
            ]
        )
    assert feed.get()["results"][0]["likes"] == 1
    with pytest.raises(exceptions.InputException, match="custom fields"):
        client.activity_partial_update(id=added["id"], set={"verb": "like"})
    with pytest.raises(exceptions.DoesNotExistException):
        client.activity_partial_update(foreign_id="part:404", time=added["time"], set={"x": 1})


@ON_SQLITE
def test_calls_naming_no_feed_need_a_server_token(client: StreamClient, base_url: str) -> None:
    headers = {"Authorization": client.create_user_token("alice"), "stream-auth-type": "jwt"}
    refused = httpx.get(
        f"{base_url}/api/v1.0/activities/",
        params={"api_key": KEY, "ids": "0" * 8 + "-0000-0000-0000-" + "0" * 12},
        headers=headers,
    ).json()
    assert (refused["code"], refused["exception"]) == (17, "NotAllowedException")
    assert "server token" in refused["detail"]


# -- over many feeds ----------------------------------------------------------------


def test_follow_many_unfollow_many_and_stats(client: StreamClient) -> None:
    source = client.feed("user", "celebrity")
    for n in range(3):
        source.add_activity(_activity("celebrity", "post", n))
    client.follow_many(
        [
            {"source": "timeline:fan1", "target": "user:celebrity"},
            {"source": "timeline:fan2", "target": "user:celebrity"},
            {"source": "timeline_aggregated:fan1", "target": "user:celebrity"},
        ],
        activity_copy_limit=2,
    )
    assert len(client.feed("timeline", "fan1").get()["results"]) == 2

    stats = client.follow_stats("user:celebrity")["results"]
    assert stats["followers"] == {"feed": "user:celebrity", "count": 3}
    assert stats["following"] == {"feed": "user:celebrity", "count": 0}
    only = client.follow_stats("user:celebrity", followers_slugs=["timeline"])["results"]
    assert only["followers"]["count"] == 2

    client.unfollow_many(
        [
            {"source": "timeline:fan1", "target": "user:celebrity", "keep_history": True},
            {"source": "timeline:fan2", "target": "user:celebrity", "keep_history": False},
        ]
    )
    assert len(client.feed("timeline", "fan1").get()["results"]) == 2
    assert client.feed("timeline", "fan2").get()["results"] == []
    assert client.follow_stats("user:celebrity")["results"]["followers"]["count"] == 1


def test_add_to_many_places_one_activity_in_each_feed_and_none_in_their_followers(
    client: StreamClient,
) -> None:
    fan = client.feed("timeline", "many_fan")
    fan.follow("user", "many3")
    feeds = ["timeline:many1", "timeline:many2", "user:many3"]
    client.add_to_many(_activity("alice", "post", 5, foreign_id="many:5"), feeds)

    def shown(feed_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = client.feed(*feed_id.split(":")).get()["results"]
        return found

    # One activity (one id) in each feed, there when the call returns
    [[first], [second], [third]] = [shown(f) for f in feeds]
    assert first["foreign_id"] == "many:5"
    assert first["id"] == second["id"] == third["id"]
    assert first["origin"] is second["origin"] is third["origin"] is None  # (no follow brought it)
    # and not sent to user:many3's follower: what is added there next reaches
    # it, and is all it holds.
    later = client.feed("user", "many3").add_activity(_activity("alice", "post", 7))
    wait_until(lambda: bool(shown("timeline:many_fan")), what="the next activity delivered")
    assert [a["id"] for a in shown("timeline:many_fan")] == [later["id"]]

    # Removed as Stream's clients remove it: from one feed at a time.
    client.feed("user", "many3").remove_activity(first["id"])
    client.feed("timeline", "many1").remove_activity(foreign_id="many:5")
    assert [[a["id"] for a in shown(f)] for f in feeds] == [[], [first["id"]], [later["id"]]]
    with pytest.raises(exceptions.FeedConfigException, match="nope"):
        client.add_to_many(_activity("alice", "post", 6), ["nope:1"])


@ON_SQLITE
@pytest.mark.parametrize(
    ("call", "detail"),
    [
        (lambda c: c.follow_many([{"source": "timeline:x"}]), "source and target"),
        (lambda c: c.follow_many([{"source": "timeline:x", "target": "user:y"}], 5000), "1,000"),
        (lambda c: c.add_to_many(_activity("a", "post", 1), []), "feeds"),
        (lambda c: c.add_to_many(_activity("a", "post", 1, to=["user:b"]), ["user:a"]), "to"),
        (lambda c: c.activities_partial_update([{"set": {"a": 1}}]), "foreign_id"),
        (lambda c: c.update_activities([{"actor": "a"}]), "foreign_id and time"),
    ],
)
def test_bad_batches_get_input_errors(client: StreamClient, call: Any, detail: str) -> None:
    with pytest.raises(exceptions.InputException, match=detail):
        call(client)
