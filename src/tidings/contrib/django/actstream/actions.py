"""actstream's ``action.send``, ``follow``, ``unfollow`` and ``is_following``
over tidings (the mapping is in :mod:`.mapping`).

Differences from actstream: ``action.send`` publishes when the current
transaction commits and returns nothing; ``follow`` returns whether the follow
is new, not a ``Follow`` row; follow flags are not kept (a non-empty ``flag``
is refused); no model needs registering.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from tidings.contrib.django.actstream.mapping import (
    FOREIGN_ID_PREFIX,
    ActionParts,
    Row,
    activity,
    feeds,
    object_feeds,
)
from tidings.contrib.django.engine import get_engine
from tidings.contrib.django.refs import home_feed
from tidings.core.activity import validate
from tidings.core.limits import MAX_COPY_LIMIT

__all__ = ["action", "follow", "is_following", "unfollow"]


def row(instance: Any) -> Row:
    """A saved model instance as a :class:`~.mapping.Row`."""
    if instance.pk is None:
        raise ValueError(f"{instance!r} has no primary key yet: save it first")
    return Row(instance._meta.label_lower, str(instance.pk))


def _verb(verb: Any) -> str:
    # actstream stores the untranslated text of a lazy translation (so the
    # verb is the same in every language); so does the shim.
    args = getattr(verb, "_proxy____args", None)
    return str(args[0] if args else verb)


class ActionSender:
    """``action`` in ``action.send(actor, verb=..., ...)`` (in actstream, a signal)."""

    def send(
        self,
        actor: Any,
        *,
        verb: Any,
        action_object: Any = None,
        target: Any = None,
        timestamp: datetime | None = None,
        description: str | None = None,
        public: bool = True,
        **data: Any,
    ) -> None:
        """Publish the action ``<actor> <verb> [<action_object>] [on <target>]``
        when the current transaction commits (at once outside one): a
        rolled-back transaction publishes nothing. Keyword data goes to the
        activity's ``extra``."""
        parts = ActionParts(
            actor=row(actor),
            verb=_verb(verb),
            timestamp=timestamp or timezone.now(),
            action_object=None if action_object is None else row(action_object),
            target=None if target is None else row(target),
            description=description,
            public=bool(public),
            data=data,
        )
        engine = get_engine()
        # Checked now, so a missing feed group or data that is not JSON fails
        # the caller rather than the commit.
        targets = feeds(parts, engine.settings)
        made = activity(parts, FOREIGN_ID_PREFIX + uuid.uuid4().hex)
        for feed in targets:
            engine.check_feed(feed)
        validate(made, now=engine.clock.now())
        transaction.on_commit(_publisher(targets, made), robust=False)


def _publisher(targets: list[str], made: dict[str, Any]) -> Callable[[], None]:
    def publish() -> None:
        engine = get_engine()
        for feed in targets:
            engine.add_activity(feed, made)

    return publish


#: ``from tidings.contrib.django.actstream import action``; ``action.send(...)``.
action = ActionSender()


def follow(
    user: Any,
    obj: Any,
    send_action: bool = True,
    actor_only: bool = True,
    flag: str = "",
    **kwargs: Any,
) -> bool:
    """``user``'s home feed follows ``obj``: its actions (``actor_only``), or
    also those whose target or action object it is (``actor_only=False``);
    the newest 1,000 of each are copied in. With ``send_action``, a new
    follow sends ``<user> started following <obj>`` (``kwargs`` go to that
    action). Returns whether the follow is new."""
    _no_flag(flag)
    engine = get_engine()
    home = home_feed(user)
    sources = object_feeds(row(obj), engine.settings, actor_only=actor_only)
    # As many as a follow copies: actstream's streams show all of the past.
    made = engine.follow_many([(home, s) for s in sources], copy_limit=MAX_COPY_LIMIT)
    new = (home, sources[0]) in made
    if send_action and new:
        action.send(user, verb="started following", target=obj, **kwargs)
    return bool(made)


def unfollow(user: Any, obj: Any, send_action: bool = False, flag: str = "") -> bool:
    """Stop following ``obj`` (in every way ``follow`` could have); what came
    through the follow leaves the home feed. With ``send_action``, sends
    ``<user> stopped following <obj>``. Returns whether it followed."""
    _no_flag(flag)
    engine = get_engine()
    home = home_feed(user)
    sources = object_feeds(row(obj), engine.settings, actor_only=False)
    followed = False
    for source in sources:
        followed = engine.unfollow(home, source) or followed
    if send_action:
        action.send(user, verb="stopped following", target=obj)
    return followed


def is_following(user: Any, obj: Any, flag: str = "") -> bool:
    """Whether ``user`` follows ``obj`` (with ``actor_only`` either way)."""
    _no_flag(flag)
    engine = get_engine()
    source = object_feeds(row(obj), engine.settings, actor_only=True)[0]
    return source in engine.canonical.follows.sources_among(home_feed(user), [source])


def _no_flag(flag: str) -> None:
    if flag:
        raise ValueError(
            f"follow flags are not kept by tidings (flag={flag!r}): a flagged follow "
            "would be the same follow; keep flags in a model of your own"
        )
