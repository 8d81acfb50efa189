"""Stream's v2 shapes to tidings' and back: pure functions, no I/O.

Ids. A tidings activity id is 128 bits (48 of milliseconds, 80 random) written
as 32 hex characters; Stream's clients expect a UUID. The UUID is the same 128
bits in the 8-4-4-4-12 form, so the mapping is exact both ways and keeps the
order: UUIDs sort (as text) by time just as the ids do, and ``id_lt`` pages by
them. The version and variant bits are whatever the id holds: they are not
RFC 9562 UUIDs of any version, which no client checks.

Times. Stream sends and returns naive UTC (``2024-05-01T12:00:00.000000``);
tidings refuses a time without an offset, so a naive one is read as UTC here.

Activities. Stream puts custom fields at the top level of an activity; tidings
keeps them under ``extra``. A ``to`` entry may carry a token after a space
(``"user:2 <jwt>"``), which is dropped: rights are the request's token's.
An activity read from a feed other than the one it was published in (reached
by a follow or by ``to``) names that feed in ``origin``; null where it was
published.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tidings.core import ids
from tidings.core.results import Follow

#: The fields an activity has in both protocols; every other key is custom.
RESERVED = ("actor", "verb", "object", "target", "time", "foreign_id", "to")
#: What Stream adds to an activity it returns; ignored when sent back in.
ASSIGNED = ("id", "origin", "duration")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
#: Has an offset: ``Z`` or ``±hh:mm`` (``±hhmm``, ``±hh``) after the time of day.
_OFFSET = re.compile(r"(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$")


class MappingError(ValueError):
    """A value Stream's protocol allows in form but tidings cannot take; ``field`` names it."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def to_uuid(activity_id: str) -> str:
    """A tidings activity id as the UUID Stream's clients see."""
    h = activity_id
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def from_uuid(text: str, field: str = "id") -> str:
    """The tidings activity id a UUID stands for (any case, hyphenated)."""
    if not isinstance(text, str) or not _UUID.fullmatch(text):
        shown = text[:64] if isinstance(text, str) else type(text).__name__
        raise MappingError(f"not an activity id (a UUID): {shown!r}", field=field)
    return text.replace("-", "").lower()


def format_time(when: datetime) -> str:
    """A time as Stream writes it: naive UTC with microseconds."""
    # (isoformat, not strftime: a page formats one per activity, and strftime
    # was a fifth of a Stream page read's time on the server)
    return when.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


def time_out(when: datetime | str) -> str:
    """:func:`format_time` of a time, or of its stored text (ISO-8601 in UTC)."""
    if isinstance(when, str):
        if len(when) == 27 and when[19] == "." and when[26] == "Z":
            # The stored form of a time with microseconds (orjson, UTC, ``Z``) is
            # Stream's text and a ``Z``: no parse and format per activity of a page.
            return when[:26]
        when = datetime.fromisoformat(when)
    return format_time(when)


def parse_time(value: object) -> object:
    """A time a Stream client sent, for tidings: a naive ISO-8601 string is UTC.

    Anything else goes through as it is, for tidings' validation to judge."""
    if isinstance(value, str) and "T" in value and not _OFFSET.search(value):
        return value + "+00:00"
    return value


def recipient(entry: object) -> object:
    """A ``to`` entry without the token a client may append after a space."""
    if isinstance(entry, str):
        return entry.split(" ", 1)[0]
    return entry


def activity_in(data: object, field: str = "activity") -> dict[str, Any]:
    """A Stream activity as tidings publishes it: custom fields into ``extra``."""
    if not isinstance(data, Mapping):
        raise MappingError(f"must be a JSON object, got {type(data).__name__}", field=field)
    out: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        if key in RESERVED:
            out[key] = value
        elif key not in ASSIGNED:
            extra[key] = value
    if "time" in out:
        out["time"] = parse_time(out["time"])
    to = out.get("to")
    if to is not None:
        if not isinstance(to, list):
            raise MappingError(f"must be a list of feed ids, got {type(to).__name__}", field="to")
        out["to"] = [recipient(entry) for entry in to]
    if extra:
        out["extra"] = extra
    return out


def activity_out(doc: Mapping[str, Any], origin: str | None = None) -> dict[str, Any]:
    """A tidings activity (its JSON shape, time parsed or not) as Stream returns it.

    Custom fields come first so that a reserved name among them (an ``extra``
    key of an activity published through tidings' own API) cannot shadow the
    activity's own field."""
    # (one dict display, not a dict and an update: this runs for every
    # activity of every page)
    return {
        **(doc.get("extra") or {}),
        "id": to_uuid(doc["id"]),
        "actor": doc["actor"],
        "verb": doc["verb"],
        "object": doc["object"],
        "target": doc.get("target"),
        "time": time_out(doc["time"]),
        "foreign_id": doc.get("foreign_id"),
        "origin": origin,
        "to": list(doc.get("to") or ()),
    }


def origin(sources: Mapping[str, str], activity_id: str, feed: str) -> str | None:
    """Stream's ``origin`` of an activity read in ``feed``, given the feed each
    activity was published in (:meth:`ActivityService.sources`)."""
    source = sources.get(activity_id)
    return None if source == feed else source


def follow_out(row: Follow) -> dict[str, Any]:
    """A follow as Stream lists it."""
    created = format_time(datetime.fromtimestamp(row.created_ms / 1000, UTC))
    return {
        "feed_id": row.follower,
        "target_id": row.source,
        "created_at": created,
        "updated_at": created,
    }


def id_bounds(params: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``(before, after)`` from ``id_lt``/``id_lte``/``id_gt``/``id_gte``: a page
    holds ids below ``before`` and above ``after`` (tidings ids, exclusive)."""
    upper = [name for name in ("id_lt", "id_lte") if name in params]
    lower = [name for name in ("id_gt", "id_gte") if name in params]
    for names in (upper, lower):
        if len(names) > 1:
            raise MappingError("give one of them, not both", field=" and ".join(names))
    before = after = None
    if upper:
        before = from_uuid(params[upper[0]], upper[0])
        if upper[0] == "id_lte":
            # The smallest id above it (None: it is the largest id there is).
            before = ids.after(before) if before != "f" * ids.ID_LENGTH else None
    if lower:
        after = from_uuid(params[lower[0]], lower[0])
        if lower[0] == "id_gte":
            # The largest id below it; an id of all zeros has none (no bound).
            after = f"{int(after, 16) - 1:032x}" if int(after, 16) else None
    return before, after


def duration(seconds: float) -> str:
    """Time taken, as Stream reports it in every response."""
    return f"{seconds * 1000:.2f}ms"


def integer(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter, from ``low`` to ``high``."""
    text = params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise MappingError(f"must be an integer from {low} to {high:,}", field=name)
    return value


def flag(params: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter as clients send one (``true``, ``True``, ``1``)."""
    text = params.get(name, "").lower()
    if text in ("", "0", "false"):
        return False
    if text in ("1", "true"):
        return True
    raise MappingError(f"must be true or false, got {text[:16]!r}", field=name)
