"""actstream's streams over tidings: pages of :class:`Action`, with cursors.

Each stream is one feed read, not a query: ``user_stream`` reads the user's
home feed (what their follows delivered), ``actor_stream`` the object's own
feed, ``target_stream`` and ``action_object_stream`` its role feeds (see
:mod:`.mapping`). A page is ``limit`` actions, newest first; pass its ``next``
back as ``cursor`` for the next. There is no ``**kwargs`` filtering: a stream is
what its feed holds.

``user_stream`` shows an action once even when the home feed received it
through several follows (its actor's and its target's): copies of an action
share its time to the millisecond, so a page never ends inside a millisecond
whose actions it shows. A page is then shorter than ``limit`` when distinct
actions share the millisecond at its end, and longer only when more than
``limit`` distinct actions share one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.timesince import timesince as django_timesince

from tidings.contrib.django.actstream.actions import row
from tidings.contrib.django.actstream.mapping import (
    OBJECT_GROUP,
    TARGET_GROUP,
    VERB_TEXT,
    object_feeds,
    role_feed,
)
from tidings.contrib.django.engine import get_engine
from tidings.contrib.django.enrich import resolve
from tidings.contrib.django.refs import home_feed
from tidings.core import ids
from tidings.core.activity import Activity
from tidings.core.feeds import FeedKind, parse_feed_id
from tidings.core.limits import MAX_PAGE_SIZE, check_page_limit
from tidings.core.results import Page
from tidings.engine import Tidings


@dataclass(frozen=True)
class Action:
    """An action as templates written for actstream use it: ``actor``,
    ``action_object`` and ``target`` are model instances (a
    :class:`~tidings.contrib.django.Tombstone` for a deleted row, the reference
    string for one naming no installed model), ``action_object`` and
    ``target`` None where the action has none."""

    activity: Activity
    actor: Any
    verb: str
    action_object: Any
    target: Any
    timestamp: datetime
    description: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    public: bool = True

    @property
    def foreign_id(self) -> str | None:
        """``"actstream.action:<id>"``: the same for every copy of the action."""
        return self.activity.foreign_id

    def timesince(self, now: datetime | None = None) -> str:
        return str(django_timesince(self.timestamp, now))


def actions(activities: list[Activity]) -> list[Action]:
    """``activities`` as :class:`Action`, their references resolved with one
    query per model for the whole list."""
    found = resolve(r for a in activities for r in (a.actor, a.object, a.target))
    out = []
    for a in activities:
        # The object stands in for a missing action object (see .mapping).
        stand_in = a.object == (a.target if a.target is not None else a.actor)
        extra = dict(a.extra)
        description = extra.pop("description", None)
        verb = extra.pop(VERB_TEXT, a.verb)
        out.append(
            Action(
                activity=a,
                actor=found.get(a.actor, a.actor),
                verb=verb,
                action_object=None if stand_in else found.get(a.object, a.object),
                target=None if a.target is None else found.get(a.target, a.target),
                timestamp=a.time,
                description=description,
                data=extra,
            )
        )
    return out


def user_stream(
    user: Any, limit: int = 25, cursor: str | None = None, *, with_user_activity: bool = False
) -> Page[Action]:
    """The actions of what ``user`` follows, each once (see the module)."""
    if with_user_activity:
        raise ValueError(
            "with_user_activity is not supported: a stream is one feed; "
            "follow(user, user) once and the user's own actions reach it"
        )
    engine = get_engine()
    feed = home_feed(user)
    kind = engine.feed_groups[parse_feed_id(feed, engine.feed_groups).group].kind
    if kind != FeedKind.FLAT:
        raise ValueError(f"user_stream reads flat home feeds; {feed} is {kind}")
    page = unique_page(engine, feed, limit, cursor)
    return Page(actions(page.results), page.next)


def actor_stream(obj: Any, limit: int = 25, cursor: str | None = None) -> Page[Action]:
    """The public actions whose actor is ``obj``."""
    engine = get_engine()
    return _read(engine, object_feeds(row(obj), engine.settings, actor_only=True)[0], limit, cursor)


def target_stream(obj: Any, limit: int = 25, cursor: str | None = None) -> Page[Action]:
    """The public actions whose target is ``obj``."""
    return _read(get_engine(), role_feed(TARGET_GROUP, row(obj)), limit, cursor)


def action_object_stream(obj: Any, limit: int = 25, cursor: str | None = None) -> Page[Action]:
    """The public actions whose action object is ``obj``."""
    return _read(get_engine(), role_feed(OBJECT_GROUP, row(obj)), limit, cursor)


def _read(engine: Tidings, feed: str, limit: int, cursor: str | None) -> Page[Action]:
    page = engine.read(feed, limit=limit, cursor=cursor)
    return Page(actions(page.results), page.next)


def unique_page(engine: Tidings, feed: str, limit: int, cursor: str | None) -> Page[Activity]:
    """A page of the flat ``feed`` with each ``foreign_id`` once (see the module)."""
    check_page_limit(limit)
    kept: list[Activity] = []
    group: list[Activity] = []  # the unique activities of the open millisecond
    group_ms = -1
    seen: set[str] = set()
    last_id = ""  # the last entry read of the open millisecond
    done_id = ""  # the last entry of the millisecond before it
    ask = min(MAX_PAGE_SIZE, 2 * limit + 1)
    while True:
        page = engine.read(feed, limit=ask, cursor=cursor)
        for a in page.results:
            ms = ids.id_ms(a.id)
            if ms != group_ms:
                if group and kept and len(kept) + len(group) > limit:
                    return Page(kept, _position(engine, feed, done_id))
                kept += group
                if len(kept) >= limit:
                    return Page(kept, _position(engine, feed, last_id))
                group, group_ms, seen, done_id = [], ms, set(), last_id
            key = a.foreign_id or a.id
            if key not in seen:
                seen.add(key)
                group.append(a)
            last_id = a.id
        if page.next is None:
            if group and kept and len(kept) + len(group) > limit:
                return Page(kept, _position(engine, feed, done_id))
            return Page(kept + group)
        cursor = page.next


def _position(engine: Tidings, feed: str, activity_id: str) -> str:
    # A flat feed's cursor names the last entry shown (tidings.reading.flat);
    # made here so that a page can end where the deduplication needs it to.
    return engine.cursors.encode(f"feed:{feed}", activity_id)
