"""The outbox: deliveries, retractions and follow copies waiting for a runner.

A runner claims a row under a token of its own; a distributed runner splits a
delivery into parts (ranges of one tier's followers), each finished by a task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, NamedTuple

import orjson
from sqlalchemy import Connection, delete, func, select, tuple_, update

from tidings.canonical.db import Database
from tidings.canonical.rows import (
    IN_CHUNK,
    Claimed,
    OutboxRow,
    Part,
    claimed_of,
    new_token,
    outbox_row_of,
    part_of,
)
from tidings.canonical.schema import activities, outbox, outbox_parts
from tidings.core import readers
from tidings.core.activity import Activity
from tidings.core.fanout import OutboxKind
from tidings.core.readers import PartTier

# "{p}" is the driver's placeholder. Every feed id sorts above "".
# The follower of a tier ``OFFSET`` places after ``follower``: the end of a
# part. A short index walk, no row reads.
_NTH_OF_TIER = (
    "SELECT follower FROM tidings_follows WHERE source = {p} AND follower > {p} "
    "AND tier = {p} ORDER BY follower LIMIT 1 OFFSET {p}"
)
_ANY_OF_TIER = (
    "SELECT 1 FROM tidings_follows WHERE source = {p} AND follower > {p} AND tier = {p} LIMIT 1"
)
# A part's followers: those of its tiers, and any whose tier changed since
# the split (see split), that followed before the row (see Follows.follow).
_PART_RANGE = (
    "SELECT follower FROM tidings_follows WHERE source = {p} AND follower > {p} "
    "AND follower <= {p} AND (tier = {p} OR tier = {p} OR tier_ms >= {p}) "
    "AND since_row < {p} ORDER BY follower"
)
_PART_TAIL = (
    "SELECT follower FROM tidings_follows WHERE source = {p} AND follower > {p} "
    "AND (tier = {p} OR tier = {p} OR tier_ms >= {p}) AND since_row < {p} ORDER BY follower"
)


# The claim and completion of every pass, on the driver's cursor ("{p}": its
# placeholder): SQLAlchemy's statement handling took ~30 µs a row there. A set
# of ids travels as one parameter, a JSON array on SQLite and an array on
# PostgreSQL.
_PENDING = (
    "SELECT id, kind, activity_id, source, targets, doc, group_keys, position "
    "FROM tidings_outbox WHERE lease_until_ms <= {p} ORDER BY id LIMIT {p}"
)
_LEASE = (
    "UPDATE tidings_outbox SET lease_until_ms = {p}, attempts = attempts + 1, claim_token = {p} "
    "WHERE id IN ({ids}) AND lease_until_ms <= {p} RETURNING id"
)
_COMPLETE = "DELETE FROM tidings_outbox WHERE id IN ({ids}) AND claim_token = {p} RETURNING id"
_DROP_PARTS = "DELETE FROM tidings_outbox_parts WHERE row_id IN ({ids})"
# PostgreSQL: a claim, and a completion, as one statement each, committed by
# itself (no BEGIN, no COMMIT: a round trip each instead of four). A claim
# skips rows another claim has locked meanwhile and takes the next ones, so
# two deliverers never wait for each other's claims.
_CLAIM_POSTGRES = (
    "UPDATE tidings_outbox SET lease_until_ms = %(until)s, attempts = attempts + 1, "
    "claim_token = %(token)s WHERE id IN (SELECT id FROM tidings_outbox "
    "WHERE lease_until_ms <= %(now)s ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) "
    "RETURNING id, kind, activity_id, source, targets, doc, group_keys, position"
)
_COMPLETE_POSTGRES = (
    "WITH done AS (DELETE FROM tidings_outbox o USING unnest(CAST(%s AS bigint[]), "
    "CAST(%s AS bigint[])) AS c(id, token) WHERE o.id = c.id AND o.claim_token = c.token "
    "RETURNING o.id), parts AS (DELETE FROM tidings_outbox_parts "
    "WHERE row_id IN (SELECT id FROM done)) SELECT id FROM done"
)


class _Pending(NamedTuple):
    """An outbox row as a claim reads it (the fields ``claimed_of`` uses)."""

    id: int
    kind: str
    activity_id: str
    source: str
    targets: bytes
    doc: bytes | None
    group_keys: bytes | None
    position: str | None


class Outbox:
    """Claims, progress and completion of outbox rows; the parts of a split row."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def claim(self, now_ms: int, lease_ms: int, limit: int = 16) -> list[Claimed]:
        """Lease up to ``limit`` pending rows whose lease has lapsed, oldest first.

        Each claim gets a token of its own (shared by the rows it took):
        progress, release and completion apply only while the row is still
        under it (see :meth:`advance`).
        """
        token = new_token()
        if self.db.dialect != "sqlite":
            return self._claim_postgres(now_ms, lease_ms, limit, token)
        with self.db.write() as conn:
            rows = [_Pending(*r) for r in self.db.fetch_raw(conn, _PENDING, (now_ms, limit))]
            if not rows:
                return []
            docs = _legacy_docs(conn, rows)
            # One token for the claim's rows, one statement: the lease
            # compare-and-set (re-checked under the row lock) keeps two
            # runners off one row.
            lease = (now_ms + lease_ms, token, self.db.set_param([r.id for r in rows]), now_ms)
            taken = {r[0] for r in self.db.fetch_raw(conn, self._sql(_LEASE), lease)}
        # Parsed once the write lock is let go.
        return [
            claimed_of(r, r.doc or docs.get(r.activity_id), token) for r in rows if r.id in taken
        ]

    def _claim_postgres(self, now_ms: int, lease_ms: int, limit: int, token: int) -> list[Claimed]:
        params = {"until": now_ms + lease_ms, "token": token, "now": now_ms, "limit": limit}
        with self.db.single() as conn:
            rows = sorted(_Pending(*r) for r in self.db.fetch_raw(conn, _CLAIM_POSTGRES, params))
            docs = _legacy_docs(conn, rows)
        return [claimed_of(r, r.doc or docs.get(r.activity_id), token) for r in rows]

    def _sql(self, statement: str) -> str:
        """``statement`` with its ``{ids}`` set read from one parameter."""
        return statement.replace("{ids}", self.db.in_set("bigint"))

    def outbox_row(self, row_id: int) -> OutboxRow | None:
        """A pending delivery or retraction (None once completed or cancelled),
        without claiming it."""
        with self.db.read() as conn:
            r = conn.execute(select(outbox).where(outbox.c.id == row_id)).one_or_none()
            if r is None or r.kind == OutboxKind.COPY:
                return None
            doc = r.doc
            if doc is None:  # queued before schema v2
                doc = conn.execute(
                    select(activities.c.doc).where(activities.c.id == r.activity_id)
                ).scalar_one_or_none()
        return outbox_row_of(r, doc)

    def held_rows(self, keys: Sequence[tuple[int, int]]) -> list[OutboxRow]:
        """The delivery rows of ``keys`` (``(row id, claim token)``) still under
        those claims, in id order: a batch handed to a task by a dispatcher."""
        rows: list[OutboxRow] = []
        held = tuple_(outbox.c.id, outbox.c.claim_token)
        with self.db.read() as conn:
            for start in range(0, len(keys), IN_CHUNK // 2):
                part = [tuple(k) for k in keys[start : start + IN_CHUNK // 2]]
                found = conn.execute(
                    select(outbox).where(held.in_(part)).order_by(outbox.c.id)
                ).all()
                docs = _legacy_docs(conn, found)
                rows += [
                    outbox_row_of(r, r.doc or docs.get(r.activity_id), r.claim_token)
                    for r in found
                    if r.kind != OutboxKind.COPY
                ]
        return rows

    def advance(self, row: Claimed, position: str, lease_until_ms: int) -> bool:
        """Record progress and extend the lease; False when the row is no longer
        under ``row``'s claim (cancelled, or claimed again after the lease
        lapsed): the caller stops, the row is someone else's."""
        with self.db.write() as conn:
            return (
                conn.execute(
                    update(outbox)
                    .where(*_held(row))
                    .values(position=position, lease_until_ms=lease_until_ms)
                ).rowcount
                > 0
            )

    def complete(self, row: Claimed) -> bool:
        """Delete the row (and its parts) if it is still under ``row``'s claim."""
        with self.db.write() as conn:
            if not conn.execute(delete(outbox).where(*_held(row))).rowcount:
                return False
            conn.execute(delete(outbox_parts).where(outbox_parts.c.row_id == row.id))
        return True

    def complete_many(self, rows: Sequence[Claimed]) -> list[int]:
        """:meth:`complete` for a batch of rows, in one transaction; returns the
        ids of those still under their claim (the others are someone else's)."""
        if not rows:
            return []
        if self.db.dialect != "sqlite":
            held = ([r.id for r in rows], [r.token for r in rows])
            with self.db.single() as conn:
                return [r[0] for r in self.db.fetch_raw(conn, _COMPLETE_POSTGRES, held)]
        by_token: dict[int, list[int]] = {}
        for r in rows:
            by_token.setdefault(r.token, []).append(r.id)
        done: list[int] = []
        with self.db.write() as conn:
            for token, ids in by_token.items():
                params = (self.db.set_param(ids), token)
                done += [r[0] for r in self.db.fetch_raw(conn, self._sql(_COMPLETE), params)]
            if done:
                self.db.run_raw(conn, self._sql(_DROP_PARTS), (self.db.set_param(done),))
        return done

    def split(self, row: OutboxRow, size: int, now_ms: int) -> list[Part] | None:
        """The parts of ``row`` not yet done, each of up to ``size`` followers of
        one tier: high (read recently) and low parts; idle followers, none.

        The first call records the ranges; later calls (a re-dispatch after a
        lapsed lease) return the recorded ones, so a part re-sent or retried
        covers exactly the feeds it covered before, whatever follows changed.

        Each tier's ranges cover every feed id, and a part delivers to the
        followers of its tier *and* to those whose tier changed since the split
        (less :data:`TIER_CHANGE_MARGIN_MS`): a follower that moves between
        tiers while the parts wait is written by both (idempotently), never by
        neither. One that leaves idle after the split is regenerated from the
        canonical store, which holds the activity already.

        None when the row is no longer under ``row``'s claim.
        """
        with self.db.write() as conn:
            # Locked: a removal cancelling the row waits, then deletes these parts too.
            held = select(outbox.c.id).where(*_held(row)).with_for_update()
            if conn.execute(held).one_or_none() is None:
                return None
            recorded = conn.execute(
                select(outbox_parts).where(outbox_parts.c.row_id == row.id)
            ).all()
            if recorded:
                return [part_of(r) for r in recorded if not r.done]
            parts: list[Part] = []
            for tier in (PartTier.HIGH, PartTier.LOW):
                parts += self._tier_parts(conn, row, size, now_ms, tier)
            if parts:
                conn.execute(outbox_parts.insert(), [asdict(p) for p in parts])
        return parts

    def _tier_parts(
        self, conn: Connection, row: OutboxRow, size: int, now_ms: int, name: PartTier
    ) -> list[Part]:
        tier = name.tiers[0]  # a part of one tier: HIGH or LOW
        # A row a thread runner had begun resumes where it stopped.
        after = row.position or ""
        # A tier without followers here costs one walk of the index.
        parts: list[Part] = []
        while self.db.fetch_raw(conn, _ANY_OF_TIER, (row.source, after, tier)):
            nth = self.db.fetch_raw(conn, _NTH_OF_TIER, (row.source, after, tier, size - 1))
            if not nth:
                parts.append(Part(row.id, after, None, name, now_ms))
                break
            parts.append(Part(row.id, after, nth[0][0], name, now_ms))
            after = nth[0][0]
        if parts:
            # The tier's last part runs to the end of the ids (a follower
            # that joins the tier while this runs is past its last one).
            parts[-1] = Part(row.id, parts[-1].after, None, name, now_ms)
        return parts

    def recorded_part(self, part: Part) -> Part | None:
        """``part`` as recorded, if it is and is not done.

        A task can outlive its row (a duplicate redelivered by the broker
        long after): a part no longer recorded must change nothing. Row ids
        are never reused, so a recorded part is always of the row it names.
        """
        with self.db.read() as conn:
            r = conn.execute(select(outbox_parts).where(*_part_key(part))).one_or_none()
        return None if r is None or r.done else part_of(r)

    def part_followers(self, source: str, part: Part) -> list[str]:
        """The followers of ``source`` in ``part`` (as recorded), sorted."""
        low, high = part.tier.tiers
        since = part.split_ms - readers.TIER_CHANGE_MARGIN_MS
        with self.db.read() as conn:
            if part.last is None:
                params: tuple[Any, ...] = (source, part.after, low, high, since, part.row_id)
                rows = self.db.fetch_raw(conn, _PART_TAIL, params)
            else:
                params = (source, part.after, part.last, low, high, since, part.row_id)
                rows = self.db.fetch_raw(conn, _PART_RANGE, params)
        return [row[0] for row in rows]

    def finish_part(self, part: Part) -> bool:
        """Mark ``part`` done; the last part done completes its row (returns True)."""
        with self.db.write() as conn:
            # Locking the row serialises the parts of one row as they finish:
            # on PostgreSQL two last parts could otherwise each see the other
            # undone, and neither complete the row. (SQLite writes are serial.)
            held = conn.execute(
                select(outbox.c.id).where(outbox.c.id == part.row_id).with_for_update()
            ).one_or_none()
            if held is None:
                return False  # cancelled, or completed by an earlier run of this part
            of_row = outbox_parts.c.row_id == part.row_id
            marked = conn.execute(
                update(outbox_parts).where(*_part_key(part)).values(done=1)
            ).rowcount
            if not marked:
                return False  # not a part of this row: see recorded_part
            left = conn.execute(
                select(func.count())
                .select_from(outbox_parts)
                .where(of_row, outbox_parts.c.done == 0)
            ).scalar_one()
            if left:
                return False
            conn.execute(delete(outbox_parts).where(of_row))
            conn.execute(delete(outbox).where(outbox.c.id == part.row_id))
        return True

    def release(self, row: Claimed) -> None:
        """Give a claimed row back after a failure so it is retried at once."""
        with self.db.write() as conn:
            conn.execute(update(outbox).where(*_held(row)).values(lease_until_ms=0))

    def pending(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute(select(func.count()).select_from(outbox)).scalar_one())

    def outbox_stats(self) -> tuple[int, int | None]:
        """``(pending rows, created_ms of the oldest)`` for monitoring."""
        with self.db.read() as conn:
            count, oldest = conn.execute(
                select(func.count(), func.min(outbox.c.created_ms)).select_from(outbox)
            ).one()
        return int(count), None if oldest is None else int(oldest)


def enqueue(
    conn: Connection,
    kind: OutboxKind,
    activity: Activity,
    source: str,
    now_ms: int,
    aggregate_keys: Mapping[str, str],
) -> None:
    """Queue the delivery (or retraction) of ``activity`` in the caller's transaction."""
    conn.execute(
        outbox.insert().values(
            kind=kind,
            activity_id=activity.id,
            source=source,
            targets=orjson.dumps(list(activity.to)),
            doc=activity.to_json(),
            group_keys=orjson.dumps(aggregate_keys),
            created_ms=now_ms,
        )
    )


def _part_key(part: Part) -> tuple[Any, ...]:
    c = outbox_parts.c
    return (c.row_id == part.row_id, c.tier == part.tier, c.after == part.after)


def _legacy_docs(conn: Connection, rows: Sequence[Any]) -> dict[str, bytes]:
    """The activity JSON of delivery rows queued before schema v2, which carry
    no copy of their activity (one query; none when there are no such rows)."""
    legacy = [r.activity_id for r in rows if r.doc is None and r.kind != OutboxKind.COPY]
    if not legacy:
        return {}
    query = select(activities.c.id, activities.c.doc).where(activities.c.id.in_(legacy))
    return {r.id: r.doc for r in conn.execute(query)}


def _held(row: Claimed) -> tuple[Any, ...]:
    return (outbox.c.id == row.id, outbox.c.claim_token == row.token)
