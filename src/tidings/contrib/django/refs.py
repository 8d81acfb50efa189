"""How model instances are named in activities and feeds: the one rule.

* An instance is referred to as ``"<app_label>.<model_name>:<pk>"``
  (:func:`ref`, e.g. ``"blog.post:17"``): the ``foreign_id`` of what it
  publishes, and what :func:`~tidings.contrib.django.enrich` turns back into it.
* A user (an instance of ``get_user_model()``) is ``"<pk>"`` to tidings
  (:func:`user_key`; also their :func:`ref`): the key of their feeds, the
  subject of their tokens, the ``user`` of their reactions and the ``actor``
  of what they do, so that the read rules (mutes, blocks, "one's own") see
  them as the HTTP API does; enrichment resolves a reference without a model
  label to the user model. A user has the feed ``"<profile_group>:<pk>"``
  (``user:42``) and reads ``"<home_group>:<pk>"`` (``timeline:42``), and the
  feeds of the groups the web app reads for the aggregated and notification
  roles (``timeline_aggregated:42``, ``notification:42``).
* Any other instance has the feed ``"<app_label>_<model_name>:<pk>"``
  (``blog_topic:3``): a group to configure in ``TIDINGS["groups"]``.

The ``*_for`` functions apply the rule to a model's label (``"blog.post"``)
and a primary key, for code that has rows' keys rather than instances (the
importers); ``settings`` defaults to those of :func:`get_engine`'s engine.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured

from tidings.contrib.django.engine import get_engine
from tidings.settings import Settings


def ref(instance: Any) -> str:
    """``"app_label.model_name:pk"`` of a saved model instance; a user's key
    (``"<pk>"``) for a user."""
    _saved(instance)
    return ref_for(instance._meta.label_lower, instance.pk)


def feed_of(instance: Any) -> str:
    """The feed a model instance publishes to and others follow (see the module's rule)."""
    if isinstance(instance, str):
        return instance
    _saved(instance)
    return feed_for(instance._meta.label_lower, instance.pk)


def home_feed(user: Any) -> str:
    """The feed a user reads (and that follows): ``"<home_group>:<pk>"``."""
    if isinstance(user, str):
        return user
    _saved(user)
    return home_feed_for(user.pk)


def ref_for(label: str, pk: object) -> str:
    """:func:`ref` of the row ``pk`` of the model labelled ``label`` (``"blog.post"``)."""
    if label == get_user_model()._meta.label_lower:
        return str(pk)
    return f"{label}:{pk}"


def feed_for(label: str, pk: object, settings: Settings | None = None) -> str:
    """:func:`feed_of` of the row ``pk`` of the model labelled ``label``."""
    if label == get_user_model()._meta.label_lower:
        return f"{(settings or get_engine().settings).profile_group}:{pk}"
    return f"{label.replace('.', '_')}:{pk}"


def home_feed_for(pk: object, settings: Settings | None = None) -> str:
    """:func:`home_feed` of the user whose primary key is ``pk``."""
    return f"{(settings or get_engine().settings).home_group}:{pk}"


def user_key(user: Any) -> str:
    """``"<pk>"``: who a user is to tidings (their feeds' key, their tokens' subject)."""
    if isinstance(user, str):
        return user
    _saved(user)
    return str(user.pk)


def aggregated_feed(user: Any) -> str:
    """The user's aggregated home feed: ``"<group>:<pk>"`` (``timeline_aggregated:42``)."""
    return f"{_role_group('aggregated')}:{user_key(user)}"


def notification_feed(user: Any) -> str:
    """The user's notification feed: ``"<group>:<pk>"`` (``notification:42``)."""
    return f"{_role_group('notifications')}:{user_key(user)}"


def _role_group(role: str) -> str:
    # The web app's rule for which configured group plays each role, so that
    # both read the same feeds. Imported here, on first use: the web app's
    # package brings FastAPI, which a project publishing models never needs.
    from tidings.webapp.groups import app_groups

    group = app_groups(get_engine().settings)[role]
    if group is None:
        kind = "notification" if role == "notifications" else role
        raise ImproperlyConfigured(
            f"no feed group of kind {kind!r} is configured in TIDINGS['groups']"
        )
    return group


def _saved(instance: Any) -> None:
    if instance.pk is None:
        raise ValueError(f"{instance!r} has no primary key yet: save it first")
