"""Stream's shapes of aggregated reads and activity changes: pure functions.

Groups. Stream returns an aggregated or notification feed as groups, each with
an ``id`` a client passes back (``mark_seen``, ``mark_read``, ``id_lt``). A
group's ``id`` here is tidings' aggregate key itself, with ``%`` and ``,``
escaped (``%25``, ``%2C``) so that a list of ids joined by commas, as the
clients send it, splits back into the keys exactly.

Changes. ``POST activity/`` sets and unsets custom fields by dotted paths;
``POST activities/`` replaces an activity's custom fields. Both name the
activity by ``id`` or by ``foreign_id`` and ``time``, Stream's identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidings.core.aggregation import Aggregate
from tidings.http.getstream.mapper import (
    ASSIGNED,
    RESERVED,
    MappingError,
    activity_out,
    format_time,
    from_uuid,
    origin,
    parse_time,
)

#: Fields an activity keeps for life in tidings: a replacement may not change
#: them. (``to`` is not compared: a client may send it with tokens, and where an
#: activity went is not changed by a replacement in Stream either.)
FIXED = ("actor", "verb", "object", "target")


def group_id(key: str) -> str:
    """The id a client sees for the aggregate ``key``."""
    return key.replace("%", "%25").replace(",", "%2C")


def group_key(group: str) -> str:
    """The aggregate key a group id stands for (see :func:`group_id`)."""
    return group.replace("%2C", ",").replace("%2c", ",").replace("%25", "%")


def group_keys(text: str) -> list[str]:
    """The keys of a comma-separated list of group ids (``mark_seen=id1,id2``)."""
    return [group_key(part) for part in text.split(",") if part]


def group_out(
    aggregate: Aggregate, notification: bool, feed: str, sources: Mapping[str, str]
) -> dict[str, Any]:
    """An aggregate of ``feed`` as Stream returns a group; ``sources``: the feed
    each activity was published in (its ``origin``, when not ``feed``)."""
    activities = [
        activity_out(a.to_dict(), origin(sources, a.id, feed)) for a in aggregate.activities
    ]
    out: dict[str, Any] = {
        "id": group_id(aggregate.key),
        "group": aggregate.key,
        "verb": aggregate.verb,
        "activity_count": aggregate.activity_count,
        "actor_count": aggregate.actor_count,
        "activities": activities,
        "created_at": format_time(aggregate.created_at),
        "updated_at": format_time(aggregate.updated_at),
    }
    if notification:
        out["is_seen"] = bool(aggregate.is_seen)
        out["is_read"] = bool(aggregate.is_read)
    return out


def identity(item: Mapping[str, Any], field: str) -> str | tuple[str, datetime]:
    """What a change names: an activity id (tidings'), or ``(foreign_id, time)``."""
    if item.get("id") is not None:
        if item.get("foreign_id") is not None:
            raise MappingError("give id or foreign_id and time, not both", field=field)
        return from_uuid(item["id"], f"{field}.id")
    foreign_id, when = item.get("foreign_id"), item.get("time")
    if not isinstance(foreign_id, str) or not foreign_id or when is None:
        raise MappingError("needs id, or foreign_id and time", field=field)
    return foreign_id, time_of(when, f"{field}.time")


def time_of(value: object, field: str) -> datetime:
    """A time a client sent (naive: UTC), as an aware datetime."""
    given = parse_time(value)
    try:
        when = datetime.fromisoformat(given) if isinstance(given, str) else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise MappingError(f"not a time: {str(value)[:64]!r}", field=field)
    return when


def partial_change(item: Mapping[str, Any], field: str) -> tuple[dict[str, Any], list[str]]:
    """``(set, unset)`` of one ``POST activity/`` change, by dotted paths."""
    changes, removals = item.get("set") or {}, item.get("unset") or []
    if not isinstance(changes, Mapping):
        raise MappingError("must be a JSON object", field=f"{field}.set")
    if not isinstance(removals, list) or not all(isinstance(p, str) for p in removals):
        raise MappingError("must be a list of paths", field=f"{field}.unset")
    both = set(changes) & set(removals)
    if both:
        raise MappingError(f"{sorted(both)[0]!r} is both set and unset", field=field)
    for path in (*changes, *removals):
        top = path.split(".", 1)[0]
        if top in (*RESERVED, *ASSIGNED):
            raise MappingError(
                f"{top!r} is not a custom field: tidings changes custom fields only",
                field=field,
            )
    return dict(changes), list(removals)


def replacement(
    stored: Mapping[str, Any], sent: Mapping[str, Any], field: str
) -> tuple[dict[str, Any], list[str]]:
    """``(set, unset)`` making the custom fields of ``stored`` (tidings' JSON
    shape) those of ``sent`` (Stream's): ``POST activities/``."""
    for name in FIXED:
        if name in sent and sent[name] != stored.get(name):
            raise MappingError(
                "differs from the stored activity's; tidings changes custom fields only",
                field=f"{field}.{name}",
            )
    custom = {k: v for k, v in sent.items() if k not in (*RESERVED, *ASSIGNED)}
    gone = [k for k in stored.get("extra") or {} if k not in custom]
    return custom, gone
