"""Models that publish themselves, as a project would write them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from tidings.contrib.django import feed_of, publishes, ref


class Topic(models.Model):  # type: ignore[misc]
    name = models.CharField(max_length=100)

    class Meta:
        app_label = "djproject"

    def __str__(self) -> str:
        return str(self.name)


def post_feed(post: Post) -> str:
    return feed_of(post.author)


def post_is_public(post: Post) -> bool:
    # Drafts publish nothing (and a post made a draft again is taken back).
    return not post.draft


def post_activity(post: Post) -> dict[str, Any]:
    return {
        "actor": ref(post.author),
        "verb": "post",
        "target": ref(post.topic) if post.topic_id else None,
        "extra": {"title": post.title},
    }


@publishes(feed=post_feed, activity=post_activity, when=post_is_public)
class Post(models.Model):  # type: ignore[misc]
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    topic = models.ForeignKey(Topic, null=True, blank=True, on_delete=models.SET_NULL)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    draft = models.BooleanField(default=False)

    class Meta:
        app_label = "djproject"

    def __str__(self) -> str:
        return str(self.title)

    def get_absolute_url(self) -> str:
        return f"/posts/{self.pk}/"
