"""The importers in this process (tidings.contrib.django.imports and the
command's options and errors) on rows the packages' own APIs made; the
filled-database runs are test_import_commands."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import djsetup  # configures Django before the models are imported
import pytest
from actstream import action
from actstream.actions import follow
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.test import override_settings
from djproject.models import Topic
from notifications.models import Notification
from notifications.signals import notify
from rich.console import Console

from tidings import Settings, Tidings
from tidings.contrib.django.actstream import ACTSTREAM_GROUPS
from tidings.contrib.django.imports import SourceMissing, import_actstream, import_notifications
from tidings.contrib.django.management.commands.tidings_import import ProgressBar

assert djsetup
User = get_user_model()
T0 = datetime(2024, 5, 1, tzinfo=UTC)
GROUPS: dict[str, Any] = {**ACTSTREAM_GROUPS, "djproject_topic": {}}
pytestmark = pytest.mark.django_db


@pytest.fixture
def feeds(tmp_path: Path) -> Iterator[Tidings]:
    with Tidings(
        Settings(database_url=f"sqlite:///{tmp_path}/t.db", groups=GROUPS), task_runner="manual"
    ) as engine:
        yield engine


def test_actions_and_follows_come_over_once_and_bad_rows_are_skipped(feeds: Tidings) -> None:
    ann, bob = (User.objects.create(username=n) for n in ("ann", "bob"))
    cats = Topic.objects.create(name="cats")
    follow(ann, bob, send_action=False)
    follow(ann, cats, actor_only=False, send_action=False)
    for n in range(5):
        action.send(bob, verb="posted", target=cats, timestamp=T0 + timedelta(hours=n), n=n)
    action.send(bob, verb="x" * 100, timestamp=T0)  # a tidings verb is at most 64
    action.send(bob, verb="sulked", public=False, timestamp=T0)
    actions, follows = import_actstream(feeds, batch_size=2)
    assert (actions.read, actions.written, actions.present) == (7, 6, 0)
    assert dict(actions.skipped) == {"invalid verb: is 100 characters; the limit is 64": 1}
    assert (follows.read, follows.written, follows.present) == (2, 2, 0)
    assert "skipped 1 (1 invalid verb" in actions.line()
    home = feeds.read(f"timeline:{ann.pk}", limit=100).results
    # Each action twice: through bob's feed and through cats' target feed.
    assert sorted(a.extra["n"] for a in home) == sorted([*range(5), *range(5)])
    assert feeds.read(f"actstream_private:auth.user.{bob.pk}").results[0].verb == "sulked"
    again = import_actstream(feeds, batch_size=3)
    assert [(t.written, t.present) for t in again] == [(0, 6), (0, 2)]


def test_notifications_keep_their_read_state_per_aggregate(feeds: Tidings) -> None:
    ann, bob = (User.objects.create(username=n) for n in ("ann", "bob"))
    cats, dogs = Topic.objects.create(name="cats"), Topic.objects.create(name="dogs")
    for n, topic in enumerate([cats, cats, dogs, dogs, dogs]):
        notify.send(
            bob, recipient=ann, verb="liked", action_object=topic, timestamp=T0 + timedelta(hours=n)
        )
    notify.send(bob, recipient=bob, verb="liked", action_object=cats, timestamp=T0, level="warning")
    mine = Notification.objects.filter(recipient=ann).order_by("timestamp")
    Notification.objects.filter(pk=mine[0].pk).mark_all_as_read()  # cats: one read of two
    Notification.objects.filter(pk__in=[n.pk for n in mine[2:]]).mark_all_as_read()  # dogs: all
    Notification.objects.filter(recipient=bob).mark_all_as_deleted()
    [tally] = import_notifications(feeds, batch_size=2)
    assert (tally.read, tally.written, tally.present) == (6, 5, 0)
    assert dict(tally.skipped) == {"deleted (soft delete)": 1}
    page = feeds.read_aggregates(f"notification:{ann.pk}")
    state = {g.activities[0].object: (g.is_seen, g.is_read, g.activity_count) for g in page.results}
    assert state == {
        f"djproject.topic:{cats.pk}": (False, False, 2),
        f"djproject.topic:{dogs.pk}": (True, True, 3),
    }
    assert (page.unseen, page.unread) == (1, 1)
    assert page.results[0].activities[0].extra == {"level": "info"}
    [again] = import_notifications(feeds)
    assert (again.written, again.present) == (0, 5)
    assert feeds.notification_counts(f"notification:{ann.pk}") == (1, 1)


def test_a_package_that_is_not_installed_is_named(feeds: Tidings) -> None:
    apps = ["django.contrib.contenttypes", "django.contrib.auth", "djproject", "actstream"]
    with override_settings(INSTALLED_APPS=apps), pytest.raises(SourceMissing) as missing:
        import_notifications(feeds)
    assert "install django-notifications-hq and add 'notifications' to INSTALLED_APPS" in str(
        missing.value
    )


def test_feed_groups_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    ann = User.objects.create(username="ann")
    follow(ann, Topic.objects.create(name="cats"), send_action=False)
    action.send(ann, verb="posted")
    settings = Settings(database_url=f"sqlite:///{tmp_path}/t.db", groups=ACTSTREAM_GROUPS)
    with Tidings(settings, task_runner="manual") as feeds:
        with pytest.raises(ImproperlyConfigured, match=re.escape('add "djproject_topic": {}')):
            import_actstream(feeds)
        assert feeds.admin.known_feeds() == []
        with pytest.raises(ValueError, match="'user' is flat; notifications go to a notification"):
            import_notifications(feeds, group="user")


def test_the_command_says_what_it_did_and_refuses_bad_options(
    settings: Any, tmp_path: Path
) -> None:
    settings.TIDINGS = {"database_url": f"sqlite:///{tmp_path}/t.db", "groups": GROUPS}
    ann = User.objects.create(username="ann")
    action.send(ann, verb="posted")
    out = io.StringIO()
    call_command("tidings_import", "actstream", stdout=out)
    assert out.getvalue().splitlines() == [
        "actstream.action: read 1, written 1, already present 0, skipped 0",
        "actstream.follow: read 0, written 0, already present 0, skipped 0",
    ]
    with pytest.raises(CommandError, match="--batch-size must be from 1 to 10,000, got 0"):
        call_command("tidings_import", "actstream", batch_size=0)
    with pytest.raises(CommandError, match="'timeline' is flat"):
        call_command("tidings_import", "notifications", group="timeline")
    settings.TIDINGS = {"database_url": f"sqlite:///{tmp_path}/t.db", "groups": {}}
    with pytest.raises(CommandError, match="ACTSTREAM_GROUPS"):
        call_command("tidings_import", "actstream")


def test_the_progress_bar_counts_rows() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80)
    with ProgressBar(console) as bar:
        bar.begin("actstream.action", 10)
        bar.advance(4)
        bar.advance(6)
    assert "actstream.action" in screen.getvalue()
    assert "10/10" in screen.getvalue()
