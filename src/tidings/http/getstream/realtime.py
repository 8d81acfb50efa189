"""Stream's realtime shapes: channel names and messages (pure functions, no I/O).

A client subscribes to ``/site-<app id>-feed-<slug><id>``: the feed's slug and
id written together, without the colon, so the name alone is ambiguous when
one group's name starts with another's. The token the subscription is signed
with settles it: a user token reaches its own feeds only, so the id is its
user's; a server token names one group, or the name must fit exactly one.

tidings' live events become Stream's realtime message, one per event:
``new`` holds an added activity (in the shape reads return), ``deleted`` the
id of a removed one. An aggregated or notification feed's channel carries
activities too, not groups, as Stream sends them: each new one with the
``group`` it joined (from ``group.updated``: the members it ``added``), and
``deleted`` the ids it ``withdrawn``. ``deleted_foreign_ids`` holds
``[foreign_id, time]`` of each removed activity that has a foreign_id.

A notification feed marked seen or read (``counts.changed`` with ``marked``)
sends ``mark_seen`` / ``mark_read``: ``"all"``, or the ids of the groups
marked (a mark read marks them seen too, so it sends both). Counts changed by
a delivery have no message: Stream's clients count the activities of ``new``
and ``deleted``.
Stream's app id means nothing to tidings (every key reaches the same feeds):
it is read from the channel and sent back as given.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from tidings.core.events import Event, EventType
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import activity_out, origin, time_out, to_uuid
from tidings.http.getstream.shapes import group_id

_CHANNEL = re.compile(r"/site-([A-Za-z0-9_]{1,64})-feed-([A-Za-z0-9_.@=+-]{2,300})")
#: The live events a Stream client is sent (counts only when a mark made
#: them); the rest (reactions, updates) have no place in Stream's realtime message.
FORWARDED = (
    EventType.ACTIVITY_ADDED,
    EventType.ACTIVITY_REMOVED,
    EventType.AGGREGATE_UPDATED,
    EventType.COUNTS_CHANGED,
)


class ChannelError(ValueError):
    """A channel this endpoint does not serve (the message says why)."""


def parse_channel(channel: object, groups: Collection[str], user_id: str | None) -> tuple[str, str]:
    """``(app id, feed id)`` of a subscription's channel.

    ``groups`` are the groups the api key reaches; ``user_id`` is the user of a
    user token (None: a server token)."""
    match = _CHANNEL.fullmatch(channel) if isinstance(channel, str) else None
    if match is None:
        shown = str(channel)[:80]
        raise ChannelError(f"not a feed channel (/site-<app id>-feed-<slug><id>): {shown!r}")
    app_id, together = match[1], match[2]
    fits = [g for g in groups if together.startswith(g) and len(together) > len(g)]
    if user_id is not None:
        fits = [g for g in fits if together[len(g) :] == user_id]
        if not fits:
            raise StreamError(
                Code.NOT_ALLOWED,
                f"a user token for {user_id!r} may only subscribe to its own feeds' "
                f"channels, and {channel} is none of them",
            )
    if len(fits) != 1:
        why = "no feed group" if not fits else f"groups {', '.join(sorted(fits))}"
        raise ChannelError(
            f"channel {channel} fits {why} of this api key: it names the feed "
            "as <slug><id>, which must fit exactly one"
        )
    slug = fits[0]
    return app_id, f"{slug}:{together[len(slug) :]}"


def channel_of(app_id: str, feed: str) -> str:
    """The channel a client subscribes to for ``feed``."""
    return f"/site-{app_id}-feed-{feed.replace(':', '', 1)}"


def new_ids(events: Sequence[Event]) -> list[str]:
    """The ids of the activities the messages of ``events`` carry whole (whose
    ``origin`` they need)."""
    out: list[str] = []
    for event in events:
        if event.type == EventType.ACTIVITY_ADDED:
            out.append(event.data["id"])
        elif event.type == EventType.AGGREGATE_UPDATED:
            out.extend(event.data.get("added", ()))
    return out


def message(
    event: Event, app_id: str, now: datetime, sources: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """The realtime message for a live event (None: not one Stream sends).

    ``sources``: the feed each activity was published in, by id (its
    ``origin`` when that is not the event's feed)."""
    known = sources or {}
    data = event.data
    new: list[dict[str, Any]] = []
    deleted: list[str] = []
    foreign: list[list[str]] = []
    if event.type == EventType.ACTIVITY_ADDED:
        new.append(activity_out(data, origin(known, data["id"], event.feed)))
    elif event.type == EventType.ACTIVITY_REMOVED:
        deleted.append(to_uuid(data["id"]))
        if data.get("foreign_id") is not None:
            foreign.append([data["foreign_id"], time_out(data["time"])])
    elif event.type == EventType.AGGREGATE_UPDATED:
        added = set(data.get("added", ()))
        for member in data.get("activities", ()):
            if member["id"] in added:
                shown = activity_out(member, origin(known, member["id"], event.feed))
                new.append({**shown, "group": data["group"]})
        deleted.extend(to_uuid(i) for i in data.get("withdrawn", ()))
        foreign.extend([f, time_out(t)] for f, t in data.get("withdrawn_foreign_ids", ()))
        if not new and not deleted:
            return None  # (a change that adds and removes no activity here)
    elif event.type == EventType.COUNTS_CHANGED and data.get("marked"):
        return {**_message(event, app_id, now), **_marks(data["marked"])}
    else:
        return None
    return _message(event, app_id, now, new, deleted, foreign)


def _message(
    event: Event,
    app_id: str,
    now: datetime,
    new: list[dict[str, Any]] | None = None,
    deleted: list[str] | None = None,
    foreign: list[list[str]] | None = None,
) -> dict[str, Any]:
    return {
        "deleted": deleted or [],
        "deleted_foreign_ids": foreign or [],
        "new": new or [],
        "feed": event.feed,
        "app_id": app_id,
        "published_at": now.isoformat(),
    }


def _marks(marked: Mapping[str, Any]) -> dict[str, Any]:
    """``mark_seen`` / ``mark_read`` of a ``counts.changed``'s ``marked``: "all",
    or the marked groups' ids as Stream's reads show them."""
    out: dict[str, Any] = {}
    for name in ("seen", "read"):
        value = marked.get(name)
        if value is True:
            out[f"mark_{name}"] = "all"
        elif isinstance(value, list):
            out[f"mark_{name}"] = [group_id(key) for key in value]
    return out
