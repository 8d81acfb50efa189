"""Reactions: likes, comments and replies to activities (and to each other).

A reaction belongs to an activity; a child reaction (a reply to a comment)
also names its parent, down to :data:`MAX_DEPTH` levels. Kinds configured
``unique`` (``like`` by default) are held once per user per activity (or
parent): adding one again returns the one held.

Validation is pure and names the limit broken; the canonical store keeps the
counts in the same transaction as the reactions they count.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import orjson

from tidings.core import ids
from tidings.core.activity import check_json, check_text
from tidings.core.errors import NotFound, ValidationError
from tidings.core.limits import MAX_REF_LENGTH, MAX_TO

#: A reply to a reply to a comment is as deep as reactions go.
MAX_DEPTH = 3
MAX_KIND_LENGTH = 64
#: The serialised ``data`` of one reaction.
MAX_DATA_BYTES = 10_240
#: Newest reactions per kind a page may carry per activity.
MAX_LATEST = 25

_KIND = re.compile(r"[a-z][a-z0-9_]{0,63}")


class ReactionNotFound(NotFound):
    """No reaction has the given id."""


class Include(StrEnum):
    """What a page's activities may carry about their reactions (``?reactions=``)."""

    #: ``reaction_counts``: exact counts per kind.
    COUNTS = "counts"
    #: ``latest_reactions``: the newest few of each kind.
    LATEST = "latest"
    #: ``own_reactions``: the reader's own, by kind.
    OWN = "own"


@dataclass(frozen=True, slots=True)
class Reaction:
    id: str
    activity_id: str
    kind: str
    user: str
    data: Mapping[str, Any] = field(default_factory=dict)
    #: The reaction this one answers; None for a reaction to the activity.
    parent: str | None = None
    #: 1 for a reaction to the activity, 2 for its child, up to MAX_DEPTH.
    depth: int = 1
    #: Feeds the reaction's notification activity went to.
    to: tuple[str, ...] = ()
    created_us: int = 0
    updated_us: int = 0
    #: Reactions to this one, per kind.
    children_counts: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "activity_id": self.activity_id,
            "kind": self.kind,
            "user": self.user,
            "data": dict(self.data),
            "parent": self.parent,
            "to": list(self.to),
            "created_at": reaction_time(self.created_us),
            "updated_at": reaction_time(self.updated_us),
            "children_counts": dict(self.children_counts),
        }

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict(), option=orjson.OPT_UTC_Z)


def reaction_time(us: int) -> datetime:
    """A reaction's time (stored in µs since the epoch), in UTC."""
    return datetime.fromtimestamp(us / 1_000_000, UTC)


@dataclass(frozen=True, slots=True)
class NewReaction:
    """A reaction as given, validated: the store gives it an id and a depth."""

    activity_id: str
    kind: str
    user: str
    data: Mapping[str, Any]
    to: tuple[str, ...]
    parent: str | None


def check_kind(kind: object, name: str = "kind") -> str:
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise ValidationError(
            f"must be 1-{MAX_KIND_LENGTH} of a-z, 0-9 and _, starting with a letter, "
            f"got {str(kind)[:64]!r}",
            field=name,
        )
    return kind


def check_reaction_id(value: object, name: str = "id") -> str:
    if not ids.is_valid(value):
        raise ValidationError(f"not a reaction id: {str(value)[:64]!r}", field=name)
    return str(value)


def check_user(user: object) -> str:
    if not isinstance(user, str) or not 1 <= len(user) <= MAX_REF_LENGTH:
        raise ValidationError(f"must be a string of 1-{MAX_REF_LENGTH} characters", field="user")
    if not user.strip():  # as an activity's actor: its notices name it so
        raise ValidationError("must not be blank", field="user")
    check_text(user, "user")
    return user


def check_data(data: object, name: str = "data") -> dict[str, Any]:
    """``data`` as stored: a JSON object of at most :data:`MAX_DATA_BYTES`."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValidationError("must be a JSON object", field=name)
    check_json(data, name)
    try:
        size = len(orjson.dumps(data))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ValidationError(f"must be JSON-serialisable: {exc}", field=name) from None
    if size > MAX_DATA_BYTES:
        raise ValidationError(
            f"is {size:,} bytes as JSON; the limit is {MAX_DATA_BYTES:,}", field=name
        )
    return dict(data)


def check_notice_extra(extra: object) -> dict[str, Any]:
    """Extra fields for a reaction's notification activity: a JSON object as
    small as a reaction's ``data``."""
    return check_data(extra, "notice_extra")


def validate_reaction(
    activity_id: object,
    kind: object,
    user: object,
    data: object = None,
    to: object = (),
    parent: object = None,
    *,
    check_feed: Any = None,
) -> NewReaction:
    """Check every input of a new reaction; ``check_feed`` checks each ``to`` feed."""
    if not ids.is_valid(activity_id):
        raise ValidationError(f"not an activity id: {str(activity_id)[:64]!r}", field="activity_id")
    if isinstance(to, str | bytes) or not isinstance(to, Sequence):
        raise ValidationError("must be a list of feed ids", field="to")
    if len(to) > MAX_TO:
        raise ValidationError(f"{len(to)} feeds; the limit is {MAX_TO}", field="to")
    for i, feed in enumerate(to):
        if check_feed is not None:
            try:
                check_feed(feed)
            except ValidationError as exc:
                raise ValidationError(exc.detail, field=f"to.{i}") from None
    return NewReaction(
        activity_id=str(activity_id),
        kind=check_kind(kind),
        user=check_user(user),
        data=check_data(data),
        to=tuple(dict.fromkeys(str(t) for t in to)),
        parent=None if parent is None else check_reaction_id(parent, "parent"),
    )


def parse_includes(raw: str | Sequence[str] | None) -> frozenset[Include]:
    """``"counts,latest,own"`` (or a list of the words) to what a page carries."""
    if raw is None:
        return frozenset()
    words = raw.split(",") if isinstance(raw, str) else list(raw)
    out: set[Include] = set()
    for word in words:
        word = word.strip()
        if not word:
            continue
        try:
            out.add(Include(word))
        except ValueError:
            allowed = ", ".join(i.value for i in Include)
            raise ValidationError(
                f"unknown value {word[:32]!r}; allowed: {allowed}", field="reactions"
            ) from None
    return frozenset(out)


#: The reader's reactions to an actor's activities weigh one each, a follow of
#: the actor's profile feed this much: following is a stronger statement than
#: one like.
FOLLOW_WEIGHT = 3.0
#: Half of the affinity scale: a reader with this much raw affinity to an actor
#: has affinity 0.5.
AFFINITY_HALF = 10.0


def affinity(reactions: int, follows: bool) -> float:
    """The reader's affinity to an actor, normalised to [0, 1): ``raw / (raw +
    AFFINITY_HALF)`` where raw is the reader's reactions to the actor's
    activities plus :data:`FOLLOW_WEIGHT` when the reader follows the actor.
    Saturating, so no single actor's fan can dominate a ranking without bound."""
    raw = max(0, reactions) + (FOLLOW_WEIGHT if follows else 0.0)
    return raw / (raw + AFFINITY_HALF)
