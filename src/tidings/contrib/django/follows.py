"""Follows between model instances: a user's home feed follows an object's feed
(the rule is in :mod:`tidings.contrib.django.refs`)."""

from __future__ import annotations

from typing import Any

from tidings.contrib.django.engine import get_engine
from tidings.contrib.django.refs import feed_of, home_feed


def follow(user: Any, obj: Any, copy_limit: int = 100) -> bool:
    """``user``'s home feed receives what ``obj`` publishes, and its newest
    ``copy_limit`` activities now. False when it already followed."""
    return get_engine().follow(home_feed(user), feed_of(obj), copy_limit=copy_limit)


def unfollow(user: Any, obj: Any, keep_history: bool = False) -> bool:
    """Stop following; what came through the follow leaves the home feed unless
    ``keep_history``. False when it did not follow."""
    return get_engine().unfollow(home_feed(user), feed_of(obj), keep_history=keep_history)


def is_following(user: Any, obj: Any) -> bool:
    """Whether ``user``'s home feed follows ``obj``'s feed."""
    source = feed_of(obj)
    return source in get_engine().canonical.follows.sources_among(home_feed(user), [source])
