"""``manage.py djproject_streams``: for a sample of users and objects, what
django-activity-stream's own streams and django-notifications-hq's own
queries show, beside what tidings shows through the shim after an import; as
JSON on stdout, for the importers' tests to compare."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from actstream import models as actstream
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from notifications.models import Notification

import tidings.contrib.django.actstream as shim
from djproject.models import Topic
from tidings.contrib.django import get_engine, home_feed
from tidings.core.results import Page

Stream = Callable[..., Page[shim.Action]]


class Command(BaseCommand):  # type: ignore[misc]
    help = "Print actstream's and notifications' views beside tidings' (JSON)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--every", type=int, default=8, help="every n-th user and topic")

    def handle(self, *args: Any, **options: Any) -> None:
        step = options["every"]
        users = list(get_user_model().objects.order_by("pk"))[::step]
        topics = list(Topic.objects.order_by("pk"))[::step]
        out = {
            "user_stream": {
                u.pk: _pair(actstream.user_stream(u), shim.user_stream, u) for u in users
            },
            "actor_stream": {
                u.pk: _pair(actstream.actor_stream(u), shim.actor_stream, u) for u in users
            },
            "target_stream": {
                f"{type(o).__name__}:{o.pk}": _pair(
                    actstream.target_stream(o), shim.target_stream, o
                )
                for o in [*users, *topics]
            },
            "action_object_stream": {
                f"{type(o).__name__}:{o.pk}": _pair(
                    actstream.action_object_stream(o), shim.action_object_stream, o
                )
                for o in [*users, *topics]
            },
            "notifications": {u.pk: _notifications(u) for u in users},
        }
        self.stdout.write(json.dumps(out))


def _pair(queryset: Any, stream: Stream, obj: Any) -> dict[str, Any]:
    """actstream's stream (action pks, newest first) and the shim's (the pks
    its foreign ids name), with the shim's details of its first action."""
    theirs = [str(pk) for pk in queryset.order_by("-timestamp", "-pk").values_list("pk", flat=True)]
    ours: list[str] = []
    first: dict[str, Any] | None = None
    cursor = None
    while True:
        page = stream(obj, limit=100, cursor=cursor)
        for action in page.results:
            ours.append(str(action.foreign_id).partition(":")[2])
            if first is None:
                first = _details(action)
        if page.next is None:
            break
        cursor = page.next
    return {"actstream": theirs, "tidings": ours, "first": first}


def _details(action: shim.Action) -> dict[str, Any]:
    def named(value: Any) -> str | None:
        return None if value is None else f"{value._meta.label_lower}:{value.pk}"

    source = actstream.Action.objects.get(pk=str(action.foreign_id).partition(":")[2])
    return {
        "ours": [
            named(action.actor),
            action.verb,
            named(action.action_object),
            named(action.target),
            action.timestamp.isoformat(),
            action.description,
            action.data,
        ],
        "theirs": [
            named(source.actor),
            source.verb,
            named(source.action_object),
            named(source.target),
            source.timestamp.isoformat(),
            source.description,
            source.data or {},
        ],
    }


def _notifications(user: Any) -> dict[str, Any]:
    """The user's notifications (pk: unread) and tidings' aggregates of them."""
    theirs = {
        str(pk): unread
        for pk, unread in Notification.objects.filter(recipient=user, deleted=False).values_list(
            "pk", "unread"
        )
    }
    feeds, feed = get_engine(), f"notification:{user.pk}"
    ours = []
    cursor = None
    while True:
        page = feeds.read_aggregates(feed, limit=100, cursor=cursor)
        for aggregate in page.results:
            pks = [str(a.foreign_id).partition(":")[2] for a in aggregate.activities]
            ours.append([aggregate.is_read, aggregate.is_seen, aggregate.activity_count, pks])
        if page.next is None:
            break
        cursor = page.next
    assert home_feed(user)  # (the user's feeds are named by the one rule)
    return {"notifications": theirs, "aggregates": ours}
