"""Aggregation (pure): which aggregate an activity joins, and aggregate positions.

An aggregated feed holds *aggregates* of activities ("bob liked 3 photos").
The aggregate an activity joins in a feed is its key template rendered over the
activity, e.g. ``{actor}:{verb}:{time:%Y-%m-%d}``. Aggregates are ordered by
the time (ms) of their newest activity, then by aggregate key, so an aggregate's
position ``(ms, key)`` is a total order and a cursor can name one exactly.
(Milliseconds rather than whole ids so that Redis can keep the order in a
sorted set's scores and move an aggregate with one ZADD.)

Pages walk a *snapshot*: the first page records the newest activity id then
in the feed, and later pages place each aggregate where it stood at that
instant, by its newest member not after the snapshot. An aggregate that receives
an activity while a reader pages therefore neither jumps over the cursor
(and is skipped) nor jumps back under it (and is repeated); aggregates created
after the snapshot wait for the next first page. (An activity backdated
into an older aggregate moves that aggregate without crossing the snapshot; such an
aggregate may be shown twice or not at all in that walk.)
"""

from __future__ import annotations

import bisect
import hashlib
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from tidings.core import ids
from tidings.core.activity import Activity, check_text
from tidings.core.errors import InvalidCursor, ValidationError
from tidings.core.limits import MAX_AGGREGATE_KEY_LENGTH

#: Distinct actors counted exactly per aggregate on every store. Past this the
#: Redis store estimates with a HyperLogLog (0.81% standard error) instead of
#: keeping a counter per actor; SQL and memory stay exact.
EXACT_ACTORS = 64

_FIELDS = ("actor", "verb", "object", "target", "time")


class TemplateError(ValueError):
    """A key template names an unknown field or is malformed."""


@dataclass(frozen=True, slots=True)
class KeyTemplate:
    """A parsed `aggregation` template: renders the aggregate key an activity joins."""

    source: str
    parts: tuple[tuple[str, str | None, str | None], ...]  # (literal, field, format)

    @classmethod
    def parse(cls, template: str) -> KeyTemplate:
        if not isinstance(template, str) or not template:
            raise TemplateError("an aggregation template must be a non-empty string")
        try:
            parsed = list(string.Formatter().parse(template))
        except ValueError as exc:
            raise TemplateError(f"malformed template {template!r}: {exc}") from None
        parts: list[tuple[str, str | None, str | None]] = []
        for literal, field, spec, conversion in parsed:
            if conversion:
                raise TemplateError(f"conversions (!{conversion}) are not supported")
            if field is not None:
                if field not in _FIELDS and not re.fullmatch(r"extra\.[A-Za-z0-9_]{1,64}", field):
                    allowed = ", ".join(f"{{{f}}}" for f in _FIELDS)
                    raise TemplateError(
                        f"unknown field {{{field}}} in {template!r}; allowed: {allowed}, "
                        "{extra.NAME}"
                    )
                if spec and field != "time":
                    raise TemplateError(f"only {{time}} takes a format, not {{{field}}}")
            parts.append((literal, field, spec or None))
        if all(field is None for _, field, _ in parts):
            raise TemplateError(
                f"template {template!r} names no field: every activity would share one aggregate"
            )
        return cls(template, tuple(parts))

    def render(self, activity: Activity) -> str:
        out: list[str] = []
        for literal, field, spec in self.parts:
            out.append(literal)
            if field is not None:
                out.append(_field(activity, field, spec))
        return shorten("".join(out))


def _field(activity: Activity, field: str, spec: str | None) -> str:
    if field == "time":
        when: datetime = activity.time
        return when.strftime(spec) if spec else when.isoformat()
    if field.startswith("extra."):
        value: Any = activity.extra.get(field[6:])
        if value is None:
            return ""
        return value if isinstance(value, str) else orjson.dumps(value).decode()
    value = getattr(activity, field)
    return "" if value is None else str(value)


def shorten(key: str) -> str:
    """``key``, or a digest of it when it is longer than the limit."""
    if len(key) <= MAX_AGGREGATE_KEY_LENGTH:
        return key
    return "#" + hashlib.sha256(key.encode()).hexdigest()


def check_aggregate_keys(aggregates: object, field: str = "groups") -> list[str]:
    """``aggregates`` as a list, when each is a key some aggregate could have: a string
    that every store can hold (:func:`~tidings.activity.check_text`), at most
    :data:`MAX_AGGREGATE_KEY_LENGTH` long (:func:`shorten` makes every key so)."""
    if isinstance(aggregates, str) or not isinstance(aggregates, Sequence):
        raise ValidationError("must be a list of aggregate keys", field=field)
    for i, key in enumerate(aggregates):
        if not isinstance(key, str):
            raise ValidationError(
                "must be a list of aggregate keys (strings)", field=f"{field}.{i}"
            )
        check_text(key, f"{field}.{i}")
        if len(key) > MAX_AGGREGATE_KEY_LENGTH:
            raise ValidationError(
                f"is {len(key)} characters; the limit is {MAX_AGGREGATE_KEY_LENGTH}",
                field=f"{field}.{i}",
            )
    return list(aggregates)


def actor_tag(actor: str) -> bytes:
    """Eight bytes standing for an actor where stores count distinct actors."""
    return hashlib.blake2b(actor.encode(), digest_size=8).digest()


@dataclass(frozen=True, slots=True)
class Member:
    """An activity as an aggregated feed stores it: its id, the key of the aggregate it
    joins and its actor."""

    id: str
    aggregate: str
    actor: str


def member(template: KeyTemplate, activity: Activity) -> Member:
    return Member(activity.id, template.render(activity), activity.actor)


@dataclass(frozen=True, slots=True)
class AggregateCap:
    """Limits of an aggregated feed group: aggregates per feed, activities shown per aggregate."""

    max_length: int
    max_aggregate_size: int


@dataclass(frozen=True, slots=True)
class StoredAggregate:
    """An aggregate as a store reads it.

    ``activity_ids`` are the newest ``max_aggregate_size``, newest first.
    ``position`` is the ms the aggregate is ordered by in this page (of its
    newest member as of the page's snapshot).
    """

    key: str
    activity_ids: list[str]
    activity_count: int
    actor_count: int
    oldest: str
    newest: str
    position: int
    is_seen: bool
    is_read: bool


@dataclass(frozen=True, slots=True)
class StoredAggregatePage:
    """A page of aggregates from a store, the snapshot it was read at, and feed counts."""

    aggregates: list[StoredAggregate]
    snapshot: str | None
    unseen: int
    unread: int
    docs: dict[str, bytes]


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where an aggregate stands: ``(ms of its newest activity, key)``, compared as a pair."""

    ms: int
    key: str


def place(members: Sequence[str], key: str, snapshot: str | None) -> Position | None:
    """Where an aggregate with sorted ``members`` stood at ``snapshot`` (None: not yet there)."""
    i = len(members) if snapshot is None else bisect.bisect_right(members, snapshot)
    return Position(ids.id_ms(members[i - 1]), key) if i else None


# -- cursors --------------------------------------------------------------------

_MS_DIGITS = 12  # 48 bits of milliseconds in hex


def encode_position(snapshot: str, after: Position) -> str:
    """The text an aggregate cursor signs: snapshot id, position ms (hex), then the key."""
    return f"{snapshot}{after.ms:0{_MS_DIGITS}x}{after.key}"


def decode_position(text: str) -> tuple[str, Position]:
    snapshot, ms, key = text[:32], text[32 : 32 + _MS_DIGITS], text[32 + _MS_DIGITS :]
    if (
        not ids.is_valid(snapshot)
        or not re.fullmatch(r"[0-9a-f]{12}", ms)
        or len(key) > MAX_AGGREGATE_KEY_LENGTH
    ):
        raise InvalidCursor("cursor is malformed", field="cursor")
    return snapshot, Position(int(ms, 16), key)


# -- what reads return ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Aggregate:
    """An aggregate of an aggregated or notification feed, hydrated.

    ``key`` is the aggregate's key (``"group"`` in :meth:`to_dict` and over HTTP).
    """

    key: str
    verb: str
    activity_count: int
    actor_count: int
    activities: list[Activity]
    created_at: datetime
    updated_at: datetime
    #: None for aggregated feeds; notification feeds track both.
    is_seen: bool | None = None
    is_read: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group": self.key,
            "verb": self.verb,
            "activity_count": self.activity_count,
            "actor_count": self.actor_count,
            "activities": [a.to_dict() for a in self.activities],
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if self.is_seen is not None:
            out["is_seen"] = self.is_seen
            out["is_read"] = self.is_read
        return out


@dataclass(frozen=True, slots=True)
class AggregatePage:
    """A page of aggregates, the cursor to the next, and (notification feeds) the
    feed's unseen and unread aggregate counts."""

    results: list[Aggregate]
    next: str | None = None
    unseen: int | None = None
    unread: int | None = None
    #: The feed is being rebuilt after its owner was idle: it may show only
    #: part of its aggregates until then. Over HTTP: 206.
    regenerating: bool = False


def ms_time(activity_id: str) -> datetime:
    """The time an id carries, as an aware UTC datetime."""
    return datetime.fromtimestamp(ids.id_ms(activity_id) / 1000, UTC)


__all__ = [
    "EXACT_ACTORS",
    "Aggregate",
    "AggregateCap",
    "AggregatePage",
    "KeyTemplate",
    "Member",
    "Position",
    "StoredAggregate",
    "StoredAggregatePage",
    "TemplateError",
    "actor_tag",
    "check_aggregate_keys",
    "member",
    "place",
    "shorten",
]
