"""Reactions, users and collection entries in Stream's shapes, and the
references (``SU:``, ``SO:``, ``SR:``) enrichment resolves: pure functions.

A tidings reaction id is an id like an activity's, so it maps to a UUID as
an activity id does (:func:`tidings.http.getstream.mapper.to_uuid`). A
Stream user is a tidings user whose handle is its id and whose profile is
its ``data``; a collection entry is the object ``<collection>:<id>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tidings.core.users import StoredObject, User
from tidings.http.getstream.mapper import format_time, to_uuid


def stamp(value: object) -> str:
    """A time of a record (a datetime, its ISO text, or µs since the epoch) as Stream writes it."""
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, str):
        return format_time(datetime.fromisoformat(value))
    if isinstance(value, int):
        return format_time(datetime.fromtimestamp(value / 1_000_000, UTC))
    raise TypeError(f"not a time: {type(value).__name__}")


def reaction_out(
    doc: Mapping[str, Any], latest_children: Mapping[str, list[dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """A tidings reaction (its JSON shape, times parsed or not) as Stream returns it."""
    parent = doc.get("parent")
    return {
        "id": to_uuid(doc["id"]),
        "kind": doc["kind"],
        "activity_id": to_uuid(doc["activity_id"]),
        "user_id": doc["user"],
        "data": dict(doc.get("data") or {}),
        "parent": to_uuid(parent) if parent else "",
        "target_feeds": list(doc.get("to") or ()),
        "created_at": stamp(doc["created_at"]),
        "updated_at": stamp(doc["updated_at"]),
        "children_counts": dict(doc.get("children_counts") or {}),
        "latest_children": dict(latest_children or {}),
    }


def user_out(user: User, counts: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A tidings user as Stream's user; ``counts`` (``followers``, ``following``)
    add ``followers_count`` and ``following_count``."""
    out: dict[str, Any] = {
        "id": user.id,
        "data": dict(user.profile),
        "created_at": stamp(user.created_us),
        "updated_at": stamp(user.updated_us),
    }
    if counts is not None:
        out["followers_count"] = counts["followers"]
        out["following_count"] = counts["following"]
    return out


def entry_out(found: StoredObject) -> dict[str, Any]:
    """A tidings object as an entry of the collection named by its type."""
    return {
        "id": found.id,
        "collection": found.type,
        "foreign_id": found.ref,
        "data": dict(found.data),
        "created_at": stamp(found.created_us),
        "updated_at": stamp(found.updated_us),
    }


def reference(value: object) -> tuple[str, ...] | None:
    """What a reference names: ``("SU", user id)``, ``("SO", collection, id)``
    or ``("SR", reaction id)``; None when ``value`` is not one (a plain string
    stays as it is)."""
    if not isinstance(value, str) or value[:3] not in ("SU:", "SO:", "SR:"):
        return None
    kind, rest = value[:2], value[3:]
    if kind == "SO":
        collection, sep, entry = rest.partition(":")
        return (kind, collection, entry) if sep and collection and entry else None
    return (kind, rest) if rest else None
