"""tidings in a Django project: ``"tidings.contrib.django"`` in ``INSTALLED_APPS``
and a ``TIDINGS`` dict (the keys of :class:`tidings.Settings`) in the settings.

Needs Django (``pip install tidings[django]``); nothing else in tidings imports it.
Views: ``include("tidings.contrib.django.urls")``; admin pages:
:mod:`tidings.contrib.django.admin`. See docs/getting-started/django.md.
"""

from tidings.contrib.django.engine import close_engine, get_engine, tidings_settings
from tidings.contrib.django.enrich import Enriched, Tombstone, enrich, enrich_json, resolve
from tidings.contrib.django.follows import follow, is_following, unfollow
from tidings.contrib.django.publishing import (
    Registration,
    activity_of,
    publish,
    publishes,
    registration,
    unpublish,
)
from tidings.contrib.django.refs import (
    aggregated_feed,
    feed_of,
    home_feed,
    notification_feed,
    ref,
    user_key,
)

__all__ = [
    "Enriched",
    "Registration",
    "Tombstone",
    "activity_of",
    "aggregated_feed",
    "close_engine",
    "enrich",
    "enrich_json",
    "feed_of",
    "follow",
    "get_engine",
    "home_feed",
    "is_following",
    "notification_feed",
    "publish",
    "publishes",
    "ref",
    "registration",
    "resolve",
    "tidings_settings",
    "unfollow",
    "unpublish",
    "user_key",
]
