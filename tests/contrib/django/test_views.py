"""tidings.contrib.django's views: the signed-in user's feeds, notifications and
reactions as JSON, under the HTTP API's read rules; the token view; the admin;
under WSGI (the test client) and ASGI."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import djsetup  # configures Django before the models are imported
import httpx
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.asgi import get_asgi_application
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.test import AsyncClient, Client
from django.test.utils import CaptureQueriesContext
from djproject.models import Post, Topic

import tidings.contrib.django as td
from servers import RedisServer
from tidings.engine import Tidings
from tidings.http.auth import verify

assert djsetup
User = get_user_model()
SECRET = "django-views-" + "s" * 40


@pytest.fixture
def feeds(settings: Any, tmp_path: Path) -> Iterator[Tidings]:
    settings.TIDINGS = {
        "task_runner": "sync",
        "database_url": f"sqlite:///{tmp_path}/tidings.db",
        "secret": SECRET,
        "groups": {"djproject_topic": {}},
    }
    yield td.get_engine()
    td.close_engine()


@pytest.fixture
def people(feeds: Tidings) -> tuple[Any, Any]:
    return User.objects.create(username="alice"), User.objects.create(username="bob")


def signed_in(user: Any, **options: Any) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    return body


def like(client: Client, activity_id: str, **body: Any) -> Any:
    return client.post(
        f"/feeds/activities/{activity_id}/reactions/",
        {"kind": "like", **body},
        content_type="application/json",
    )


# -- who may read what ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_anonymous_requests_get_json_401s_not_a_login_redirect(feeds: Tidings) -> None:
    for method, path in [("get", "/feeds/"), ("get", "/feeds/user:1/"), ("post", "/feeds/token/")]:
        body = problem(getattr(Client(), method)(path), 401)
        assert "not signed in" in body["detail"]


@pytest.mark.django_db(transaction=True)
def test_another_users_notifications_and_timeline_are_refused(
    feeds: Tidings, people: tuple[Any, Any]
) -> None:
    alice, bob = people
    client = signed_in(alice)
    for feed in (td.notification_feed(bob), td.home_feed(bob), td.aggregated_feed(bob)):
        body = problem(client.get(f"/feeds/{feed}/"), 403)
        assert body["detail"] == (
            f"{str(alice.pk)!r} may not read {feed}: feeds of group {feed.split(':')[0]!r} "
            f"are read by their owner ({str(bob.pk)!r}) only"
        )
    assert client.get(f"/feeds/{td.notification_feed(alice)}/").status_code == 200
    # A public group (profiles) is anyone's to read, unless its owner blocks them.
    Post.objects.create(author=bob, title="hello")
    assert len(client.get(f"/feeds/{td.feed_of(bob)}/").json()["results"]) == 1
    feeds.rules.block(td.user_key(bob), td.user_key(alice))
    body = problem(client.get(f"/feeds/{td.feed_of(bob)}/"), 403)
    assert body["detail"].endswith(f"{td.feed_of(bob)} is closed to it")


@pytest.mark.django_db(transaction=True)
def test_pages_have_the_http_apis_shape(feeds: Tidings, people: tuple[Any, Any]) -> None:
    alice, bob = people
    carol = User.objects.create(username="carol")
    posts = [Post.objects.create(author=bob, title=f"p{i}") for i in range(3)]
    Post.objects.create(author=carol, title="from carol")
    td.follow(alice, bob)
    td.follow(alice, carol)
    client = signed_in(alice)
    first = client.get("/feeds/?limit=3").json()
    assert set(first) == {"results", "next"}
    assert first["results"][0]["extra"] == {"title": "from carol"}
    rest = client.get("/feeds/", {"limit": 3, "cursor": first["next"]}).json()
    assert rest["next"] is None
    got = [a["object"] for a in first["results"] + rest["results"]]
    assert got[1:] == [td.ref(p) for p in reversed(posts)]
    expected = [a.to_dict() for a in feeds.read(td.home_feed(alice), limit=10).results]
    assert [a["id"] for a in first["results"] + rest["results"]] == [a["id"] for a in expected]


@pytest.mark.django_db(transaction=True)
def test_the_readers_mutes_hide_notifications_and_their_counts(
    feeds: Tidings, people: tuple[Any, Any]
) -> None:
    alice, bob = people
    post = Post.objects.create(author=alice, title="mine")
    activity = feeds.get_activity((td.feed_of(alice), td.ref(post)))
    like(signed_in(bob), activity.id, to=[td.notification_feed(alice)])
    client = signed_in(alice)
    assert client.get("/feeds/notifications/").json()["unseen"] == 1
    # As over HTTP: the read applies her rules, not the view.
    feeds.rules.mute(td.user_key(alice), td.user_key(bob))
    page = client.get("/feeds/notifications/").json()
    assert (page["results"], page["unseen"], page["unread"]) == ([], 0, 0)


@pytest.mark.django_db(transaction=True)
def test_a_mute_hides_what_a_followed_users_models_publish(
    feeds: Tidings, people: tuple[Any, Any]
) -> None:
    # A model's activity names its author by the user's key, as the HTTP API
    # names users: the reader's mute of that key hides it (refs.py's rule).
    alice, bob = people
    td.follow(alice, bob)
    Post.objects.create(author=bob, title="noise")
    client = signed_in(alice)
    [shown] = client.get("/feeds/").json()["results"]
    assert shown["actor"] == td.user_key(bob) == td.ref(bob)
    feeds.rules.mute(td.user_key(alice), td.user_key(bob))
    assert client.get("/feeds/").json()["results"] == []


@pytest.mark.django_db(transaction=True)
def test_bad_input_says_what_was_wrong_and_the_limit(
    feeds: Tidings, people: tuple[Any, Any]
) -> None:
    alice, _ = people
    client = signed_in(alice)
    cases = [
        ("/feeds/?limit=0", 400, "limit", "must be an integer from 1 to 100"),
        ("/feeds/?limit=101", 400, "limit", "must be an integer from 1 to 100"),
        ("/feeds/?limit=ten", 400, "limit", "must be an integer in ASCII digits, got 'ten'"),
        ("/feeds/?enrich=yes", 400, "enrich", "must be true or false (or 1 or 0), got 'yes'"),
        ("/feeds/?reactions=hugs", 400, "reactions", None),
        ("/feeds/?cursor=garbage", 400, "cursor", None),
        ("/feeds/nocolon/", 400, None, "feed id 'nocolon' must be 'group:key'"),
        ("/feeds/nosuch:1/", 404, None, "unknown feed group 'nosuch'; configured: "),
    ]
    for path, status, field, detail in cases:
        body = problem(client.get(path), status)
        assert body.get("field") == field, path
        if detail is not None:
            assert body["detail"].startswith(detail), (path, body["detail"])
    body = problem(client.delete("/feeds/"), 405)
    assert body["detail"] == "DELETE is not allowed here; use GET"


# -- notifications: seen and read ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_notifications_seen_and_read_round_trip(feeds: Tidings, people: tuple[Any, Any]) -> None:
    alice, bob = people
    post = Post.objects.create(author=alice, title="mine")
    activity = feeds.get_activity((td.feed_of(alice), td.ref(post)))
    made = like(signed_in(bob), activity.id, to=[td.notification_feed(alice)])
    assert made.status_code == 201
    client = signed_in(alice)
    page = client.get("/feeds/notifications/").json()
    assert (page["unseen"], page["unread"]) == (1, 1)
    [aggregate] = page["results"]
    assert (aggregate["is_seen"], aggregate["is_read"]) == (False, False)
    assert aggregate["activities"][0]["actor"] == td.user_key(bob)
    mark = "/feeds/notifications/{}/".format
    seen = client.post(mark("seen"), {"all": True}, content_type="application/json")
    assert seen.json() == {"unseen": 0, "unread": 1}
    groups = {"groups": [aggregate["group"]]}
    read = client.post(mark("read"), groups, content_type="application/json")
    assert read.json() == {"unseen": 0, "unread": 0}
    again = client.get("/feeds/notifications/").json()
    assert (again["results"][0]["is_seen"], again["results"][0]["is_read"]) == (True, True)
    # A mark is a POST: a GET to it is refused; a bad body says what it lacks.
    assert problem(client.get(mark("seen")), 405)["detail"].endswith("use POST")
    body = problem(client.post(mark("seen"), {}, content_type="application/json"), 400)
    assert (
        body["detail"]
        == 'Value error, give either "groups" (a list of aggregate keys) or "all": true'
    )
    body = problem(client.post(mark("read"), "{", content_type="application/json"), 400)
    assert body["detail"].startswith("the body must be JSON")
    body = problem(
        client.post(mark("read"), {"groups": ["x" * 300]}, content_type="application/json"), 400
    )
    assert body["field"] == "groups.0"


@pytest.mark.django_db(transaction=True)
def test_marks_are_csrf_protected_as_django_views_are(
    feeds: Tidings, people: tuple[Any, Any]
) -> None:
    alice, _ = people
    client = signed_in(alice, enforce_csrf_checks=True)
    everything = {"all": True}
    refused = client.post("/feeds/notifications/seen/", everything, content_type="application/json")
    assert refused.status_code == 403
    assert b"CSRF" in refused.content
    token = "c" * 32
    client.cookies["csrftoken"] = token
    done = client.post(
        "/feeds/notifications/seen/",
        everything,
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert done.json() == {"unseen": 0, "unread": 0}


# -- reactions ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_reactions_of_activities_one_may_see_and_ones_own(
    feeds: Tidings, people: tuple[Any, Any]
) -> None:
    alice, bob = people
    post = Post.objects.create(author=bob, title="hello")
    activity = feeds.get_activity((td.feed_of(bob), td.ref(post)))
    client, other = signed_in(alice), signed_in(bob)
    made = like(client, activity.id)
    assert made.status_code == 201
    assert made.json()["user"] == td.user_key(alice)
    assert like(client, activity.id).json()["id"] == made.json()["id"]  # a like is unique
    assert like(client, activity.id).status_code == 200
    path = f"/feeds/activities/{activity.id}/reactions/"
    listed = other.get(path).json()
    assert [r["id"] for r in listed["results"]] == [made.json()["id"]]
    assert listed["next"] is None
    assert other.get(path, {"kind": "comment"}).json()["results"] == []
    reaction = f"/feeds/reactions/{made.json()['id']}/"
    body = problem(other.delete(reaction), 403)
    assert body["detail"] == f"{td.user_key(bob)!r} may remove only their own reactions"
    assert client.delete(reaction).status_code == 204
    assert client.get(path).json()["results"] == []
    problem(client.delete(reaction), 404)


@pytest.mark.django_db(transaction=True)
def test_reactions_follow_the_http_apis_rules(feeds: Tidings, people: tuple[Any, Any]) -> None:
    alice, bob = people
    client = signed_in(alice)
    # Bob's timeline is his alone: what is only there, alice may not see.
    hidden = feeds.add_activity(
        td.home_feed(bob), {"actor": "site", "verb": "welcome", "object": "site:1"}
    )
    body = problem(like(client, hidden.id), 403)
    assert (
        body["detail"]
        == f"{td.user_key(alice)!r} may not see activity {hidden.id} or its reactions"
    )
    problem(client.get(f"/feeds/activities/{hidden.id}/reactions/"), 403)
    problem(like(client, "0" * 32), 404)
    post = Post.objects.create(author=bob, title="hello")
    activity = feeds.get_activity((td.feed_of(bob), td.ref(post)))
    body = problem(like(client, activity.id, to=[td.feed_of(bob)]), 403)
    assert body["detail"] == (
        f"{td.user_key(alice)!r} may not address {td.feed_of(bob)} in to: "
        "group 'user' is not addressable by users"
    )
    body = problem(like(client, activity.id, user="someone"), 400)
    assert body["field"] == "user"
    body = problem(like(client, activity.id, kind="Not A Kind"), 400)
    assert body["field"] == "kind"


# -- enrichment -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_enrichment_costs_one_query_per_model_for_a_page_of_25(
    feeds: Tidings, people: tuple[Any, Any]
) -> None:
    alice, _ = people
    writers = [User.objects.create(username=f"w{i}") for i in range(5)]
    topics = [Topic.objects.create(name=f"t{i}") for i in range(3)]
    for i in range(30):
        Post.objects.create(author=writers[i % 5], title=f"p{i}", topic=topics[i % 3])
    for writer in writers:
        td.follow(alice, writer)
    gone = topics[2]
    Topic.objects.filter(pk=gone.pk).delete()
    client = signed_in(alice)
    client.get("/feeds/")  # (the session's first read is not counted)
    with CaptureQueriesContext(connection) as plain:
        client.get("/feeds/", {"limit": 25})
    with CaptureQueriesContext(connection) as enriched:
        page = client.get("/feeds/", {"limit": 25, "enrich": "1"}).json()
    # Users, posts and topics: one query each for the page of 25.
    assert len(page["results"]) == 25
    assert len(enriched) - len(plain) == 3
    first = page["results"][0]
    post = Post.objects.get(pk=first["object"]["id"])
    assert first["actor"] == {
        "type": "auth.user",
        "id": str(post.author_id),
        "name": post.author.username,
    }
    assert first["object"] == {
        "type": "djproject.post",
        "id": str(post.pk),
        "name": post.title,
        "url": f"/posts/{post.pk}/",
    }
    tombstones = [a["target"] for a in page["results"] if a["target"].get("deleted")]
    assert tombstones
    assert all(
        t == {"type": "djproject.topic", "id": str(gone.pk), "deleted": True} for t in tombstones
    )


@pytest.mark.django_db(transaction=True)
def test_aggregated_pages_enrich_and_carry_reactions(
    feeds: Tidings, people: tuple[Any, Any]
) -> None:
    alice, bob = people
    feeds.follow(td.aggregated_feed(alice), td.feed_of(bob))
    posts = [Post.objects.create(author=bob, title=f"p{i}") for i in range(3)]
    first = feeds.get_activity((td.feed_of(bob), td.ref(posts[0])))
    client = signed_in(alice)
    like(client, first.id)
    page = client.get("/feeds/aggregated/", {"enrich": "1", "reactions": "counts,own"}).json()
    [aggregate] = page["results"]
    assert aggregate["activity_count"] == 3
    assert "unseen" not in page
    shown = {a["object"]["name"]: a for a in aggregate["activities"]}
    assert shown["p0"]["reaction_counts"] == {"like": 1}
    assert [r["user"] for r in shown["p0"]["own_reactions"]["like"]] == [td.user_key(alice)]
    assert shown["p1"]["reaction_counts"] == {}
    assert all(a["actor"]["name"] == "bob" for a in aggregate["activities"])


# -- the token view -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_token_view_mints_a_short_lived_user_token(
    feeds: Tidings, people: tuple[Any, Any], settings: Any
) -> None:
    alice, _ = people
    settings.TIDINGS_SERVE_URL = "https://live.example.com"
    settings.TIDINGS_TOKEN_SECONDS = 120
    client = signed_in(alice)
    made = client.post("/feeds/token/")
    assert made.status_code == 200
    assert "no-store" in made["Cache-Control"]
    body = made.json()
    who = verify(SECRET, f"Bearer {body['token']}")
    assert (who.subject, who.server) == (td.user_key(alice), False)
    assert body["expires_in"] == 120
    assert body["expires_at"].endswith("Z")
    assert who.expires_at - feeds.clock.timestamp() <= 120
    assert body["url"] == "https://live.example.com"
    assert body["user"] == td.user_key(alice)
    assert body["feeds"] == {
        "home": td.home_feed(alice),
        "aggregated": td.aggregated_feed(alice),
        "notifications": td.notification_feed(alice),
        "profile": td.feed_of(alice),
    }
    problem(client.get("/feeds/token/"), 405)
    settings.TIDINGS_TOKEN_SECONDS = 10**6
    with pytest.raises(ImproperlyConfigured, match="from 1 to 86400, got 1000000"):
        client.post("/feeds/token/")
    settings.TIDINGS_TOKEN_SECONDS = 60
    settings.TIDINGS = {**settings.TIDINGS, "secret": "short"}
    with pytest.raises(ImproperlyConfigured, match="at least 32 characters"):
        client.post("/feeds/token/")


# -- the admin ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_admin_shows_the_activity_an_instance_published(
    feeds: Tidings, people: tuple[Any, Any], admin_client: Client
) -> None:
    _, bob = people
    post = Post.objects.create(author=bob, title="hello")
    draft = Post.objects.create(author=bob, title="later", draft=True)
    activity = feeds.get_activity((td.feed_of(bob), td.ref(post)))
    page = admin_client.get(f"/admin/djproject/post/{post.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Tidings activity" in html
    extra = "{&quot;title&quot;:&quot;hello&quot;}"  # (HTML-escaped JSON)
    for shown in (activity.id, td.feed_of(bob), td.ref(post), extra):
        assert f"<td>{shown}</td>" in html, shown
    none = admin_client.get(f"/admin/djproject/post/{draft.pk}/change/").content.decode()
    assert f"none in {td.feed_of(bob)} (foreign_id {td.ref(draft)})" in none
    assert admin_client.get("/admin/djproject/post/add/").status_code == 403


# -- ASGI -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_views_under_asgi(feeds: Tidings, people: tuple[Any, Any]) -> None:
    alice, bob = people
    Post.objects.create(author=bob, title="hello")
    td.follow(alice, bob)
    session = signed_in(alice).cookies["sessionid"].value
    csrf = "d" * 32

    async def through_the_asgi_handler() -> list[Any]:
        # Django's own async client, then the application an ASGI server runs.
        client = AsyncClient()
        await client.aforce_login(alice)
        home = await client.get("/feeds/", {"enrich": "1"})
        seen = await client.post(
            "/feeds/notifications/seen/", {"all": True}, content_type="application/json"
        )
        transport = httpx.ASGITransport(app=get_asgi_application())
        cookies = {"sessionid": session, "csrftoken": csrf}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", cookies=cookies
        ) as http:
            # At once: Django runs each sync view in a thread, calling one engine.
            pages = await asyncio.gather(*(http.get("/feeds/") for _ in range(4)))
            token = await http.post("/feeds/token/", headers={"X-CSRFToken": csrf})
            refused = await http.get(f"/feeds/{td.notification_feed(bob)}/")
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            anonymous = await http.get("/feeds/")
        # The thread the sync views ran in keeps its database connection (the
        # test client's requests do not close it): closed there, or on
        # PostgreSQL the test database cannot be dropped at the end.
        await sync_to_async(connections.close_all)()
        return [home, seen, pages, token, refused, anonymous]

    home, seen, pages, token, refused, anonymous = asyncio.run(through_the_asgi_handler())
    assert home.json()["results"][0]["actor"]["name"] == "bob"
    assert seen.json() == {"unseen": 0, "unread": 0}
    assert [page.json()["results"][0]["extra"] for page in pages] == [{"title": "hello"}] * 4
    assert verify(SECRET, f"Bearer {token.json()['token']}").subject == td.user_key(alice)
    assert refused.status_code == 403
    assert anonymous.status_code == 401


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_store_out_of_reach_is_a_503_with_retry_after(settings: Any, tmp_path: Path) -> None:
    with RedisServer() as server:  # its own: this test stops it
        settings.TIDINGS = {
            "task_runner": "sync",
            "database_url": f"sqlite:///{tmp_path}/tidings.db",
            "redis_url": server.url,
            "secret": SECRET,
        }
        try:
            td.get_engine()
            client = signed_in(User.objects.create(username="alice"))
            assert client.get("/feeds/").status_code == 200
            # Given Redis gone, when the timeline is read: 503 as the HTTP API answers it
            server.halt()
            body = problem(client.get("/feeds/"), 503)
            assert "Redis" in body["detail"]
            assert client.get("/feeds/")["Retry-After"] == "2"
            # Then, Redis back, the same engine serves again
            server.start()
            assert client.get("/feeds/").status_code == 200
        finally:
            td.close_engine()
