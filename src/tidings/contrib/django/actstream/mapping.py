"""How an actstream action becomes tidings activities: the one mapping the
shim (:mod:`~tidings.contrib.django.actstream.actions`) and the importer share.

An action ``<actor> <verb> [<action_object>] [on <target>] <timestamp>`` is an
activity with

* ``actor``, ``object`` and ``target`` the references of its actor, action
  object and target (``"app_label.model_name:pk"``, :mod:`..refs`). A tidings
  activity always has an ``object``: an action without an action object has
  its target there, or, without one either, its actor;
* ``verb`` its verb with each run of whitespace made one ``_`` (a tidings verb
  is one word: ``"started following"`` is ``started_following``), ``time``
  its timestamp, ``foreign_id`` ``"actstream.action:<id>"``;
* ``extra`` its keyword data, its ``description`` under that key, and the
  verb as written under ``verb_text`` when it is not the verb itself.

A public action is published to its actor's feed (:func:`..refs.feed_for`),
which the actor's followers follow, and again, as its own activity with the
same ``foreign_id``, to the *role feeds* of its target
(``actstream_target:<app_label>.<model_name>.<pk>``) and of its action object
(``actstream_object:…``). A tidings follow delivers only what is published to
its source, so these copies are what ``follow(user, obj, actor_only=False)``
follows, and what ``target_stream`` / ``action_object_stream`` read. A home
feed may then hold an action more than once (it follows its actor and its
target); :func:`~tidings.contrib.django.actstream.streams.user_stream` shows it
once.

A non-public action goes to its actor's private feed
(``actstream_private:<app_label>.<model_name>.<pk>``) alone, which nothing
follows: it reaches no stream, as in actstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from tidings.contrib.django.refs import feed_for, ref_for
from tidings.settings import Settings

TARGET_GROUP = "actstream_target"
OBJECT_GROUP = "actstream_object"
PRIVATE_GROUP = "actstream_private"

#: The feed groups the shim and the importer publish to, for
#: ``TIDINGS["groups"]``: ``{**ACTSTREAM_GROUPS, ...}``.
ACTSTREAM_GROUPS: dict[str, Any] = {
    TARGET_GROUP: {},
    OBJECT_GROUP: {},
    PRIVATE_GROUP: {},
}

#: The ``extra`` key of a verb as written, where it is not one word.
VERB_TEXT = "verb_text"

#: The ``foreign_id`` prefix of an action's activities.
FOREIGN_ID_PREFIX = "actstream.action:"


@dataclass(frozen=True)
class Row:
    """A model row named by its model's label (``"blog.post"``) and primary key."""

    label: str
    pk: str

    @property
    def ref(self) -> str:
        return ref_for(self.label, self.pk)


@dataclass(frozen=True)
class ActionParts:
    """An action as actstream's ``action.send`` takes it (and its table holds it)."""

    actor: Row
    verb: str
    timestamp: datetime
    action_object: Row | None = None
    target: Row | None = None
    description: str | None = None
    public: bool = True
    data: Mapping[str, Any] = field(default_factory=dict)


def role_feed(group: str, row: Row) -> str:
    """The ``group`` role feed of ``row``: ``"<group>:<app_label>.<model_name>.<pk>"``."""
    return f"{group}:{row.label}.{row.pk}"


def activity(action: ActionParts, foreign_id: str) -> dict[str, Any]:
    """The activity of ``action`` (see the module), as ``add_activity`` takes it."""
    extra = dict(action.data)
    if action.description is not None:
        extra["description"] = action.description
    verb = "_".join(action.verb.split())
    if verb != action.verb:
        extra[VERB_TEXT] = action.verb
    main = action.action_object or action.target or action.actor
    when = action.timestamp
    if timezone.is_naive(when):  # USE_TZ = False: the project's time zone
        when = timezone.make_aware(when, timezone.get_default_timezone())
    return {
        "actor": action.actor.ref,
        "verb": verb,
        "object": main.ref,
        "target": action.target.ref if action.target else None,
        "time": when,
        "foreign_id": foreign_id,
        "extra": extra,
    }


def feeds(action: ActionParts, settings: Settings) -> list[str]:
    """The feeds ``action``'s activity is published to, each as an activity of its own."""
    if not action.public:
        return [_checked(settings, role_feed(PRIVATE_GROUP, action.actor))]
    out = [_checked(settings, feed_for(action.actor.label, action.actor.pk, settings))]
    if action.target is not None:
        out.append(_checked(settings, role_feed(TARGET_GROUP, action.target)))
    if action.action_object is not None:
        out.append(_checked(settings, role_feed(OBJECT_GROUP, action.action_object)))
    return out


def object_feeds(row: Row, settings: Settings, *, actor_only: bool) -> list[str]:
    """The feeds a follow of ``row`` follows: its own, and with ``actor_only=False``
    its role feeds too."""
    out = [_checked(settings, feed_for(row.label, row.pk, settings))]
    if not actor_only:
        out += [_checked(settings, role_feed(g, row)) for g in (TARGET_GROUP, OBJECT_GROUP)]
    return out


def _checked(settings: Settings, feed: str) -> str:
    group = feed.partition(":")[0]
    if group not in settings.groups:
        raise ImproperlyConfigured(
            f"TIDINGS['groups'] has no {group!r} group, which {feed} belongs to: "
            f"add {groups_hint([group])}"
        )
    return feed


def groups_hint(missing: Iterable[str]) -> str:
    """What to add to ``TIDINGS["groups"]`` for the feed groups ``missing``."""
    wanted = sorted(set(missing))
    hints = [f'"{g}": {{}}' for g in wanted if g not in ACTSTREAM_GROUPS]
    if len(hints) < len(wanted):
        hints.insert(0, "**ACTSTREAM_GROUPS (from tidings.contrib.django.actstream)")
    return ", ".join(hints)
