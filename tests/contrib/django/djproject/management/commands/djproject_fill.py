"""``manage.py djproject_fill``: users, topics, follows, actions and
notifications made through django-activity-stream's and
django-notifications-hq's own APIs, as a project using them would have them
(the importers' tests read them). Deterministic for a given ``--seed``."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from actstream import action
from actstream.actions import follow
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from notifications.models import Notification
from notifications.signals import notify

from djproject.models import Topic

START = datetime(2024, 1, 1, tzinfo=UTC)
VERBS = ["posted", "liked", "commented on", "shared", "joined"]


class Command(BaseCommand):  # type: ignore[misc]
    help = "Fill actstream's and notifications' tables through their own APIs."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--users", type=int, default=200)
        parser.add_argument("--topics", type=int, default=40)
        parser.add_argument("--follows", type=int, default=1000)
        parser.add_argument("--actions", type=int, default=10_000)
        parser.add_argument("--notifications", type=int, default=5_000)
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args: Any, **options: Any) -> None:
        rnd = random.Random(options["seed"])
        with transaction.atomic():  # one commit: seconds, not minutes
            users, topics = self._objects(options["users"], options["topics"])
            self._follows(rnd, users, topics, options["follows"])
            self._actions(rnd, users, topics, options["actions"])
            self._notifications(rnd, users, topics, options["notifications"])

    def _objects(self, n_users: int, n_topics: int) -> tuple[list[Any], list[Any]]:
        user_model = get_user_model()
        users = user_model.objects.bulk_create(
            [user_model(username=f"u{i}") for i in range(n_users)]
        )
        topics = Topic.objects.bulk_create([Topic(name=f"t{i}") for i in range(n_topics)])
        return users, topics

    def _follows(self, rnd: random.Random, users: list[Any], topics: list[Any], n: int) -> None:
        made: set[tuple[int, str, int]] = set()
        while len(made) < n:
            user = rnd.choice(users)
            obj = rnd.choice(topics) if rnd.random() < 0.3 else rnd.choice(users)
            key = (user.pk, type(obj).__name__, obj.pk)
            if obj == user or key in made:
                continue
            made.add(key)
            # Following a topic usually means all that happens in it.
            actor_only = not (isinstance(obj, Topic) and rnd.random() < 0.7)
            # Every tenth sends actstream's own "started following" action.
            follow(user, obj, actor_only=actor_only, send_action=len(made) % 10 == 0)

    def _actions(self, rnd: random.Random, users: list[Any], topics: list[Any], n: int) -> None:
        for i in range(n):
            kwargs: dict[str, Any] = {
                "verb": rnd.choice(VERBS),
                "timestamp": START + timedelta(seconds=i),
            }
            shape = rnd.random()
            if shape < 0.5:
                kwargs["action_object"] = rnd.choice(topics)
                kwargs["target"] = rnd.choice(users)
            elif shape < 0.8:
                kwargs["target"] = rnd.choice(topics)
            elif shape < 0.9:
                kwargs["action_object"] = rnd.choice(users)
            if rnd.random() < 0.05:
                kwargs["public"] = False
            if rnd.random() < 0.2:
                kwargs["description"] = f"description {i}"
                kwargs["score"] = i % 7  # keyword data, kept in Action.data
            action.send(rnd.choice(users), **kwargs)

    def _notifications(
        self, rnd: random.Random, users: list[Any], topics: list[Any], n: int
    ) -> None:
        for i in range(n):
            notify.send(
                rnd.choice(users),
                recipient=rnd.choice(users),
                verb=rnd.choice(["mentioned you in", "replied to", "followed"]),
                action_object=rnd.choice(topics) if rnd.random() < 0.6 else None,
                target=rnd.choice(topics) if rnd.random() < 0.3 else None,
                timestamp=START + timedelta(seconds=i, milliseconds=500),
                level=rnd.choice(["info", "info", "warning"]),
                **({"note": i} if rnd.random() < 0.2 else {}),
            )
        everything = Notification.objects.order_by("pk")
        pks = list(everything.values_list("pk", flat=True))
        read = [pk for pk in pks if rnd.random() < 0.5]
        Notification.objects.filter(pk__in=read).mark_all_as_read()
        deleted = [pk for pk in pks if rnd.random() < 0.02]
        Notification.objects.filter(pk__in=deleted).mark_all_as_deleted()
