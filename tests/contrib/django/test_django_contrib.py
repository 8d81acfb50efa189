"""tidings.contrib.django: the per-process engine, models that publish
themselves on commit, follows over instances, enrichment into instances."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import djsetup  # configures Django before the models are imported
import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from djproject.models import Post, Topic

import tidings.contrib.django as td
from tidings.contrib.django import engine as engine_module
from tidings.engine import Tidings

assert djsetup
User = get_user_model()


@pytest.fixture
def feeds(settings: Any, tmp_path: Path) -> Iterator[Tidings]:
    settings.TIDINGS = {
        "task_runner": "sync",
        "database_url": f"sqlite:///{tmp_path}/tidings.db",
        "groups": {"djproject_topic": {}},
    }
    yield td.get_engine()
    td.close_engine()


def foreign_ids(feeds: Tidings, feed: str) -> list[str]:
    return [str(a.foreign_id) for a in feeds.read(feed, limit=100).results]


# -- (1) the engine --------------------------------------------------------------------


def test_the_engine_is_built_once_from_the_tidings_setting(feeds: Tidings, tmp_path: Path) -> None:
    assert td.get_engine() is feeds
    assert feeds.settings.database_url == f"sqlite:///{tmp_path}/tidings.db"
    assert type(feeds.task_runner).__name__.lower().startswith("sync")
    assert "djproject_topic" in feeds.feed_groups
    assert engine_module._atexit_registered


def test_changing_the_setting_or_closing_builds_a_new_engine(
    feeds: Tidings, settings: Any, tmp_path: Path
) -> None:
    settings.TIDINGS = {"task_runner": "sync", "database_url": f"sqlite:///{tmp_path}/b.db"}
    again = td.get_engine()
    assert again is not feeds
    assert feeds._closed
    td.close_engine()
    assert again._closed
    assert td.get_engine() is not again


def test_a_forked_child_builds_its_own_engine(feeds: Tidings) -> None:
    feeds.add_activity("user:1", {"actor": "u1", "verb": "post", "object": "x:1"})
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into pytest
        code = 1
        try:
            own = td.get_engine()
            own.add_activity("user:1", {"actor": "u1", "verb": "post", "object": "x:2"})
            seen = len(own.read("user:1").results)
            os.write(write, f"{own is not feeds} {seen}".encode())
            own.close()
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    answer = os.read(read, 100).decode()
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    assert answer == "True 2"
    assert td.get_engine() is feeds
    assert len(feeds.read("user:1").results) == 2


def test_tidings_without_the_app_never_imports_django() -> None:
    code = "import sys, tidings, tidings.cli, tidings.http; assert 'django' not in sys.modules"
    src = str(Path(td.__file__).parents[3])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    subprocess.run([sys.executable, "-c", code], check=True, env={**env, "PYTHONPATH": src})


# -- (2) models that publish themselves -----------------------------------------------------


def author(name: str = "bob") -> Any:
    return User.objects.create(username=name)


@pytest.mark.django_db(transaction=True)
def test_a_save_publishes_after_its_transaction_commits(feeds: Tidings) -> None:
    bob = author()
    with transaction.atomic():
        post = Post.objects.create(author=bob, title="hello")
        assert foreign_ids(feeds, f"user:{bob.pk}") == []
    [activity] = feeds.read(f"user:{bob.pk}").results
    assert activity.foreign_id == f"djproject.post:{post.pk}" == td.ref(post)
    assert (activity.actor, activity.verb, activity.object) == (
        str(bob.pk),  # a user is their key to tidings (refs.py)
        "post",
        td.ref(post),
    )
    assert activity.extra == {"title": "hello"}


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_save_publishes_nothing(feeds: Tidings) -> None:
    bob = author()
    with transaction.atomic():
        Post.objects.create(author=bob, title="never")
        transaction.set_rollback(True)
    assert foreign_ids(feeds, f"user:{bob.pk}") == []


@pytest.mark.django_db(transaction=True)
def test_saving_again_changes_nothing_and_a_change_updates_in_place(feeds: Tidings) -> None:
    bob = author()
    post = Post.objects.create(author=bob, title="hello")
    first = feeds.get_activity((f"user:{bob.pk}", td.ref(post)))
    post.save()
    post.body = "not part of the activity"
    post.save()
    assert feeds.get_activity((f"user:{bob.pk}", td.ref(post))) == first
    post.title = "hello again"
    post.save()
    updated = feeds.get_activity((f"user:{bob.pk}", td.ref(post)))
    assert updated.id == first.id
    assert updated.extra == {"title": "hello again"}
    assert len(foreign_ids(feeds, f"user:{bob.pk}")) == 1


@pytest.mark.django_db(transaction=True)
def test_a_change_to_the_activity_itself_publishes_it_anew(feeds: Tidings) -> None:
    bob = author()
    post = Post.objects.create(author=bob, title="hello")
    first = feeds.get_activity((f"user:{bob.pk}", td.ref(post)))
    post.topic = Topic.objects.create(name="cats")
    post.save()
    [again] = feeds.read(f"user:{bob.pk}").results
    assert again.id != first.id
    assert again.target == td.ref(post.topic)


@pytest.mark.django_db(transaction=True)
def test_deletes_and_drafts_remove_the_activity(feeds: Tidings) -> None:
    bob = author()
    posts = [Post.objects.create(author=bob, title=f"p{i}") for i in range(4)]
    posts[0].delete()
    posts[1].draft = True
    posts[1].save()
    assert len(foreign_ids(feeds, f"user:{bob.pk}")) == 2
    posts[1].draft = False
    posts[1].save()
    assert len(foreign_ids(feeds, f"user:{bob.pk}")) == 3
    posts[1].draft = True
    posts[1].save()
    Post.objects.filter(pk=posts[2].pk).delete()  # a queryset's delete sends signals
    assert foreign_ids(feeds, f"user:{bob.pk}") == [td.ref(posts[3])]
    posts[3].delete()
    td.unpublish([posts[2]])  # removed already (or never published): no error
    assert foreign_ids(feeds, f"user:{bob.pk}") == []


@pytest.mark.django_db(transaction=True)
def test_a_delete_works_out_the_feed_alone(feeds: Tidings) -> None:
    """The activity of a post held in memory names a topic deleted since (its
    ``ref`` would fail): deleting the post still removes its activity."""
    bob = author()
    post = Post.objects.create(author=bob, title="hello", topic=Topic.objects.create(name="x"))
    Topic.objects.filter(pk=post.topic_id).delete()  # (SET_NULL in the row, not in `post`)
    post.topic.pk = None
    post.delete()
    assert not Post.objects.filter(title="hello").exists()
    assert foreign_ids(feeds, f"user:{bob.pk}") == []


@pytest.mark.django_db(transaction=True)
def test_writes_without_signals_use_publish_and_unpublish(feeds: Tidings) -> None:
    bob = author()
    made = Post.objects.bulk_create([Post(author=bob, title=f"p{i}") for i in range(3)])
    assert foreign_ids(feeds, f"user:{bob.pk}") == []
    with transaction.atomic():
        td.publish(made)
        assert foreign_ids(feeds, f"user:{bob.pk}") == []
    assert sorted(foreign_ids(feeds, f"user:{bob.pk}")) == sorted(td.ref(p) for p in made)
    Post.objects.filter(pk=made[0].pk).update(title="renamed")
    td.publish(Post.objects.filter(pk=made[0].pk))
    assert feeds.get_activity((f"user:{bob.pk}", td.ref(made[0]))).extra == {"title": "renamed"}
    doomed = list(Post.objects.filter(pk__in=[p.pk for p in made[1:]]))
    with transaction.atomic():
        td.unpublish(doomed)
        Post.objects.filter(pk__in=[p.pk for p in doomed])._raw_delete("default")
    assert foreign_ids(feeds, f"user:{bob.pk}") == [td.ref(made[0])]


# -- (3) follows ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_follows_between_instances(feeds: Tidings) -> None:
    alice, bob = author("alice"), author("bob")
    cats = Topic.objects.create(name="cats")
    assert (td.home_feed(alice), td.feed_of(bob), td.feed_of(cats)) == (
        f"timeline:{alice.pk}",
        f"user:{bob.pk}",
        f"djproject_topic:{cats.pk}",
    )
    post = Post.objects.create(author=bob, title="hello")
    assert not td.is_following(alice, bob)
    assert td.follow(alice, bob)
    assert not td.follow(alice, bob)
    assert td.is_following(alice, bob)
    assert foreign_ids(feeds, td.home_feed(alice)) == [td.ref(post)]
    assert td.follow(alice, cats)
    assert td.is_following(alice, cats)
    assert td.unfollow(alice, bob)
    assert not td.unfollow(alice, bob)
    assert not td.is_following(alice, bob)
    assert foreign_ids(feeds, td.home_feed(alice)) == []


# -- (4) enrichment ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_enrichment_makes_one_query_per_model_and_tombstones(feeds: Tidings) -> None:
    reader = author("reader")
    writers = [author(f"w{i}") for i in range(3)]
    topics = [Topic.objects.create(name=f"t{i}") for i in range(2)]
    for i in range(12):
        writer = writers[i % 3]
        Post.objects.create(author=writer, title=f"p{i}", topic=topics[i % 2])
    for writer in writers:
        td.follow(reader, writer)
    gone = topics[1].pk
    Topic.objects.filter(pk=gone).delete()  # SET_NULL: the activities still name it
    page = feeds.read(td.home_feed(reader), limit=25)
    assert len(page.results) == 12
    with CaptureQueriesContext(connection) as queries:
        items = td.enrich(page.results)
    # Users, topics, posts: one query each for the whole page.
    assert len(queries) == 3
    assert len(items) == 12
    for item in items:
        assert isinstance(item.actor, User)
        assert item.actor.pk == int(item.activity.actor)  # a user is named by their key
        assert isinstance(item.object, Post)
        assert item.object.title == item.activity.extra["title"]
    tombstones = [item.target for item in items if not isinstance(item.target, Topic)]
    assert len(tombstones) == 6
    assert all(isinstance(t, td.Tombstone) and not t and t.pk == str(gone) for t in tombstones)
    with CaptureQueriesContext(connection) as queries:
        assert td.enrich([]) == []
    assert len(queries) == 0


def test_enrichment_leaves_strings_that_name_no_model() -> None:
    assert td.resolve(["bob", "user:1", "nosuch.model:1", None]) == {}


# -- the same on PostgreSQL (tidings' database; Django's stays SQLite) ---------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_publish_update_remove_and_enrich_on_postgres(settings: Any, postgres_url: str) -> None:
    settings.TIDINGS = {"task_runner": "sync", "database_url": postgres_url}
    try:
        feeds = td.get_engine()
        bob, alice = author("bob"), author("alice")
        posts = [Post.objects.create(author=bob, title=f"p{i}") for i in range(3)]
        posts[0].save()  # again: nothing changes
        posts[1].title = "renamed"
        posts[1].save()
        posts[2].delete()
        td.follow(alice, bob)
        page = feeds.read(td.home_feed(alice))
        assert foreign_ids(feeds, td.feed_of(bob)) == [td.ref(p) for p in posts[1::-1]]
        with CaptureQueriesContext(connection) as queries:
            items = td.enrich(page.results)
        assert len(queries) == 2
        assert [item.object.title for item in items] == ["renamed", "p0"]
    finally:
        td.close_engine()
