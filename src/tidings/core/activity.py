"""The activity: what happened, who did it, to what, and when.

Validation is pure and explicit about its limits; an activity that passes it
can be stored, serialised and delivered without further checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from tidings.core import ids
from tidings.core.errors import ValidationError
from tidings.core.limits import MAX_ACTIVITY_BYTES, MAX_REF_LENGTH, MAX_TO, MAX_VERB_LENGTH

#: Why a string holding half of a UTF-16 surrogate pair is refused.
LONE_SURROGATES = "must not contain lone surrogates (U+D800-U+DFFF): not valid Unicode text"

_FIELDS = ("actor", "verb", "object", "target", "time", "foreign_id", "to", "extra")


@dataclass(frozen=True, slots=True)
class NewActivity:
    """An activity as an application publishes it; tidings assigns ``id`` (and ``time`` if absent)."""

    actor: str
    verb: str
    object: str
    target: str | None = None
    time: datetime | str | None = None
    foreign_id: str | None = None
    to: Sequence[str] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Activity:
    """A stored activity. ``time`` is always timezone-aware UTC."""

    id: str
    actor: str
    verb: str
    object: str
    time: datetime
    target: str | None = None
    foreign_id: str | None = None
    to: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "actor": self.actor,
            "verb": self.verb,
            "object": self.object,
            "target": self.target,
            "time": self.time,
            "foreign_id": self.foreign_id,
            "to": list(self.to),
            "extra": dict(self.extra),
        }

    def to_json(self) -> bytes:
        """The stored form: compact JSON, time as ISO-8601 with ``Z``."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_UTC_Z)

    @classmethod
    def from_json(cls, raw: bytes | str) -> Activity:
        # Runs for every item of every page read: positional arguments, in
        # field order, are measurably cheaper than keywords here.
        d = orjson.loads(raw)
        return cls(
            d["id"],
            d["actor"],
            d["verb"],
            d["object"],
            datetime.fromisoformat(d["time"]),
            d["target"],
            d["foreign_id"],
            tuple(d["to"]),
            d["extra"],
        )

    def with_extra(self, extra: Mapping[str, Any]) -> Activity:
        """A copy with ``extra`` replaced, validated against the size limit."""
        updated = Activity(
            id=self.id,
            actor=self.actor,
            verb=self.verb,
            object=self.object,
            time=self.time,
            target=self.target,
            foreign_id=self.foreign_id,
            to=self.to,
            extra=_extra(extra),
        )
        _check_size(updated)
        return updated


def validate(
    data: NewActivity | Mapping[str, Any],
    *,
    now: datetime,
    check_feed: Any = None,
) -> Activity:
    """Check ``data`` against every rule and return the activity with a fresh id.

    ``now`` is used when ``time`` is absent. ``check_feed`` (optional) is called
    with each feed id in ``to`` and raises when it is not a valid feed.
    Naive datetimes are rejected: a time without an offset is ambiguous.
    """
    if isinstance(data, NewActivity):
        raw: Mapping[str, Any] = {name: getattr(data, name) for name in _FIELDS}
    elif isinstance(data, Mapping):
        unknown = sorted(set(data) - set(_FIELDS) - {"id"})
        if unknown:
            raise ValidationError(
                f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(_FIELDS)}",
                field=unknown[0],
            )
        raw = data
    else:
        raise ValidationError(f"an activity must be a mapping, got {type(data).__name__}")

    actor = _required(raw.get("actor"), "actor")
    verb = _verb(raw.get("verb"))
    obj = _required(raw.get("object"), "object")
    target = _optional(raw.get("target"), "target")
    foreign_id = _optional(raw.get("foreign_id"), "foreign_id")
    when = parse_time(raw.get("time"), now=now)
    to = _to(raw.get("to"), check_feed)
    extra = _extra(raw.get("extra"))
    ms = int(when.timestamp() * 1000)
    activity = Activity(
        id=ids.new_id(ms),
        actor=actor,
        verb=verb,
        object=obj,
        time=when,
        target=target,
        foreign_id=foreign_id,
        to=to,
        extra=extra,
    )
    _check_size(activity)
    return activity


def parse_time(value: object, *, now: datetime) -> datetime:
    """A timezone-aware UTC datetime from a datetime or an ISO-8601 string with an offset.

    Unix timestamps are refused, here and over HTTP: a bare number does not say
    its unit (seconds or milliseconds), and the string says its offset.
    """
    if value is None:
        return now.astimezone(UTC)
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise ValidationError(f"not an ISO-8601 time: {text[:64]!r}", field="time") from None
    if not isinstance(value, datetime):
        raise ValidationError(
            f"must be a datetime or an ISO-8601 string, got {type(value).__name__}", field="time"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            "naive time: give a timezone offset (e.g. 2024-05-01T12:00:00Z)", field="time"
        )
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00 is before datetime.min in UTC
        raise ValidationError("must be between 1970-01-01 and year 10889", field="time") from None
    ms = int(utc.timestamp() * 1000)
    if not 0 <= ms <= ids.MAX_MS:
        raise ValidationError("must be between 1970-01-01 and year 10889", field="time")
    return utc


def _optional(value: object, name: str) -> str | None:
    return None if value is None else _required(value, name)


def _required(value: object, name: str) -> str:
    if value is None:
        raise ValidationError("is required", field=name)
    if not isinstance(value, str):
        raise ValidationError(f"must be a string, got {type(value).__name__}", field=name)
    if not value.strip():
        raise ValidationError("must not be empty", field=name)
    check_text(value, name)
    if len(value) > MAX_REF_LENGTH:
        raise ValidationError(
            f"is {len(value)} characters; the limit is {MAX_REF_LENGTH}", field=name
        )
    return value


def check_text(value: str, field: str) -> None:
    """Refuse a string that some store cannot hold, so every store refuses it alike:
    NUL (PostgreSQL text cannot hold it) and lone surrogates (U+D800-U+DFFF, which
    JSON strings can spell but UTF-8 cannot encode)."""
    if "\x00" in value:
        raise ValidationError("must not contain NUL characters", field=field)
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValidationError(LONE_SURROGATES, field=field) from None


def check_json(value: Mapping[str, Any], field: str) -> None:
    """Refuse what JSON cannot carry as given, naming the path of the first bad value
    (``extra.a.0``): a number that is not finite (NaN, infinities, and 1e999, which
    overflows to infinity; stored, each would become null), a key that is not a
    string, and a string (key or value) that :func:`check_text` refuses."""
    # Iterative: deep nesting cannot exhaust Python's stack here; the round trip
    # through orjson that follows refuses it with its own depth limit.
    stack: list[tuple[object, str]] = [(value, field)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            check_text(item, path)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValidationError(
                    f"must be a finite number, got {item!r} (JSON has no NaN or Infinity)",
                    field=path,
                )
        elif isinstance(item, Mapping):
            children: list[tuple[object, str]] = []
            for key, child in item.items():
                _check_key(key, path)
                children.append((child, f"{path}.{key}"))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(child, f"{path}.{i}") for i, child in enumerate(item)]))


def _check_key(key: object, path: str) -> None:
    # A bad key is reported at its object's path: the key itself may not be
    # printable in an error (a lone surrogate cannot be encoded as JSON).
    if not isinstance(key, str):
        raise ValidationError(f"keys must be strings, got {type(key).__name__}", field=path)
    try:
        check_text(key, path)
    except ValidationError as exc:
        raise ValidationError(f"key {key[:64]!r} {exc.detail}", field=path) from None


def _verb(value: object) -> str:
    verb = _required(value, "verb")
    if len(verb) > MAX_VERB_LENGTH:
        raise ValidationError(
            f"is {len(verb)} characters; the limit is {MAX_VERB_LENGTH}", field="verb"
        )
    if any(c.isspace() for c in verb):
        raise ValidationError("must not contain whitespace", field="verb")
    return verb


def _to(value: object, check_feed: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValidationError("must be a list of feed ids", field="to")
    if len(value) > MAX_TO:
        raise ValidationError(f"has {len(value)} feeds; the limit is {MAX_TO}", field="to")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ValidationError("must be a list of feed ids (strings)", field="to")
        if check_feed is not None:
            try:
                check_feed(item)
            except ValidationError as exc:
                raise ValidationError(exc.detail, field="to") from None
        if item not in out:
            out.append(item)
    return tuple(out)


def _extra(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"must be a JSON object, got {type(value).__name__}", field="extra")
    check_json(value, "extra")
    try:
        # A round trip proves it is JSON and detaches it from the caller's objects.
        result: dict[str, Any] = orjson.loads(orjson.dumps(value))
    except TypeError as exc:
        raise ValidationError(f"is not JSON-serialisable: {exc}", field="extra") from None
    return result


def _check_size(activity: Activity) -> None:
    size = len(activity.to_json())
    if size > MAX_ACTIVITY_BYTES:
        raise ValidationError(
            f"serialised activity is {size} bytes; the limit is {MAX_ACTIVITY_BYTES}",
            field="extra",
        )
