"""Changing an activity's ``to`` after it was published: the feeds added
receive it, the feeds removed lose it, and nothing else moves.

The activity's document and its addressed rows change in one transaction
(rebuilds and access read them); the writes into the feeds follow the commit,
as a removal from one feed does (:meth:`ActivityWrites._hide`): a write lost
there is put right by a rebuild of that feed from the canonical store.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidings.core.activity import Activity
from tidings.core.errors import ActivityNotFound, ValidationError
from tidings.core.fanout import OutboxKind
from tidings.core.limits import MAX_TO
from tidings.writes.activities import ActivityWrites


def retarget(
    writes: ActivityWrites,
    activity_id: str,
    *,
    to: Sequence[str] | None = None,
    add: Sequence[str] = (),
    remove: Sequence[str] = (),
) -> tuple[Activity, list[str], list[str]]:
    """Replace the activity's ``to`` with ``to``, or add ``add`` to it and take
    ``remove`` from it; returns the activity as stored and the feeds it was
    delivered to and retracted from."""
    activity_id = writes.get(activity_id).id  # (an id checked, the activity found)
    if to is not None and (add or remove):
        raise ValidationError("give the new to, or feeds to add and remove, not both", field="to")
    new, add, remove = _checked(writes, to, add, remove)
    if set(add) & set(remove):
        raise ValidationError("a feed cannot be both added and removed", field="to")

    def change(current: Activity) -> tuple[str, ...]:
        if new is not None:
            result = new
        else:
            kept = [f for f in current.to if f not in remove]
            result = (*kept, *[f for f in add if f not in kept])
        if len(result) > MAX_TO:
            raise ValidationError(
                f"would have {len(result)} feeds; the limit is {MAX_TO}", field="to"
            )
        return tuple(result)

    found = writes.canonical.activities.retarget(activity_id, change)
    if found is None:
        raise ActivityNotFound(f"activity {activity_id} was removed meanwhile")
    stored, updated, version, source, keys = found
    keys = keys or writes.deliverer.aggregate_keys(updated)
    added = [f for f in updated.to if f not in stored.to and f != source]
    gone = [f for f in stored.to if f not in updated.to and f != source]
    # A feed that follows the source holds the activity by that follow: it keeps
    # it (unless the activity was placed in feeds: then no follower holds it).
    held = gone and not writes.canonical.placements.is_placed(updated.id)
    followers = set(writes.canonical.follows.followers_among(source, gone)) if held else set()
    retracted = [f for f in gone if f not in followers]
    writes.cache.put_many({updated.id: (version, updated.to_json())})
    if added:
        writes.deliverer.write(OutboxKind.DELIVER, added, updated, keys)
    if retracted:
        writes.deliverer.write(OutboxKind.RETRACT, retracted, updated, keys)
    writes.canonical.users.forget([*added, *retracted])
    return updated, added, retracted


def _checked(
    writes: ActivityWrites,
    to: Sequence[str] | None,
    add: Sequence[str],
    remove: Sequence[str],
) -> tuple[tuple[str, ...] | None, tuple[str, ...], tuple[str, ...]]:
    """Each list a list of configured feed ids, at most :data:`MAX_TO` long, deduplicated."""
    out: list[tuple[str, ...] | None] = []
    for name, feeds in (("to", to), ("add", add), ("remove", remove)):
        if feeds is None:
            out.append(None)
            continue
        out.append(checked_feeds(writes, feeds, name))
    new, added, removed = out
    return new, added or (), removed or ()


def checked_feeds(
    writes: ActivityWrites, feeds: object, field: str, *, least: int = 0
) -> tuple[str, ...]:
    """``feeds`` as ``least`` to :data:`MAX_TO` feed ids of configured groups,
    deduplicated in order; each refusal names ``field`` (and the position)."""
    if isinstance(feeds, str) or not isinstance(feeds, Sequence):
        raise ValidationError("must be a list of feed ids", field=field)
    if len(feeds) > MAX_TO:
        raise ValidationError(f"has {len(feeds)} feeds; the limit is {MAX_TO}", field=field)
    if len(feeds) < least:
        raise ValidationError(f"has {len(feeds)} feeds; name {least} to {MAX_TO}", field=field)
    for i, feed in enumerate(feeds):
        if not isinstance(feed, str):
            raise ValidationError("must be a feed id (a string)", field=f"{field}.{i}")
        try:
            writes.check_feed(feed)
        except ValidationError as exc:
            raise ValidationError(exc.detail, field=f"{field}.{i}") from None
    return tuple(dict.fromkeys(feeds))
