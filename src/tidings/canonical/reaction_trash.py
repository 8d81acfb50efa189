"""Reactions removed softly: their rows, set aside in ``tidings_reaction_trash``
until they are restored or removed for good.

A soft removal moves the reaction and those under it out of
``tidings_reactions`` (so every read, count and page leaves them out with no
filter of its own) and keeps, with each row, the notification activity it
published and that the removal retracted. A restore moves the rows back and
publishes those notifications again, as they were but for their ids. These
functions run inside the caller's write transaction
(:mod:`tidings.canonical.reactions`), which moves the counts around them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson
from sqlalchemy import Connection, Table, and_, delete, exists, literal, select, update

from tidings.canonical.activities import Accepted
from tidings.canonical.reaction_reads import SELECT_COLUMNS, reaction_by_id, reaction_of
from tidings.canonical.rows import chunks
from tidings.canonical.schema import activities, reaction_trash, reactions
from tidings.core import ids
from tidings.core.activity import Activity
from tidings.core.errors import ValidationError
from tidings.core.reactions import Reaction, ReactionNotFound

#: The columns the live table and the trash share, copied as they are.
SHARED = [
    "id",
    "activity_id",
    "parent",
    "depth",
    "kind",
    "user_id",
    "data",
    "targets",
    "notice",
    "notice_feed",
    "once",
    "created_us",
    "updated_us",
]


@dataclass(frozen=True, slots=True)
class SetAside:
    """A reaction removed softly: its row (``root`` is the reaction whose
    removal took it along: itself, or an ancestor)."""

    reaction: Reaction
    root: str


def columns(table: Table) -> list[Any]:
    """The reaction columns of ``table`` (live or trash), in the order
    :func:`tidings.canonical.reaction_reads.reaction_of` reads them."""
    return [table.c[c.name] for c in SELECT_COLUMNS]


def find(conn: Connection, reaction_id: str) -> SetAside | None:
    """The reaction removed softly with this id (None: it is not in the trash)."""
    row = conn.execute(
        select(*columns(reaction_trash), reaction_trash.c.root).where(
            reaction_trash.c.id == reaction_id
        )
    ).one_or_none()
    return None if row is None else SetAside(reaction_of(row[:-1], {}), row[-1])


def lock(conn: Connection, reaction_id: str) -> SetAside | None:
    """The reaction removed softly, read again after locking its activity's row
    (FOR UPDATE on PostgreSQL) as a removal of a live reaction does: a restore
    and a removal of one reaction run one at a time, each finding what the
    other left."""
    held = find(conn, reaction_id)
    if held is None:
        return None
    activity = activities.c.id == held.reaction.activity_id
    conn.execute(select(activities.c.id).where(activity).with_for_update())
    return find(conn, reaction_id)


def check_removable(conn: Connection, reaction_id: str) -> None:
    """Refuse a soft removal of a reaction removed softly already."""
    held = find(conn, reaction_id)
    if held is not None:
        along = "" if held.root == reaction_id else f", with reaction {held.root}"
        raise ReactionNotFound(
            f"reaction {reaction_id} is removed softly already{along}: restore it, "
            "or remove it for good"
        )


def check_restorable(conn: Connection, reaction_id: str, held: SetAside | None) -> Reaction:
    """The reaction ``held`` in the trash under ``reaction_id``, if a restore may
    bring it back: removed softly on its own (not with a reaction above it),
    under a live parent, and not a unique kind its user has added again."""
    if held is None:
        live = reaction_by_id(conn, reaction_id) is not None
        found = "is not removed" if live else "does not exist, removed or not"
        raise ReactionNotFound(
            f"reaction {reaction_id} {found}: only a reaction removed softly can be restored"
        )
    if held.root != reaction_id:
        raise ReactionNotFound(
            f"reaction {reaction_id} was removed with reaction {held.root}: restore that "
            "one, which brings it back too"
        )
    top = held.reaction
    if top.parent is not None and reaction_by_id(conn, top.parent) is None:
        raise ReactionNotFound(
            f"reaction {top.id} answers reaction {top.parent}, which is removed softly "
            "too: restore that one first"
        )
    clash = clashes(conn, reaction_id)
    if clash:
        r = clash[0]
        raise ValidationError(
            f"{r.user} has added a {r.kind!r} to the same "
            f"{'reaction' if r.parent else 'activity'} since reaction {r.id} was removed, "
            "and holds one only: remove that one first",
            field="reaction_id",
        )
    return top


def set_aside(conn: Connection, reaction_ids: Sequence[str], root: str, now_us: int) -> None:
    """Copy the live rows of ``reaction_ids`` into the trash, under ``root``
    (the caller then deletes them from the live table, counting them out)."""
    live = [reactions.c[n] for n in SHARED]
    for part in chunks(list(reaction_ids)):
        query = select(*live, literal(root), literal(now_us)).where(reactions.c.id.in_(part))
        conn.execute(reaction_trash.insert().from_select([*SHARED, "root", "removed_us"], query))


def keep_notices(
    conn: Connection, retracted: Sequence[tuple[str, Activity, dict[str, str]]]
) -> None:
    """Keep, on each trash row, the notification activity its removal retracted
    (``(feed, activity, aggregate keys)``), to publish again on restore."""
    t = reaction_trash.c
    for _feed, notice, keys in retracted:
        conn.execute(
            update(reaction_trash)
            .where(t.notice == notice.id)
            .values(notice_doc=notice.to_json(), notice_keys=orjson.dumps(keys))
        )


def clashes(conn: Connection, root: str) -> list[Reaction]:
    """The reactions removed with ``root`` of a unique kind (``like``) that
    their user has added again since: restoring them would hold it twice."""
    t, r = reaction_trash.c, reactions.c
    again = exists().where(
        r.activity_id == t.activity_id, r.parent == t.parent, r.kind == t.kind, r.once == t.once
    )
    rows = conn.execute(
        select(*columns(reaction_trash)).where(and_(t.root == root, t.once.is_not(None), again))
    ).all()
    return [reaction_of(row, {}) for row in rows]


def take_back(conn: Connection, root: str, now_us: int) -> tuple[list[Reaction], list[Accepted]]:
    """Move the rows removed with ``root`` back into the live table: the
    reactions (``root`` first, then those under it, by depth) and the
    notifications to publish again, accepted now (what ``tidings rebuild
    --since`` goes by)."""
    t = reaction_trash.c
    rows = conn.execute(
        select(*columns(reaction_trash), t.notice_feed, t.notice_doc, t.notice_keys)
        .where(t.root == root)
        .order_by(t.depth, t.id)
    ).all()
    restored = [reaction_of(row[:10], {}) for row in rows]
    query = select(*(t[n] for n in SHARED)).where(t.root == root)
    conn.execute(reactions.insert().from_select(SHARED, query))
    notices: list[Accepted] = []
    for r, (*_, feed, doc, keys) in zip(restored, rows, strict=True):
        if doc is None:
            continue
        # The same activity under a new id of the same time: a retraction of the
        # old id still pending in the outbox must not take the new one back.
        old = Activity.from_json(doc)
        notice = replace(old, id=ids.new_id(ids.id_ms(old.id)))
        notices.append(Accepted(feed, notice, orjson.loads(keys), now_us))
        conn.execute(update(reactions).where(reactions.c.id == r.id).values(notice=notice.id))
    conn.execute(delete(reaction_trash).where(t.root == root))
    return restored, notices


def purge(conn: Connection, reaction_ids: Sequence[str]) -> list[Reaction]:
    """Remove for good the trash rows of ``reaction_ids`` and every trash row
    under them (removed with them, or removed on their own before), however
    deep; the reactions removed, those of ``reaction_ids`` first."""
    t = reaction_trash.c
    gone: list[Reaction] = []
    level = list(reaction_ids)
    while level:  # at most MAX_DEPTH levels
        found = [
            reaction_of(row, {})
            for part in chunks(level)
            for row in conn.execute(
                select(*columns(reaction_trash)).where(t.id.in_(part) | t.parent.in_(part))
            )
        ]
        seen = {g.id for g in gone}
        # (a row may answer two chunks: by its id and by its parent's)
        found = list({r.id: r for r in found if r.id not in seen}.values())
        gone += found
        for part in chunks([r.id for r in found]):
            conn.execute(delete(reaction_trash).where(t.id.in_(part)))
        level = [r.id for r in found]
    named = set(reaction_ids)
    return sorted(gone, key=lambda r: r.id not in named)  # (stable: by depth after)


def purge_activity(conn: Connection, activity_id: str) -> None:
    """Remove for good every trash row of a removed activity."""
    conn.execute(delete(reaction_trash).where(reaction_trash.c.activity_id == activity_id))
