"""tidings.contrib.django.actstream: actstream's calls over tidings, showing
what actstream itself shows for the same calls."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import djsetup  # configures Django before the models are imported
import pytest
from actstream import action as their_action
from actstream.actions import follow as their_follow
from actstream.models import Action as TheirAction
from actstream.models import user_stream as their_user_stream
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from djproject.models import Topic

import tidings.contrib.django as td
from tidings.contrib.django import actstream as shim
from tidings.contrib.django.actstream.streams import unique_page
from tidings.engine import Tidings

assert djsetup
User = get_user_model()
T0 = datetime(2024, 3, 1, tzinfo=UTC)
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def feeds(settings: Any, tmp_path: Path) -> Iterator[Tidings]:
    settings.TIDINGS = {
        "task_runner": "sync",
        "database_url": f"sqlite:///{tmp_path}/tidings.db",
        "groups": {**shim.ACTSTREAM_GROUPS, "djproject_topic": {}},
    }
    yield td.get_engine()
    td.close_engine()


def people(*names: str) -> list[Any]:
    return [User.objects.create(username=name) for name in names]


def every(stream: Callable[..., Any], obj: Any, limit: int = 100) -> list[shim.Action]:
    """All of a stream, page by page."""
    out: list[shim.Action] = []
    cursor = None
    while True:
        page = stream(obj, limit=limit, cursor=cursor)
        out += page.results
        if page.next is None:
            return out
        cursor = page.next


def test_an_action_reaches_the_streams_of_its_actor_target_and_object(feeds: Tidings) -> None:
    bob, alice = people("bob", "alice")
    cats = Topic.objects.create(name="cats")
    shim.action.send(
        bob, verb="shared", action_object=cats, target=alice, timestamp=T0, description="d", score=3
    )
    [seen] = every(shim.actor_stream, bob)
    assert (seen.actor, seen.verb, seen.action_object, seen.target) == (bob, "shared", cats, alice)
    assert (seen.timestamp, seen.description, seen.data, seen.public) == (
        T0,
        "d",
        {"score": 3},
        True,
    )
    assert seen.timesince(T0 + timedelta(days=2)) == "2\xa0days"
    assert str(seen.foreign_id).startswith("actstream.action:")
    for stream, obj in ((shim.target_stream, alice), (shim.action_object_stream, cats)):
        [again] = every(stream, obj)
        assert again.foreign_id == seen.foreign_id
        assert (again.actor, again.action_object, again.target) == (bob, cats, alice)
    assert every(shim.target_stream, cats) == every(shim.action_object_stream, alice) == []
    # A verb of several words is one in tidings, and shown as written.
    shim.action.send(bob, verb="started reading", target=cats, timestamp=T0 + timedelta(1))
    newest = every(shim.actor_stream, bob)[0]
    assert (newest.verb, newest.activity.verb) == ("started reading", "started_reading")
    assert (newest.action_object, newest.target) == (None, cats)


def test_the_same_calls_show_what_actstream_shows(feeds: Tidings) -> None:
    """One scenario through actstream's API and through the shim's: the user
    streams list the same actions in the same order."""
    ann, bob, cid, dee = people("ann", "bob", "cid", "dee")
    cats, dogs = Topic.objects.create(name="cats"), Topic.objects.create(name="dogs")
    follows = [(ann, bob, True), (ann, cats, False), (cid, dogs, True), (dee, ann, True)]
    for follower, obj, actor_only in follows:
        their_follow(follower, obj, actor_only=actor_only, send_action=False)
        shim.follow(follower, obj, actor_only=actor_only, send_action=False)
    actors, objects = [ann, bob, cid, dee], [None, cats, dogs, ann, bob]
    for n in range(40):
        kwargs: dict[str, Any] = {
            "verb": "posted" if n % 3 else "commented on",
            "timestamp": T0 + timedelta(minutes=n),
            "action_object": objects[n % 5],
            "target": objects[(n * 7) % 5],
            "public": n % 11 != 5,
            "n": n,
        }
        their_action.send(actors[n % 4], **kwargs)
        shim.action.send(actors[n % 4], **kwargs)
    for user in (ann, bob, cid, dee):
        theirs = [a.data["n"] for a in their_user_stream(user)]
        ours = [a.data["n"] for a in every(shim.user_stream, user, limit=7)]
        assert ours == theirs, user.username
    assert TheirAction.objects.filter(public=False).exists()


def test_a_private_action_reaches_no_stream(feeds: Tidings) -> None:
    bob, alice = people("bob", "alice")
    cats = Topic.objects.create(name="cats")
    shim.follow(alice, bob, send_action=False)
    shim.follow(alice, cats, actor_only=False, send_action=False)
    shim.action.send(bob, verb="drafted", target=cats, public=False)
    streams: list[tuple[Callable[..., Any], Any]] = [
        (shim.user_stream, alice),
        (shim.actor_stream, bob),
        (shim.target_stream, cats),
    ]
    for stream, obj in streams:
        assert every(stream, obj) == []
    [kept] = feeds.read(f"actstream_private:auth.user.{bob.pk}").results
    assert kept.verb == "drafted"


def test_user_stream_shows_an_action_once_whichever_follows_brought_it(feeds: Tidings) -> None:
    alice, bob, carol = people("alice", "bob", "carol")
    cats = Topic.objects.create(name="cats")
    shim.follow(alice, bob, send_action=False)
    shim.follow(alice, cats, actor_only=False, send_action=False)
    for n in range(7):  # reach alice twice: bob's, and about cats
        shim.action.send(bob, verb="posted", target=cats, timestamp=T0 + timedelta(n), n=n)
    same = T0 + timedelta(days=3, hours=1)
    for n in range(7, 12):  # five actions in one millisecond
        shim.action.send(carol, verb="posted", action_object=cats, timestamp=same, n=n)
    held = feeds.read(td.home_feed(alice), limit=100).results
    assert len(held) == 14 + 5
    for limit in (1, 2, 3, 25):
        pages = []
        cursor = None
        while True:
            page = shim.user_stream(alice, limit=limit, cursor=cursor)
            pages.append([a.data["n"] for a in page.results])
            if page.next is None:
                break
            cursor = page.next
        shown = [n for page in pages for n in page]
        assert sorted(shown) == list(range(12)), limit
        assert shown[:3] == [6, 5, 4]
        # A millisecond's actions are never split across pages.
        assert not any(
            set(p) & {7, 8, 9, 10, 11} and not {7, 8, 9, 10, 11} <= set(p) for p in pages
        )
        assert all(len(p) <= max(limit, 5) for p in pages)


def test_follows_unfollows_and_the_started_following_action(feeds: Tidings) -> None:
    alice, bob = people("alice", "bob")
    cats = Topic.objects.create(name="cats")
    shim.action.send(bob, verb="posted", target=cats, timestamp=T0)
    assert not shim.is_following(alice, bob)
    assert shim.follow(alice, bob)
    assert not shim.follow(alice, bob)
    assert shim.is_following(alice, bob)
    [told] = every(shim.actor_stream, alice)
    assert (told.verb, told.target) == ("started following", bob)
    assert [a.verb for a in every(shim.user_stream, alice)] == ["posted"]  # history copied
    assert shim.unfollow(alice, bob, send_action=True)
    assert not shim.unfollow(alice, bob)
    assert not shim.is_following(alice, bob)
    assert every(shim.user_stream, alice) == []
    assert [a.verb for a in every(shim.actor_stream, alice)] == [
        "stopped following",
        "started following",
    ]
    shim.follow(alice, alice, send_action=False)  # actstream's with_user_activity
    assert every(shim.user_stream, alice)[0].verb == "stopped following"
    with pytest.raises(ValueError, match="follow flags are not kept"):
        shim.follow(alice, cats, flag="liking")
    with pytest.raises(ValueError, match=r"follow\(user, user\)"):
        shim.user_stream(alice, with_user_activity=True)


def test_a_rolled_back_transaction_sends_nothing(feeds: Tidings) -> None:
    (bob,) = people("bob")
    with transaction.atomic():
        shim.action.send(bob, verb="posted")
        assert every(shim.actor_stream, bob) == []
        transaction.set_rollback(True)
    assert every(shim.actor_stream, bob) == []
    with transaction.atomic():
        shim.action.send(bob, verb="posted")
    assert len(every(shim.actor_stream, bob)) == 1


def test_the_feed_groups_it_needs_are_named(settings: Any, tmp_path: Path) -> None:
    settings.TIDINGS = {"task_runner": "sync", "database_url": f"sqlite:///{tmp_path}/t.db"}
    try:
        bob, alice = people("bob", "alice")
        cats = Topic.objects.create(name="cats")
        with pytest.raises(ImproperlyConfigured, match="ACTSTREAM_GROUPS"):
            shim.action.send(bob, verb="posted", target=alice)
        with pytest.raises(ImproperlyConfigured, match=re.escape('"djproject_topic": {}')):
            shim.follow(alice, cats, send_action=False)
        with pytest.raises(ValueError, match="no primary key"):
            shim.action.send(User(username="unsaved"), verb="posted")
    finally:
        td.close_engine()


def test_a_page_of_one_millisecond_is_never_cut(feeds: Tidings) -> None:
    feed = "user:7"
    for n in range(6):
        feeds.add_activity(feed, {"actor": "a", "verb": "v", "object": f"o:{n}", "time": T0})
    feeds.add_activity(
        feed, {"actor": "a", "verb": "v", "object": "o:old", "time": T0 - timedelta(1)}
    )
    first = unique_page(feeds, feed, 4, None)
    assert len(first.results) == 6
    assert first.next is not None
    rest = unique_page(feeds, feed, 4, first.next)
    assert [a.object for a in rest.results] == ["o:old"]
    assert rest.next is None
