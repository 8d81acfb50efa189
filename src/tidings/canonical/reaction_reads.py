"""Reading reactions: by id, pages of them, their counts and latest, a
user's own, and what ranked feeds read (recent reactions, affinities).

The writes (:mod:`tidings.canonical.reactions`) keep what these read exact
in their own transactions; these only read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from sqlalchemy import Connection, select

from tidings.canonical.db import Database
from tidings.canonical.rows import chunks
from tidings.canonical.schema import reaction_counts, reaction_trash, reactions
from tidings.core.reactions import Reaction, reaction_time

COLUMNS = "id, activity_id, kind, user_id, data, parent, depth, targets, created_us, updated_us"


def reaction_of(row: Sequence[Any], children: Mapping[str, Mapping[str, int]]) -> Reaction:
    rid, aid, kind, user, data, parent, depth, targets, created, updated = row
    return Reaction(
        id=rid,
        activity_id=aid,
        kind=kind,
        user=user,
        data=orjson.loads(data),
        parent=parent or None,
        depth=depth,
        to=tuple(orjson.loads(targets)),
        created_us=created,
        updated_us=updated,
        children_counts=children.get(rid, {}),
    )


#: Reactions as JSON, by activity id, then kind.
Grouped = dict[str, dict[str, list[bytes]]]


def reaction_json(row: Sequence[Any], children: Mapping[str, int] | None = None) -> bytes:
    """A reaction row as the JSON :meth:`Reaction.to_json` makes of it, built from
    the stored JSON of its ``data`` and ``to`` rather than parsed and serialised
    again: pages carry hundreds."""
    rid, aid, kind, user, data, parent, _depth, targets, created, updated = row
    return b"".join(
        (
            b'{"id":"',
            rid.encode(),
            b'","activity_id":"',
            aid.encode(),
            b'","kind":"',
            kind.encode(),  # a-z, 0-9 and _ only
            b'","user":',
            orjson.dumps(user),
            b',"data":',
            bytes(data),
            b',"parent":',
            b'"' + parent.encode() + b'"' if parent else b"null",
            b',"to":',
            bytes(targets),
            b',"created_at":',
            orjson.dumps(reaction_time(created), option=orjson.OPT_UTC_Z),
            b',"updated_at":',
            orjson.dumps(reaction_time(updated), option=orjson.OPT_UTC_Z),
            b',"children_counts":',
            orjson.dumps(children or {}),
            b"}",
        )
    )


#: The columns of a reaction row, in the order :func:`reaction_of` reads them.
SELECT_COLUMNS: list[Any] = [
    reactions.c.id,
    reactions.c.activity_id,
    reactions.c.kind,
    reactions.c.user_id,
    reactions.c.data,
    reactions.c.parent,
    reactions.c.depth,
    reactions.c.targets,
    reactions.c.created_us,
    reactions.c.updated_us,
]


def reaction_by_id(conn: Connection, reaction_id: str) -> Reaction | None:
    row = conn.execute(select(*SELECT_COLUMNS).where(reactions.c.id == reaction_id)).one_or_none()
    return None if row is None else reaction_of(row, children_counts(conn, [reaction_id]))


def children_counts(conn: Connection, parents: Sequence[str]) -> dict[str, dict[str, int]]:
    """Counts of the reactions to each of ``parents``, per kind."""
    out: dict[str, dict[str, int]] = {}
    if not parents:
        return out
    c = reaction_counts.c
    for part in chunks(list(parents)):
        rows = conn.execute(select(c.parent, c.kind, c.n).where(c.parent.in_(part)))
        for parent, kind, n in rows:
            out.setdefault(parent, {})[kind] = int(n)
    return out


class ReactionReads:
    """Reactions read by id, by activity and by parent; their counts, the
    latest of each kind, and the affinities ranked feeds weigh."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, reaction_id: str) -> Reaction | None:
        with self.db.read() as conn:
            return reaction_by_id(conn, reaction_id)

    def removed(self, reaction_id: str) -> Reaction | None:
        """A reaction removed softly (None: not one), as it was."""
        t = reaction_trash.c
        query = select(*(t[c.name] for c in SELECT_COLUMNS)).where(t.id == reaction_id)
        with self.db.read() as conn:
            row = conn.execute(query).one_or_none()
        return None if row is None else reaction_of(row, {})

    def page(
        self,
        activity_id: str,
        *,
        parent: str | None,
        kind: str | None,
        before: str | None,
        limit: int,
    ) -> list[Reaction]:
        """Up to ``limit`` reactions to the activity (or to ``parent``), newest
        first, of ``kind`` (None: any), strictly older than ``before``."""
        r = reactions.c
        query = select(*SELECT_COLUMNS).where(r.activity_id == activity_id)
        query = query.where(r.parent == (parent or ""))
        if kind is not None:
            query = query.where(r.kind == kind)
        if before is not None:
            query = query.where(r.id < before)
        query = query.order_by(r.id.desc()).limit(limit)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
            children = children_counts(conn, [row[0] for row in rows])
        return [reaction_of(row, children) for row in rows]

    def by_user(
        self, user: str, *, kind: str | None, before: str | None, limit: int
    ) -> list[Reaction]:
        """Up to ``limit`` of ``user``'s reactions (to any activity or reaction),
        newest first, of ``kind`` (None: any), strictly older than ``before``.
        Found by the (user_id, activity_id) index, then ordered: a user's
        reactions are sorted for each page."""
        r = reactions.c
        query = select(*SELECT_COLUMNS).where(r.user_id == user)
        if kind is not None:
            query = query.where(r.kind == kind)
        if before is not None:
            query = query.where(r.id < before)
        query = query.order_by(r.id.desc()).limit(limit)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
            children = children_counts(conn, [row[0] for row in rows])
        return [reaction_of(row, children) for row in rows]

    def counts(self, activity_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """Exact counts of the reactions to each activity, per kind (activities
        without any are left out)."""
        return self.summary(activity_ids, 0)[0]

    def summary(
        self, activity_ids: Sequence[str], latest: int
    ) -> tuple[dict[str, dict[str, int]], Grouped]:
        """:meth:`counts` and, with ``latest`` > 0, :meth:`latest`, in one query."""
        counts: dict[str, dict[str, int]] = {}
        newest: Grouped = {}
        join = (
            " LEFT JOIN tidings_reaction_latest l ON l.activity_id = c.activity_id "
            "AND l.parent = c.parent AND l.kind = c.kind"
        )
        column, join = (", l.latest", join) if latest > 0 else (", NULL", "")
        with self.db.read() as conn:
            for part in chunks(list(activity_ids)):
                marks = ", ".join(["{p}"] * len(part))
                sql = (
                    f"SELECT c.activity_id, c.kind, c.n{column} FROM tidings_reaction_counts c"
                    f"{join} WHERE c.activity_id IN ({marks}) AND c.parent = ''"
                )
                for aid, kind, n, kept in self.db.fetch_raw(conn, sql, tuple(part)):
                    counts.setdefault(aid, {})[kind] = int(n)
                    if kept:
                        # One reaction a line: JSON strings escape their newlines.
                        lines = bytes(kept).split(b"\n", latest)[:latest]
                        newest.setdefault(aid, {})[kind] = lines
        return counts, newest

    def own(self, activity_ids: Sequence[str], user: str) -> Grouped:
        """``user``'s reactions to each activity, per kind, newest first, as JSON."""
        out: Grouped = {}
        with self.db.read() as conn:
            for part in chunks(list(activity_ids)):
                marks = ", ".join(["{p}"] * len(part))
                sql = (
                    f"SELECT {COLUMNS} FROM tidings_reactions WHERE user_id = {{p}} "
                    f"AND activity_id IN ({marks}) AND parent = '' ORDER BY id DESC"
                )
                rows = self.db.fetch_raw(conn, sql, (user, *part))
                children = children_counts(conn, [row[0] for row in rows])
                for row in rows:
                    by_kind = out.setdefault(row[1], {}).setdefault(row[2], [])
                    by_kind.append(reaction_json(row, children.get(row[0])))
        return out

    def recent(self, activity_ids: Sequence[str], since_id: str) -> dict[str, int]:
        """Reactions to each activity with ids from ``since_id`` (ids sort by time):
        the ``velocity`` of ranked feeds."""
        out: dict[str, int] = {}
        with self.db.read() as conn:
            for part in chunks(list(activity_ids)):
                marks = ", ".join(["{p}"] * len(part))
                sql = (
                    "SELECT activity_id, count(*) FROM tidings_reactions "
                    f"WHERE activity_id IN ({marks}) AND parent = '' AND id >= {{p}} "
                    "GROUP BY activity_id"
                )
                out.update(
                    (aid, int(n)) for aid, n in self.db.fetch_raw(conn, sql, (*part, since_id))
                )
        return out

    def affinities(self, user: str, actors: Sequence[str]) -> dict[str, int]:
        """How many reactions ``user`` made to each actor's activities."""
        out: dict[str, int] = {}
        with self.db.read() as conn:
            for part in chunks(sorted(set(actors))):
                marks = ", ".join(["{p}"] * len(part))
                sql = (
                    "SELECT actor, n FROM tidings_affinities "
                    f"WHERE user_id = {{p}} AND actor IN ({marks})"
                )
                out.update(
                    (actor, int(n)) for actor, n in self.db.fetch_raw(conn, sql, (user, *part))
                )
        return out
