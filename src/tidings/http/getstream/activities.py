"""Activities over the Stream protocol, by identity rather than by feed: get
by ids or by ``foreign_ids`` + ``timestamps`` (``GET activities/``), replace
custom fields (``POST activities/``), change them by dotted paths
(``POST activity/``).

Stream names an activity by its id or by its ``foreign_id`` and ``time``;
tidings keeps a ``foreign_id`` unique per feed, so a ``foreign_id`` and
``time`` may name one activity in each of several feeds: a change applies to
every one of them, and a get returns every one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidings.core.activity import Activity
from tidings.core.dotted import apply
from tidings.core.errors import NotFound
from tidings.core.limits import MAX_BATCH, MAX_PAGE_SIZE
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import MappingError, activity_out, from_uuid
from tidings.http.getstream.shapes import identity, partial_change, replacement, time_of


def get(call: Call) -> tuple[int, dict[str, Any]]:
    """The activities of ``ids``, or of ``foreign_ids`` with ``timestamps``
    (lists in the same order): those that exist, in the order asked."""
    found: list[Activity] = []
    if "ids" in call.query:
        if "foreign_ids" in call.query:
            raise MappingError("give ids or foreign_ids, not both", field="ids")
        for i, text in enumerate(_listed(call, "ids")):
            try:
                found.append(call.engine.get_activity(from_uuid(text, f"ids.{i}")))
            except NotFound:
                continue
    else:
        foreign_ids, times = _listed(call, "foreign_ids"), _listed(call, "timestamps")
        if len(foreign_ids) != len(times):
            raise MappingError(
                f"{len(foreign_ids)} foreign_ids but {len(times)} timestamps", field="timestamps"
            )
        for i, (fid, text) in enumerate(zip(foreign_ids, times, strict=True)):
            found += call.engine.activities.find(fid, time_of(text, f"timestamps.{i}"))
    return 200, {"results": [activity_out(a.to_dict()) for a in found]}


def _listed(call: Call, name: str) -> list[str]:
    values = [v for v in call.query.get(name, "").split(",") if v]
    if not 1 <= len(values) <= MAX_PAGE_SIZE:
        raise MappingError(f"must list 1 to {MAX_PAGE_SIZE} values", field=name)
    return values


def replace(call: Call) -> tuple[int, dict[str, Any]]:
    """Each activity sent (named by ``foreign_id`` and ``time``) takes the custom
    fields sent, losing those not sent. Every activity named must exist, and
    all are checked before any is changed."""
    items = _items(call.body, "activities")
    planned: list[tuple[Activity, dict[str, Any], list[str]]] = []
    for i, item in enumerate(items):
        field = f"activities.{i}"
        foreign_id, when = item.get("foreign_id"), item.get("time")
        if not isinstance(foreign_id, str) or not foreign_id or when is None:
            raise MappingError("needs foreign_id and time: Stream's identity", field=field)
        for stored in _named(call, (foreign_id, time_of(when, f"{field}.time")), field):
            planned.append((stored, *replacement(stored.to_dict(), item, field)))
    for stored, changes, gone in planned:
        call.engine.update_activity(stored.id, set=changes, unset=gone)
    return 201, {}


def update(call: Call) -> tuple[int, dict[str, Any]]:
    """Changes by dotted paths (``set``, ``unset``) to activities named by ``id``
    or by ``foreign_id`` and ``time``; all are checked before any is made."""
    planned: list[tuple[Activity, dict[str, Any], list[str]]] = []
    for i, item in enumerate(_items(call.body, "changes")):
        field = f"changes.{i}"
        changes, removals = partial_change(item, field)
        for stored in _named(call, identity(item, field), field):
            apply(stored.extra, changes, removals)  # (refused here, before any write)
            planned.append((stored, changes, removals))
    updated = [
        call.engine.update_activity(stored.id, set=changes, unset=removals, paths=True)
        for stored, changes, removals in planned
    ]
    return 201, {"activities": [activity_out(a.to_dict()) for a in updated]}


def _items(body: object, name: str) -> list[Mapping[str, Any]]:
    items = body.get(name) if isinstance(body, Mapping) else None
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
        raise MappingError(f"must be a list of 1 to {MAX_BATCH} objects", field=name)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise MappingError(
                f"must be a JSON object, got {type(item).__name__}", field=f"{name}.{i}"
            )
    return items


def _named(call: Call, ref: str | tuple[str, datetime], field: str) -> list[Activity]:
    """The activities ``ref`` names: one by id, or each with the foreign_id and time."""
    if isinstance(ref, str):
        try:
            return [call.engine.get_activity(ref)]
        except NotFound:
            raise StreamError(Code.DOES_NOT_EXIST, f"{field}: no activity {ref}") from None
    found = call.engine.activities.find(*ref)
    if not found:
        raise StreamError(
            Code.DOES_NOT_EXIST,
            f"{field}: no activity with foreign_id {ref[0][:64]!r} and time {ref[1].isoformat()} "
            "(tidings creates activities by adding them to a feed)",
        )
    return found
