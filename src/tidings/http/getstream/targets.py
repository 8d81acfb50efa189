"""``activity_to_targets`` over the Stream protocol: change the ``to`` of an
activity of the feed in the path, named by its ``foreign_id`` and ``time``,
with ``new_targets`` (the whole new list) or ``added_targets`` and
``removed_targets``. The feeds added receive the activity and those removed
lose it (:meth:`tidings.services.activities.ActivityService.retarget`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.core.errors import ActivityNotFound
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import MappingError, activity_out, recipient
from tidings.http.getstream.shapes import time_of


def to_targets(call: Call) -> tuple[int, dict[str, Any]]:
    body = call.body if isinstance(call.body, Mapping) else None
    if body is None:
        raise MappingError("must be a JSON object", field="body")
    foreign_id, when = body.get("foreign_id"), body.get("time")
    if not isinstance(foreign_id, str) or not foreign_id or when is None:
        raise MappingError("needs foreign_id and time: Stream's identity", field="foreign_id")
    new = _feeds(call, body, "new_targets")
    added, removed = _feeds(call, body, "added_targets"), _feeds(call, body, "removed_targets")
    if new is None and added is None and removed is None:
        raise MappingError(
            "give new_targets, or added_targets and/or removed_targets", field="new_targets"
        )
    if new is not None and (added is not None or removed is not None):
        raise MappingError(
            "give new_targets, or added_targets and removed_targets, not both", field="new_targets"
        )
    stored = _named(call, foreign_id, time_of(when, "time"))
    updated, _, _ = call.engine.activities.retarget(
        stored, to=new, add=added or (), remove=removed or ()
    )
    given = {"new_targets": new, "added_targets": added, "removed_targets": removed}
    answered: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    return 201, {"activity": activity_out(updated.to_dict()), **answered}


def _feeds(call: Call, body: Mapping[str, Any], name: str) -> list[str] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MappingError("must be a list of feed ids", field=name)
    feeds = [str(recipient(v)) for v in value]
    call.check_groups(feeds)
    return feeds


def _named(call: Call, foreign_id: str, when: Any) -> str:
    """The id of the activity of the call's feed with ``foreign_id`` and time ``when``."""
    try:
        found = call.engine.get_activity((call.feed, foreign_id))
    except ActivityNotFound:
        found = None
    if found is None or found.time != when:
        raise StreamError(
            Code.DOES_NOT_EXIST,
            f"no activity of {call.feed} with foreign_id {foreign_id[:64]!r} "
            f"and time {when.isoformat()}",
        )
    return found.id
