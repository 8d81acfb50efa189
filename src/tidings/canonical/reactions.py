"""Reactions in the canonical store: the reactions themselves, their exact
counts per (activity, parent, kind), and the affinities they make (how often
a user reacted to an actor's activities).

Every change moves the counts and affinities in its own transaction, so they
are exact under concurrent writers and retries: a unique kind's second add
inserts nothing (the unique key ``once`` refuses it) and so counts nothing.
A reaction with ``to`` publishes its notification activity in the same
transaction, and removing the reaction removes that activity with it.
What is read of them (pages, counts, latest, affinities) is in
:mod:`tidings.canonical.reaction_reads`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, delete, func, select, update
from sqlalchemy.exc import IntegrityError

from tidings.canonical import reaction_trash as trash
from tidings.canonical.activities import Accepted, Activities
from tidings.canonical.db import Database
from tidings.canonical.reaction_reads import (
    COLUMNS,
    SELECT_COLUMNS,
    children_counts,
    reaction_by_id,
    reaction_json,
    reaction_of,
)
from tidings.canonical.rows import chunks
from tidings.canonical.schema import (
    activities,
    affinities,
    reaction_counts,
    reaction_latest,
    reactions,
)
from tidings.core.activity import Activity
from tidings.core.errors import ActivityNotFound, ValidationError
from tidings.core.reactions import (
    MAX_DEPTH,
    MAX_LATEST,
    NewReaction,
    Reaction,
    ReactionNotFound,
)

#: What a reaction with ``to`` publishes: built in the transaction, from the
#: reaction and the activity it answers.
NoticeFor = Callable[[Reaction, Activity], Accepted]

#: Reactions kept as JSON on each count row, newest first: a page's
#: ``latest_reactions`` reads them with the counts instead of querying every
#: (activity, kind) pair.
LATEST_KEPT = MAX_LATEST


@dataclass(frozen=True, slots=True)
class Added:
    reaction: Reaction
    #: False: a unique kind this user had already added (``reaction`` is that one).
    created: bool
    #: The activity reacted to.
    activity: Activity
    #: The notification activity published (created only), with its feed and keys.
    notice: tuple[Accepted, Activity] | None = None


@dataclass(frozen=True, slots=True)
class Restored:
    """A restore: the reactions back (the one named, then those under it) and
    the notification activities published again, with their feeds and keys."""

    reactions: list[Reaction]
    notices: list[tuple[Accepted, Activity]]


@dataclass(frozen=True, slots=True)
class Removed:
    """A removal: the reactions deleted (the one named, then its descendants)
    and the notification activities retracted with them."""

    reactions: list[Reaction]
    #: ``(feed, activity, aggregate keys)`` of each notification retracted.
    notices: list[tuple[str, Activity, dict[str, str]]]
    #: True: reactions removed softly before, deleted from the trash now (their
    #: counts and notifications went with the soft removal).
    from_trash: bool = False


class Reactions:
    """Adding, changing and removing reactions, with their counts and affinities."""

    def __init__(
        self, db: Database, activities_section: Activities, kept: int = LATEST_KEPT
    ) -> None:
        self.db = db
        self.activities = activities_section
        #: How many of the newest reactions are kept per (activity, parent,
        #: kind): the ``latest_reactions`` setting, at most MAX_LATEST; fewer
        #: kept means less to rewrite on each add.
        self.kept = kept

    # -- writes ---------------------------------------------------------------------

    def add(
        self,
        new: NewReaction,
        reaction_id: str,
        now_us: int,
        *,
        unique: bool,
        notice_for: NoticeFor | None,
    ) -> Added:
        """Store ``new`` as ``reaction_id``; for a ``unique`` kind the user already
        added to this activity (or parent), the stored one instead."""
        for attempt in range(2):
            try:
                return self._add(new, reaction_id, now_us, unique, notice_for)
            except IntegrityError:
                # PostgreSQL: a concurrent first add of the same unique kind won
                # the race past _held; the second attempt finds it held.
                if attempt or not unique:
                    raise
        raise AssertionError("unreachable")

    def _add(
        self,
        new: NewReaction,
        reaction_id: str,
        now_us: int,
        unique: bool,
        notice_for: NoticeFor | None,
    ) -> Added:
        with self.db.write() as conn:
            activity = self._activity(conn, new.activity_id, exclusive=new.parent is not None)
            depth = 1 if new.parent is None else self._parent_depth(conn, new) + 1
            if unique:
                held = self._held(conn, new)
                if held is not None:
                    return Added(held, False, activity)
            reaction = Reaction(
                id=reaction_id,
                activity_id=new.activity_id,
                kind=new.kind,
                user=new.user,
                data=new.data,
                parent=new.parent,
                depth=depth,
                to=new.to,
                created_us=now_us,
                updated_us=now_us,
            )
            notice = None
            if new.to and notice_for is not None:
                accepted = notice_for(reaction, activity)
                stored, _ = self.activities.insert_in(conn, [accepted], now_us // 1000)[0]
                notice = (accepted, stored)
            self._insert(conn, reaction, unique, notice)
            self._count(conn, [reaction], +1, {reaction.activity_id: activity.actor})
            self._push(conn, reaction)
        return Added(reaction, True, activity, notice)

    def _activity(self, conn: Connection, activity_id: str, *, exclusive: bool) -> Activity:
        # FOR SHARE on PostgreSQL: a removal of the activity (which deletes its
        # reactions) waits for this transaction, so no reaction outlives it. A
        # reply takes it FOR UPDATE: it rewrites its parent's entry among the
        # newest kept, which another reply may be rewriting too.
        doc = conn.execute(
            select(activities.c.doc)
            .where(activities.c.id == activity_id)
            .with_for_update(read=not exclusive)
        ).scalar_one_or_none()
        if doc is None:
            raise ActivityNotFound(f"no activity with id {activity_id}")
        return Activity.from_json(doc)

    def _parent_depth(self, conn: Connection, new: NewReaction) -> int:
        r = reactions.c
        row = conn.execute(
            select(r.activity_id, r.depth).where(r.id == new.parent).with_for_update(read=True)
        ).one_or_none()
        if row is None:
            raise ReactionNotFound(f"no reaction with id {new.parent}")
        if row.activity_id != new.activity_id:
            raise ValidationError(
                f"reaction {new.parent} answers another activity, not {new.activity_id}",
                field="parent",
            )
        if row.depth >= MAX_DEPTH:
            raise ValidationError(
                f"reaction {new.parent} is at depth {row.depth}; reactions nest "
                f"at most {MAX_DEPTH} deep",
                field="parent",
            )
        return int(row.depth)

    def _held(self, conn: Connection, new: NewReaction) -> Reaction | None:
        r = reactions.c
        row = conn.execute(
            select(*SELECT_COLUMNS).where(
                r.activity_id == new.activity_id,
                r.parent == (new.parent or ""),
                r.kind == new.kind,
                r.once == new.user,
            )
        ).one_or_none()
        return None if row is None else reaction_of(row, children_counts(conn, [row[0]]))

    def _insert(
        self,
        conn: Connection,
        reaction: Reaction,
        unique: bool,
        notice: tuple[Accepted, Activity] | None,
    ) -> None:
        # On PostgreSQL two first likes can race past _held: the unique key
        # refuses the second, whose transaction fails and is not counted.
        conn.execute(
            reactions.insert().values(
                id=reaction.id,
                activity_id=reaction.activity_id,
                parent=reaction.parent or "",
                depth=reaction.depth,
                kind=reaction.kind,
                user_id=reaction.user,
                data=orjson.dumps(reaction.data),
                targets=orjson.dumps(list(reaction.to)),
                notice="" if notice is None else notice[1].id,
                notice_feed="" if notice is None else notice[0].feed,
                once=reaction.user if unique else None,
                created_us=reaction.created_us,
                updated_us=reaction.updated_us,
            )
        )

    def _count(
        self, conn: Connection, changed: Sequence[Reaction], step: int, actors: Mapping[str, str]
    ) -> None:
        """Move the counts (and the users' affinities to the actors) by ``step``
        for each of ``changed``; ``actors`` maps activity ids to their actors."""
        counts: dict[tuple[str, str, str], int] = {}
        liked: dict[tuple[str, str], int] = {}
        for r in changed:
            key = (r.activity_id, r.parent or "", r.kind)
            counts[key] = counts.get(key, 0) + step
            actor = actors.get(r.activity_id)
            if actor is not None and actor != r.user:  # reacting to oneself says nothing
                liked[r.user, actor] = liked.get((r.user, actor), 0) + step
        for (aid, parent, kind), n in sorted(counts.items()):
            self._upsert(
                conn, reaction_counts, {"activity_id": aid, "parent": parent, "kind": kind}, n
            )
        for (user, actor), n in sorted(liked.items()):
            self._upsert(conn, affinities, {"user_id": user, "actor": actor}, n)

    def _upsert(self, conn: Connection, table: Any, key: dict[str, str], n: int) -> None:
        # One statement, atomic on PostgreSQL under concurrent writers too.
        stmt = self.db.dialect_insert(table).values(**key, n=n)
        conn.execute(
            stmt.on_conflict_do_update(index_elements=list(key), set_={"n": table.c.n + n})
        )
        if n < 0:
            where = [table.c[k] == v for k, v in key.items()]
            conn.execute(delete(table).where(*where, table.c.n <= 0))

    def _push(self, conn: Connection, reaction: Reaction) -> None:
        """A new reaction is the newest of its (activity, parent, kind): put it
        in front of the ones kept, without reading them all back. Its parent's
        entry (whose children counts moved) is rewritten."""
        t = reaction_latest.c
        where = (
            t.activity_id == reaction.activity_id,
            t.parent == (reaction.parent or ""),
            t.kind == reaction.kind,
        )
        held = conn.execute(select(t.latest).where(*where).with_for_update()).scalar_one_or_none()
        kept = reaction.to_json()
        if held:
            older = bytes(held).split(b"\n", self.kept - 1)[: self.kept - 1]
            kept = b"\n".join([kept, *older]) if older else kept
            conn.execute(update(reaction_latest).where(*where).values(latest=kept))
        else:
            key = {"activity_id": reaction.activity_id, "parent": reaction.parent or ""}
            conn.execute(reaction_latest.insert().values(**key, kind=reaction.kind, latest=kept))
        if reaction.parent:
            self._refresh(conn, [], parents=[reaction.parent])

    def _refresh(
        self, conn: Connection, changed: Sequence[Reaction], parents: Sequence[str] = ()
    ) -> None:
        """Rewrite the newest reactions kept for the (activity, parent, kind)
        ``changed`` touch, and for their parents' (whose children counts moved)
        and those of ``parents``. Read back from the table, so always what it holds."""
        keys = {(r.activity_id, r.parent or "", r.kind) for r in changed}
        parents = sorted({*parents, *(r.parent for r in changed if r.parent)})
        if parents:
            r = reactions.c
            rows = conn.execute(
                select(r.activity_id, r.parent, r.kind).where(r.id.in_(parents))
            ).all()
            keys.update((aid, parent, kind) for aid, parent, kind in rows)
        for aid, parent, kind in sorted(keys):
            rows = self.db.fetch_raw(
                conn,
                f"SELECT {COLUMNS} FROM tidings_reactions WHERE activity_id = {{p}} "
                f"AND parent = {{p}} AND kind = {{p}} ORDER BY id DESC LIMIT {int(self.kept)}",
                (aid, parent, kind),
            )
            children = children_counts(conn, [row[0] for row in rows])
            kept = b"\n".join(reaction_json(row, children.get(row[0])) for row in rows)
            t = reaction_latest.c
            if not kept:
                conn.execute(
                    delete(reaction_latest).where(
                        t.activity_id == aid, t.parent == parent, t.kind == kind
                    )
                )
                continue
            key = {"activity_id": aid, "parent": parent, "kind": kind}
            stmt = self.db.dialect_insert(reaction_latest).values(**key, latest=kept)
            conn.execute(
                stmt.on_conflict_do_update(index_elements=list(key), set_={"latest": kept})
            )

    def _lock(self, conn: Connection, reaction_id: str) -> Reaction:
        """The reaction, read again after locking its activity's row (FOR UPDATE on
        PostgreSQL; adds take it FOR SHARE): changes to one activity's reactions
        then run one at a time, so a removal counts only what it deletes, a
        reply cannot slip under a parent being removed, and the newest
        reactions kept are rewritten in order."""
        found = reaction_by_id(conn, reaction_id)
        if found is None:
            raise ReactionNotFound(f"no reaction with id {reaction_id}")
        conn.execute(
            select(activities.c.id).where(activities.c.id == found.activity_id).with_for_update()
        )
        again = reaction_by_id(conn, reaction_id)
        if again is None:
            raise ReactionNotFound(f"no reaction with id {reaction_id}")
        return again

    def update_data(self, reaction_id: str, data: Mapping[str, Any], now_us: int) -> Reaction:
        r = reactions.c
        with self.db.write() as conn:
            self._lock(conn, reaction_id)
            changed = conn.execute(
                update(reactions)
                .where(r.id == reaction_id)
                .values(data=orjson.dumps(dict(data)), updated_us=now_us)
            ).rowcount
            if not changed:
                raise ReactionNotFound(f"no reaction with id {reaction_id}")
            found = reaction_by_id(conn, reaction_id)
            assert found is not None
            self._refresh(conn, [found])
        return found

    def remove(self, reaction_id: str, now_ms: int) -> Removed:
        """Delete the reaction and every reaction under it, their counts and
        affinities, and retract the notifications they published. A reaction
        removed softly before is deleted from the trash (its counts and
        notifications went with the soft removal)."""
        with self.db.write() as conn:
            if trash.lock(conn, reaction_id) is not None:
                return Removed(trash.purge(conn, [reaction_id]), [], from_trash=True)
            top = self._lock(conn, reaction_id)
            family = self._family(conn, [top])
            trash.purge(conn, [x.id for x in family])  # (those under it removed softly)
            return self._drop(conn, [top], family, now_ms)

    def remove_softly(self, reaction_id: str, now_us: int) -> Removed:
        """:meth:`remove`, keeping the rows (the reaction and those under it,
        with the notifications retracted) in the trash for :meth:`restore`."""
        with self.db.write() as conn:
            trash.check_removable(conn, reaction_id)
            top = self._lock(conn, reaction_id)
            family = self._family(conn, [top])
            trash.set_aside(conn, [r.id for r in family], top.id, now_us)
            removed = self._drop(conn, [top], family, now_us // 1000)
            trash.keep_notices(conn, removed.notices)
        return removed

    def restore(self, reaction_id: str, now_us: int) -> Restored:
        """Bring back a reaction removed softly, with those removed under it:
        their counts, the newest kept, affinities, and the notifications they
        had published (published again, under new ids)."""
        with self.db.write() as conn:
            top = trash.check_restorable(conn, reaction_id, trash.lock(conn, reaction_id))
            restored, notices = trash.take_back(conn, reaction_id, now_us)
            published = self.activities.insert_in(conn, notices, now_us // 1000) if notices else []
            actor = self._actor(conn, top.activity_id)
            self._count(conn, restored, +1, {top.activity_id: actor} if actor else {})
            self._refresh(conn, restored)
        again = zip(notices, published, strict=True)
        return Restored(restored, [(n, stored) for n, (stored, created) in again if created])

    def activity_removed(
        self, conn: Connection, activity: Activity, now_ms: int
    ) -> list[tuple[str, Activity, dict[str, str]]]:
        """Everything under a removed activity, by its id (however many): the
        reactions, their counts and the newest kept, the affinities they made,
        and the notifications they published (returned, retracted)."""
        r = reactions.c
        notices = conn.execute(
            select(r.notice, r.notice_feed).where(r.activity_id == activity.id, r.notice != "")
        ).all()
        retracted = self._retract(conn, notices, now_ms)
        made = conn.execute(
            select(r.user_id, func.count())
            .where(r.activity_id == activity.id, r.user_id != activity.actor)
            .group_by(r.user_id)
        ).all()
        for user, n in sorted(made):
            self._upsert(conn, affinities, {"user_id": user, "actor": activity.actor}, -int(n))
        for table in (reactions, reaction_counts, reaction_latest):
            conn.execute(delete(table).where(table.c.activity_id == activity.id))
        trash.purge_activity(conn, activity.id)
        return retracted

    def _family(self, conn: Connection, tops: Sequence[Reaction]) -> list[Reaction]:
        """``tops`` and every live reaction under them."""
        family = list(tops)
        level = [r.id for r in tops]
        r = reactions.c
        while level:  # children, grandchildren: at most MAX_DEPTH levels
            found = [
                reaction_of(row, {})
                for part in chunks(level)
                for row in conn.execute(select(*SELECT_COLUMNS).where(r.parent.in_(part)))
            ]
            family += found
            level = [x.id for x in found]
        return family

    def _drop(
        self, conn: Connection, tops: Sequence[Reaction], doomed: list[Reaction], now_ms: int
    ) -> Removed:
        """Delete ``doomed`` (``tops`` and those under them), their counts and
        affinities, and retract their notifications."""
        r = reactions.c
        ids = [x.id for x in doomed]
        notices = [
            row
            for part in chunks(ids)
            for row in conn.execute(
                select(r.notice, r.notice_feed).where(r.id.in_(part), r.notice != "")
            )
        ]
        # Notices first: the same order of locks as an add (feed counts, then
        # reaction counts), so a like and an unlike cannot deadlock.
        retracted = self._retract(conn, notices, now_ms)
        for part in chunks(ids):
            conn.execute(delete(reactions).where(r.id.in_(part)))
        activity_id = doomed[0].activity_id
        actor = self._actor(conn, activity_id)
        self._count(conn, doomed, -1, {activity_id: actor} if actor else {})
        for table in (reaction_counts, reaction_latest):  # the doomed ones' children
            for part in chunks(ids):
                conn.execute(
                    delete(table).where(
                        table.c.activity_id == activity_id, table.c.parent.in_(part)
                    )
                )
        self._refresh(conn, tops)
        return Removed(doomed, retracted)

    def _actor(self, conn: Connection, activity_id: str) -> str | None:
        doc = conn.execute(
            select(activities.c.doc).where(activities.c.id == activity_id)
        ).scalar_one_or_none()
        return None if doc is None else Activity.from_json(doc).actor

    def _retract(
        self, conn: Connection, notices: Iterable[Sequence[str]], now_ms: int
    ) -> list[tuple[str, Activity, dict[str, str]]]:
        out: list[tuple[str, Activity, dict[str, str]]] = []
        for notice_id, feed in notices:
            doc = conn.execute(
                select(activities.c.doc).where(activities.c.id == notice_id)
            ).scalar_one_or_none()
            if doc is None:
                continue  # removed on its own already
            notice = Activity.from_json(doc)
            keys = self.activities.remove_in(conn, feed, notice, now_ms)
            if keys is not None:
                out.append((feed, notice, keys))
                # Reactions to the notice itself go with it, as with any activity.
                out += self.activity_removed(conn, notice, now_ms)
        return out
