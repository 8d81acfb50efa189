"""The canonical store: the source of truth every feed can be rebuilt from.

It holds activities, follows, per-feed counters and the outbox of pending
deliveries, in SQLite or PostgreSQL through :class:`tidings.canonical.db.Database`.
Each public method is one transaction.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, case, delete, func, select, tuple_, update
from sqlalchemy.exc import IntegrityError

from tidings.canonical.db import Database
from tidings.canonical.schema import (
    activities,
    addressed,
    fanout,
    feed_reads,
    feed_stats,
    follows,
    group_marks,
    outbox,
    outbox_parts,
)
from tidings.core import ids, readers
from tidings.core.activity import Activity
from tidings.core.aggregation import ms_time
from tidings.core.fanout import Strategy

#: An activity's version when published; each update adds one.
FIRST_VERSION = 1
# SQLite allows 32,766 bound parameters per statement; stay well under.
_IN_CHUNK = 5000
# "{p}" is the driver's placeholder. Every feed id sorts above "". Idle
# followers (tier 2) are skipped by deliveries; every query here reads only
# the (source, follower, tier, tier_ms) index.
_FOLLOWER_CHUNK = (
    "SELECT follower FROM tidings_follows WHERE source = {p} AND follower > {p} "
    "AND tier < 2 ORDER BY follower LIMIT {p}"
)
# The follower of a tier ``OFFSET`` places after ``follower``: the end of a
# part. A short index walk, no row reads.
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
# the split (see split).
_PART_RANGE = (
    "SELECT follower FROM tidings_follows WHERE source = {p} AND follower > {p} "
    "AND follower <= {p} AND (tier = {p} OR tier = {p} OR tier_ms >= {p}) ORDER BY follower"
)
_PART_TAIL = (
    "SELECT follower FROM tidings_follows WHERE source = {p} AND follower > {p} "
    "AND (tier = {p} OR tier = {p} OR tier_ms >= {p}) ORDER BY follower"
)


# Per-source newest ids in [lower, upper): one index range scan of (feed, id)
# each, limited, so a read costs one probe per source however long its
# history is. The union (distinct where an activity addressed to a feed may
# also come from a source it follows) is cut to the newest ``limit`` and
# joined to the activities for their JSON, all in one statement.
_SPAN = (
    "SELECT id FROM (SELECT id FROM tidings_activities "
    "WHERE feed = {p} AND id >= {p} AND id < {p} ORDER BY id DESC LIMIT {p}) AS s{n}"
)
_ADDRESSED_SPAN = (
    "SELECT activity_id FROM (SELECT activity_id FROM tidings_addressed "
    "WHERE feed = {p} AND activity_id >= {p} AND activity_id < {p} "
    "ORDER BY activity_id DESC LIMIT {p}) AS s{n}"
)
_NEWEST_OF_SPANS = (
    "SELECT u.id, a.doc FROM ({spans}) AS u JOIN tidings_activities a ON a.id = u.id "
    "ORDER BY u.id DESC LIMIT {p}"
)
_PULLED_SINCE = "SELECT changed_ms FROM tidings_fanout WHERE feed = {p} AND strategy = 'pull'"
_ANY_PULLED = "SELECT 1 FROM tidings_fanout LIMIT 1"
_PULLED = (
    "SELECT f.source, f.history_from FROM tidings_follows f "
    "JOIN tidings_fanout s ON s.feed = f.source WHERE f.follower = {p}"
)
# SQLite caps a compound SELECT at 500 terms.
_SPAN_CHUNK = 200
#: Above every id (ids are lowercase hex).
_TOP = "~"


_READER_STATE = "SELECT state FROM tidings_feed_reads WHERE feed = {p}"
_ANY_UNSETTLED = "SELECT 1 FROM tidings_feed_reads WHERE state IN ('idle', 'regenerating') LIMIT 1"
_REBUILD_DUE = (
    "SELECT 1 FROM tidings_feed_reads WHERE state = 'regenerating' AND lease_ms <= {p} LIMIT 1"
)
# Follower feeds with no read recorded, in feed order (the follows primary key).
_UNTRACKED = (
    "SELECT DISTINCT follower FROM tidings_follows f WHERE follower > {p} AND NOT EXISTS "
    "(SELECT 1 FROM tidings_feed_reads r WHERE r.feed = f.follower) ORDER BY follower LIMIT {p}"
)

_FOLLOWING = "SELECT source, history_from FROM tidings_follows WHERE follower = {p}"
# The span a follow copies: the source's newest ``copy_limit`` activities.
_COPY_SPAN = (
    "SELECT min(id), max(id) FROM (SELECT id FROM tidings_activities WHERE feed = {p} "
    "ORDER BY id DESC LIMIT {p}) AS newest"
)
_COPIED = (
    "SELECT id FROM tidings_activities WHERE feed = {p} AND id >= {p} AND id <= {p} "
    "ORDER BY id DESC LIMIT {p}"
)
_EVERY_FEED = (
    "SELECT feed FROM tidings_activities UNION SELECT feed FROM tidings_addressed "
    "UNION SELECT follower FROM tidings_follows ORDER BY 1"
)


@dataclass(frozen=True, slots=True)
class Entries:
    """Newest-first id lists (one per chunk of sources) and the JSON of those ids."""

    lists: list[list[str]]
    docs: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class Follow:
    follower: str
    source: str
    created_ms: int


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    kind: str  # "deliver" | "retract"
    activity: Activity  # grouped feeds need its fields, even once it is deleted
    source: str
    targets: tuple[str, ...]
    position: str | None
    #: {feed group: group key}, as fixed at publish.
    group_keys: Mapping[str, str]
    #: The claim this copy of the row was read under (0: not claimed).
    token: int = 0

    @property
    def activity_id(self) -> str:
        return self.activity.id


@dataclass(frozen=True, slots=True)
class CopyRow:
    """An outbox row of kind "copy": follows created in one transaction, each to
    be given its source's newest ``limit`` activities down to where the
    follow's history starts and up to the newest id recorded with it."""

    id: int
    token: int
    limit: int
    #: ``(follower, source, newest id to copy)``, sorted.
    follows: tuple[tuple[str, str, str], ...]
    #: How many of ``follows`` are done.
    done: int


#: What a runner claims.
Claimed = OutboxRow | CopyRow


@dataclass(frozen=True, slots=True)
class Followed:
    """The pairs a follow call created, and the copy it queued (if any)."""

    created: list[tuple[str, str]]
    copy: CopyRow | None


@dataclass(frozen=True, slots=True)
class Part:
    """The followers of ``tier`` of an outbox row's source after ``after`` up to
    ``last`` (inclusive; None: to the end), carried out by one distributed task.

    ``tier`` is "high" or "low" ("all": split before tiers existed);
    ``split_ms`` is when the row was split (as recorded; 0 in a task's copy).
    """

    row_id: int
    after: str
    last: str | None
    tier: str = "all"
    split_ms: int = 0


#: A sweep transaction taking longer than this is undone and redone in
#: smaller pieces: well inside the margin deliveries allow tier changes.
_SWEEP_MAX_SECONDS = readers.TIER_CHANGE_MARGIN_MS / 4000


class _SweepTooSlow(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Regeneration:
    """A feed to rebuild from the canonical store; ``token`` names the request
    (a newer request for the same feed supersedes it)."""

    feed: str
    token: int


class CanonicalStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- activities ---------------------------------------------------------

    def add_activity(
        self,
        feed: str,
        activity: Activity,
        now_ms: int,
        group_keys: Mapping[str, str],
        *,
        now_us: int | None = None,
    ) -> tuple[Activity, bool]:
        """Store ``activity`` and its delivery; returns ``(stored, created)``.

        ``group_keys`` are the groups it joins in grouped feed groups;
        ``now_us`` is when it is accepted (default: ``now_ms``).

        With a ``foreign_id`` already present in ``feed`` nothing is written
        and the existing activity comes back with ``created=False``.
        """
        if activity.foreign_id is not None:
            existing = self.get_by_foreign_id(feed, activity.foreign_id)
            if existing is not None:
                return existing, False
        try:
            with self.db.write() as conn:
                conn.execute(
                    activities.insert().values(
                        id=activity.id,
                        feed=feed,
                        foreign_id=activity.foreign_id,
                        doc=activity.to_json(),
                        group_keys=orjson.dumps(group_keys),
                        accepted_us=now_ms * 1000 if now_us is None else now_us,
                        version=FIRST_VERSION,
                    )
                )
                if activity.to:
                    conn.execute(
                        addressed.insert(),
                        [{"feed": t, "activity_id": activity.id} for t in activity.to],
                    )
                self._enqueue(conn, "deliver", activity, feed, now_ms, group_keys)
        except IntegrityError:
            # A concurrent publish of the same (feed, foreign_id) won the race.
            if activity.foreign_id is None:
                raise
            existing = self.get_by_foreign_id(feed, activity.foreign_id)
            if existing is None:
                raise
            return existing, False
        return activity, True

    def _enqueue(
        self,
        conn: Connection,
        kind: str,
        activity: Activity,
        source: str,
        now_ms: int,
        group_keys: Mapping[str, str],
    ) -> None:
        conn.execute(
            outbox.insert().values(
                kind=kind,
                activity_id=activity.id,
                source=source,
                targets=orjson.dumps(list(activity.to)),
                doc=activity.to_json(),
                group_keys=orjson.dumps(group_keys),
                created_ms=now_ms,
            )
        )

    def get_activity(self, activity_id: str) -> Activity | None:
        with self.db.read() as conn:
            doc = conn.execute(
                select(activities.c.doc).where(activities.c.id == activity_id)
            ).scalar_one_or_none()
        return None if doc is None else Activity.from_json(doc)

    def get_by_foreign_id(self, feed: str, foreign_id: str) -> Activity | None:
        with self.db.read() as conn:
            doc = conn.execute(
                select(activities.c.doc).where(
                    activities.c.feed == feed, activities.c.foreign_id == foreign_id
                )
            ).scalar_one_or_none()
        return None if doc is None else Activity.from_json(doc)

    def get_docs(self, activity_ids: Sequence[str]) -> dict[str, bytes]:
        """The stored JSON of each id that exists."""
        return {aid: doc for aid, (_, doc) in self.get_versioned_docs(activity_ids).items()}

    def get_versioned_docs(self, activity_ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """The version and stored JSON of each id that exists (hydration, on every
        page read that misses the cache)."""
        out: dict[str, tuple[int, bytes]] = {}
        with self.db.read() as conn:
            for part in _chunks(activity_ids):
                marks = ", ".join(["{p}"] * len(part))
                sql = f"SELECT id, version, doc FROM tidings_activities WHERE id IN ({marks})"
                out.update(
                    (aid, (version, bytes(doc)))
                    for aid, version, doc in self.db.fetch_raw(conn, sql, tuple(part))
                )
        return out

    def update_activity(
        self, activity_id: str, change: Callable[[Activity], Activity]
    ) -> tuple[Activity, int] | None:
        """Store ``change`` of the activity as it is now; returns the stored result
        and its version (None: no such activity).

        The read is part of the write and holds the row (FOR UPDATE on
        PostgreSQL; on SQLite every write transaction begins IMMEDIATE, under
        the database's write lock), so concurrent changes apply one after the
        other on the state the last one stored, and none is lost.
        """
        where = activities.c.id == activity_id
        with self.db.write() as conn:
            row = conn.execute(
                select(activities.c.doc, activities.c.version).where(where).with_for_update()
            ).one_or_none()
            if row is None:
                return None
            updated = change(Activity.from_json(row.doc))
            version: int = row.version + 1
            conn.execute(
                update(activities).where(where).values(doc=updated.to_json(), version=version)
            )
        return updated, version

    def remove_activity(self, feed: str, activity: Activity, now_ms: int) -> dict[str, str] | None:
        """Delete the activity and enqueue its retraction from every feed it reached;
        returns its group keys (None when ``feed`` holds no such activity).

        A delivery of it that has not started is cancelled in the same
        transaction; one already running finishes its chunk, and readers drop
        the id because its activity is gone.
        """
        where = (activities.c.id == activity.id, activities.c.feed == feed)
        with self.db.write() as conn:
            found = conn.execute(select(activities.c.group_keys).where(*where)).one_or_none()
            if found is None:
                return None
            group_keys = _keys(found.group_keys)
            conn.execute(delete(activities).where(*where))
            conn.execute(delete(addressed).where(addressed.c.activity_id == activity.id))
            cancelled = select(outbox.c.id).where(
                outbox.c.activity_id == activity.id, outbox.c.kind == "deliver"
            )
            conn.execute(delete(outbox_parts).where(outbox_parts.c.row_id.in_(cancelled)))
            conn.execute(delete(outbox).where(outbox.c.id.in_(cancelled)))
            self._enqueue(conn, "retract", activity, feed, now_ms, group_keys)
        return group_keys

    def unaddress(self, feed: str, activity_id: str) -> tuple[dict[str, str], bool] | None:
        """Take ``feed`` out of where the activity was addressed (its ``to``): its
        record goes, so rebuilds and deep reads leave it out, and so does ``feed``
        from the activity's pending deliveries. Returns the activity's group keys
        and whether it reaches ``feed`` through a follow as well (None when it was
        not addressed to ``feed``).

        A runner already carrying out the delivery may still write ``feed`` with
        the targets it read before this; as with removal, that is the one race.
        """
        a = activities.c
        with self.db.write() as conn:
            gone = delete(addressed).where(
                addressed.c.feed == feed, addressed.c.activity_id == activity_id
            )
            if not conn.execute(gone).rowcount:
                return None
            row = conn.execute(
                select(a.feed, a.group_keys).where(a.id == activity_id)
            ).one_or_none()
            if row is None:  # (removed in the meantime: its addressed rows went too)
                return None
            start = conn.execute(
                select(follows.c.history_from).where(
                    follows.c.follower == feed, follows.c.source == row.feed
                )
            ).one_or_none()
            pending = conn.execute(
                select(outbox.c.id, outbox.c.targets).where(
                    outbox.c.activity_id == activity_id, outbox.c.kind == "deliver"
                )
            ).all()
            for r in pending:
                targets = [t for t in orjson.loads(r.targets) if t != feed]
                conn.execute(
                    update(outbox).where(outbox.c.id == r.id).values(targets=orjson.dumps(targets))
                )
        followed = start is not None and activity_id >= (start.history_from or "")
        return _keys(row.group_keys), followed

    def group_keys(self, activity_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The group keys fixed at publish, by activity id (ids that exist)."""
        out: dict[str, dict[str, str]] = {}
        with self.db.read() as conn:
            for part in _chunks(activity_ids):
                rows = conn.execute(
                    select(activities.c.id, activities.c.group_keys).where(
                        activities.c.id.in_(part)
                    )
                )
                out.update((aid, _keys(raw)) for aid, raw in rows)
        return out

    def newest_ids(self, feed: str, limit: int) -> list[str]:
        """Ids of the newest ``limit`` activities added to ``feed`` itself."""
        with self.db.read() as conn:
            return list(
                conn.execute(
                    select(activities.c.id)
                    .where(activities.c.feed == feed)
                    .order_by(activities.c.id.desc())
                    .limit(limit)
                ).scalars()
            )

    def ids_from(self, source: str, activity_ids: Sequence[str], *, unless_to: str) -> list[str]:
        """Those of ``activity_ids`` added to ``source``, less any addressed to ``unless_to``."""
        out: list[str] = []
        with self.db.read() as conn:
            for part in _chunks(activity_ids):
                rows = conn.execute(
                    select(activities.c.id)
                    .where(activities.c.feed == source, activities.c.id.in_(part))
                    .where(
                        ~select(addressed.c.activity_id)
                        .where(
                            addressed.c.feed == unless_to,
                            addressed.c.activity_id == activities.c.id,
                        )
                        .exists()
                    )
                )
                out.extend(rows.scalars())
        return out

    # -- follows ------------------------------------------------------------

    def follow(
        self,
        pairs: Sequence[tuple[str, str]],
        now_ms: int,
        *,
        copy_limit: int = 0,
        lease_until_ms: int = 0,
    ) -> Followed:
        """Record follows; returns the pairs that were new (the others are left as
        they were) and, when ``copy_limit``, the copy of their sources' newest
        activities queued in the same transaction, claimed until ``lease_until_ms``.

        Each new follow's history starts at the oldest activity it copies, so
        reads reach the copied span before the copy is done.
        """
        unique = list(dict.fromkeys(pairs))
        if not unique:
            return Followed([], None)
        start = ids.floor_id(now_ms)
        fr = feed_reads.c
        with self.db.write() as conn:
            # The follower's tier, its row held (shared) until the commit: a sweep
            # or a wake-up changing it waits, then moves this follow too.
            tiers: dict[str, int] = {}
            for part in _chunks(sorted({f for f, _ in unique})):
                query = select(fr.feed, fr.tier).where(fr.feed.in_(part)).order_by(fr.feed)
                tiers.update(
                    (r.feed, r.tier) for r in conn.execute(query.with_for_update(read=True))
                )
            rows = [
                {
                    "follower": f,
                    "source": s,
                    "created_ms": now_ms,
                    "history_from": start,
                    "tier": tiers.get(f, readers.HIGH),
                    "tier_ms": now_ms,
                }
                for f, s in unique
            ]
            # One statement; RETURNING (not rowcount, on which drivers disagree
            # for ON CONFLICT DO NOTHING) names the pairs that were new.
            inserted = conn.execute(
                self.db.insert_ignore(follows)
                .values(rows)
                .returning(follows.c.follower, follows.c.source)
            ).all()
            new = {(r.follower, r.source) for r in inserted}
            created = [pair for pair in unique if pair in new]
            self._count(conn, created, +1)
            copy = None
            if copy_limit and created:
                copy = self._queue_copy(conn, created, start, copy_limit, now_ms, lease_until_ms)
        return Followed(created, copy)

    def _queue_copy(
        self,
        conn: Connection,
        created: Sequence[tuple[str, str]],
        start: str,
        limit: int,
        now_ms: int,
        lease_until_ms: int,
    ) -> CopyRow | None:
        """Fix what each of the new follows copies, start their history at its
        oldest activity, and queue the copy: one row for the whole batch, so a
        process that dies midway leaves it to a runner. Follows of sources with
        nothing to copy are left out (None: none is left)."""
        spans: dict[str, tuple[str, str]] = {}
        for source in sorted({s for _, s in created}):
            oldest, newest = self.db.fetch_raw(conn, _COPY_SPAN, (source, limit))[0]
            if newest is not None:
                spans[source] = (oldest, newest)
        lowered = [
            {"f": f, "s": s, "h": spans[s][0]}
            for f, s in created
            if s in spans and spans[s][0] < start
        ]
        if lowered:
            conn.execute(
                update(follows)
                .where(follows.c.follower == bindparam("f"), follows.c.source == bindparam("s"))
                .values(history_from=bindparam("h")),
                lowered,
            )
        copies = tuple(sorted((f, s, spans[s][1]) for f, s in created if s in spans))
        if not copies:
            return None
        token = _token()
        row_id = conn.execute(
            outbox.insert()
            .values(
                kind="copy",
                activity_id="",
                source="",
                targets=orjson.dumps({"limit": limit, "follows": copies}),
                lease_until_ms=lease_until_ms,
                attempts=1,
                created_ms=now_ms,
                claim_token=token,
            )
            .returning(outbox.c.id)
        ).scalar_one()
        return CopyRow(int(row_id), token, limit, copies, 0)

    def history_starts(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Where the history of each of the follows ``(follower, source)`` that
        exist starts."""
        out: dict[tuple[str, str], str] = {}
        c = follows.c
        with self.db.read() as conn:
            for start in range(0, len(pairs), _IN_CHUNK // 2):
                part = pairs[start : start + _IN_CHUNK // 2]
                rows = conn.execute(
                    select(c.follower, c.source, c.history_from).where(
                        tuple_(c.follower, c.source).in_(part)
                    )
                )
                out.update(((r.follower, r.source), r.history_from or "") for r in rows)
        return out

    def copied_ids(self, source: str, lowest: str, highest: str, limit: int) -> list[str]:
        """Ids of the newest ``limit`` activities of ``source`` from ``lowest`` to
        ``highest`` (inclusive), newest first: what a follow copies."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _COPIED, (source, lowest, highest, limit))
        return [row[0] for row in rows]

    def unfollow(self, follower: str, source: str) -> bool:
        with self.db.write() as conn:
            removed = conn.execute(
                delete(follows).where(follows.c.follower == follower, follows.c.source == source)
            ).rowcount
            if removed:
                self._count(conn, [(follower, source)], -1)
        return bool(removed)

    def _count(self, conn: Connection, pairs: Iterable[tuple[str, str]], step: int) -> None:
        followers: dict[str, int] = {}
        following: dict[str, int] = {}
        for follower, source in pairs:
            followers[source] = followers.get(source, 0) + step
            following[follower] = following.get(follower, 0) + step
        feeds = sorted(followers.keys() | following.keys())
        if not feeds:
            return
        conn.execute(self.db.insert_ignore(feed_stats), [{"feed": f} for f in feeds])
        for column, deltas in (("followers", followers), ("following", following)):
            if deltas:
                conn.execute(
                    update(feed_stats)
                    .where(feed_stats.c.feed == bindparam("f"))
                    .values({column: feed_stats.c[column] + bindparam("d")}),
                    [{"f": feed, "d": delta} for feed, delta in sorted(deltas.items())],
                )

    def followers(self, source: str, after: str | None, limit: int) -> list[Follow]:
        """Followers of ``source`` in follower order, strictly after ``after``."""
        return self._follows(follows.c.source, source, follows.c.follower, after, limit)

    def following(self, follower: str, after: str | None, limit: int) -> list[Follow]:
        """Sources ``follower`` follows in source order, strictly after ``after``."""
        return self._follows(follows.c.follower, follower, follows.c.source, after, limit)

    def _follows(
        self, by: Any, feed: str, order: Any, after: str | None, limit: int
    ) -> list[Follow]:
        query = select(follows).where(by == feed)
        if after is not None:
            query = query.where(order > after)
        with self.db.read() as conn:
            rows = conn.execute(query.order_by(order).limit(limit))
            return [Follow(r.follower, r.source, r.created_ms) for r in rows]

    def follower_chunk(self, source: str, after: str | None, limit: int) -> list[str]:
        """Followers of ``source`` after ``after``, sorted: the unit of delivery.

        Hot path of every fan-out, so it skips SQLAlchemy's row processing,
        which costs twice the query itself at 5,000 rows.
        """
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _FOLLOWER_CHUNK, (source, after or "", limit))
        return [row[0] for row in rows]

    def counts(self, feed: str) -> tuple[int, int]:
        """``(followers, following)`` of a feed."""
        with self.db.read() as conn:
            row = conn.execute(
                select(feed_stats.c.followers, feed_stats.c.following).where(
                    feed_stats.c.feed == feed
                )
            ).one_or_none()
        return (0, 0) if row is None else (int(row.followers), int(row.following))

    # -- fan-out strategy and reading past the cap ---------------------------

    def strategy(self, feed: str) -> Strategy:
        return self.strategies([feed]).get(feed, "push")

    def pulled_since(self, feed: str) -> int | None:
        """When ``feed`` went to pull (ms), or None when it is not pulled."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _PULLED_SINCE, (feed,))
        return int(rows[0][0]) if rows else None

    def any_pulled(self) -> bool:
        """Whether any source is pulled or draining (readers then merge at all)."""
        with self.db.read() as conn:
            return bool(self.db.fetch_raw(conn, _ANY_PULLED, ()))

    def strategies(self, feeds: Sequence[str]) -> dict[str, Strategy]:
        """The strategy of each of ``feeds`` that is not pushed."""
        out: dict[str, Strategy] = {}
        with self.db.read() as conn:
            for part in _chunks(list(dict.fromkeys(feeds))):
                rows = conn.execute(
                    select(fanout.c.feed, fanout.c.strategy).where(fanout.c.feed.in_(part))
                )
                out.update((feed, _strategy(raw)) for feed, raw in rows)
        return out

    def set_strategy(self, feed: str, strategy: Strategy, now_ms: int) -> None:
        with self.db.write() as conn:
            conn.execute(delete(fanout).where(fanout.c.feed == feed))
            if strategy != "push":
                conn.execute(
                    fanout.insert().values(feed=feed, strategy=strategy, changed_ms=now_ms)
                )

    def fanout_candidates(self, threshold: int) -> list[tuple[str, int, Strategy]]:
        """``(feed, followers, strategy)`` of every source that may need to change:
        those above ``threshold`` and those not pushed now."""
        query = (
            select(feed_stats.c.feed, feed_stats.c.followers, fanout.c.strategy)
            .select_from(feed_stats.outerjoin(fanout, fanout.c.feed == feed_stats.c.feed))
            .where((feed_stats.c.followers > threshold) | fanout.c.feed.is_not(None))
            .order_by(feed_stats.c.feed)
        )
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [(r.feed, int(r.followers), _strategy(r.strategy)) for r in rows]

    def pulled(
        self, follower: str, *, before: str | None, floor: str | None, limit: int
    ) -> Entries:
        """The newest ``limit`` activities before ``before`` of the sources
        ``follower`` follows that readers merge, from where each follow starts.

        On every flat read: one statement when nothing is pulled, two when
        something is, on the driver's own cursor (SQLAlchemy's statement and
        row processing would cost more than the queries).
        """
        with self.db.read() as conn:
            sources = self.db.fetch_raw(conn, _PULLED, (follower,))
            spans = [(_SPAN, source, start or "") for source, start in sources]
            # Each activity has one feed: the sources' spans are disjoint.
            return self._newest(conn, spans, before, floor, limit, distinct=False)

    def follower_spans(self, source: str, after: str | None, limit: int) -> list[tuple[str, str]]:
        """``(follower, history_from)`` of followers of ``source`` after ``after``, sorted."""
        query = select(follows.c.follower, follows.c.history_from).where(follows.c.source == source)
        if after is not None:
            query = query.where(follows.c.follower > after)
        with self.db.read() as conn:
            rows = conn.execute(query.order_by(follows.c.follower).limit(limit))
            return [(r.follower, r.history_from or "") for r in rows]

    def feeds(self) -> list[str]:
        """Every feed the canonical store knows of: published to, addressed, or following."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _EVERY_FEED, ())
        return [row[0] for row in rows]

    def history(self, feed: str, *, before: str | None, floor: str | None, limit: int) -> Entries:
        """The newest ``limit`` activities before ``before`` of the history of ``feed``:
        its own, those addressed to it, and those of every source it follows
        from where that follow starts."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _FOLLOWING, (feed,))
            spans = [(_SPAN, feed, ""), (_ADDRESSED_SPAN, feed, "")]
            spans += [(_SPAN, source, start or "") for source, start in rows]
            return self._newest(conn, spans, before, floor, limit, distinct=True)

    def _newest(
        self,
        conn: Connection,
        spans: Sequence[tuple[str, str, str]],
        before: str | None,
        floor: str | None,
        limit: int,
        *,
        distinct: bool,
    ) -> Entries:
        lists: list[list[str]] = []
        glue = " UNION " if distinct else " UNION ALL "
        docs: dict[str, bytes] = {}
        for start in range(0, len(spans), _SPAN_CHUNK):
            part = spans[start : start + _SPAN_CHUNK]
            union = glue.join(t.replace("{n}", str(n)) for n, (t, _, _) in enumerate(part))
            params: list[Any] = []
            for _, feed, lower in part:
                params += [feed, max(lower, floor or ""), before or _TOP, limit]
            sql = _NEWEST_OF_SPANS.replace("{spans}", union)
            rows = self.db.fetch_raw(conn, sql, (*params, limit))
            lists.append([aid for aid, _ in rows])
            docs.update((aid, bytes(doc)) for aid, doc in rows)
        return Entries(lists, docs)

    # -- seen/read marks of notification feeds ---------------------------------

    def record_marks(
        self, feed: str, groups: Sequence[str] | None, *, read: bool, now_us: int
    ) -> None:
        """Record that ``groups`` of ``feed`` (None: every group) were marked seen
        (and read) at ``now_us``. A mark of every group as read supersedes the
        per-group marks before it, which are dropped."""
        every = groups is None
        keys = [""] if groups is None else sorted(set(groups))
        gm = group_marks.c
        with self.db.write() as conn:
            if every and read:
                conn.execute(delete(group_marks).where(gm.feed == feed, gm.every == 0))
            for part in _chunks(keys):
                insert = self.db.dialect_insert(group_marks)
                later = insert.excluded
                rows = [
                    {
                        "feed": feed,
                        "every": int(every),
                        "gkey": k,
                        "seen_us": now_us,
                        "read_us": now_us if read else 0,
                    }
                    for k in part
                ]
                conn.execute(
                    insert.values(rows).on_conflict_do_update(
                        index_elements=[gm.feed, gm.every, gm.gkey],
                        # A mark never moves back (two marks may commit out of order).
                        set_={
                            column: case(
                                (later[column] > gm[column], later[column]), else_=gm[column]
                            )
                            for column in ("seen_us", "read_us")
                        },
                    )
                )

    def marks(self, feed: str) -> tuple[tuple[int, int], dict[str, tuple[int, int]]]:
        """The marks recorded for ``feed``: ``(seen_us, read_us)`` of every group
        at once, and by group key."""
        gm = group_marks.c
        every = (0, 0)
        by_key: dict[str, tuple[int, int]] = {}
        with self.db.read() as conn:
            rows = conn.execute(
                select(gm.every, gm.gkey, gm.seen_us, gm.read_us).where(gm.feed == feed)
            )
            for r in rows:
                if r.every:
                    every = (int(r.seen_us), int(r.read_us))
                else:
                    by_key[r.gkey] = (int(r.seen_us), int(r.read_us))
        return every, by_key

    def accepted_us(self, activity_ids: Sequence[str]) -> dict[str, int]:
        """When each activity was accepted (µs; those accepted before schema v5:
        their own time)."""
        out: dict[str, int] = {}
        with self.db.read() as conn:
            for part in _chunks(list(activity_ids)):
                rows = conn.execute(
                    select(activities.c.id, activities.c.accepted_us).where(
                        activities.c.id.in_(part)
                    )
                )
                out.update(
                    (r.id, ids.id_ms(r.id) * 1000 if r.accepted_us is None else int(r.accepted_us))
                    for r in rows
                )
        return out

    # -- readers: idle followers and delivery tiers ---------------------------
    #
    # Lock order, for PostgreSQL: a transaction that changes a feed's tier or
    # state locks its tidings_feed_reads row first (several: in feed order),
    # then its follows. follow() takes the same rows shared, so a new follow
    # gets the tier its follower has when it commits.

    def reader_state(self, feed: str) -> str:
        """``active`` (also when never read), ``idle`` or ``regenerating``."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _READER_STATE, (feed,))
        return str(rows[0][0]) if rows else "active"

    def any_unsettled(self) -> bool:
        """Whether any feed is idle or being rebuilt (else readers need not ask)."""
        with self.db.read() as conn:
            return bool(self.db.fetch_raw(conn, _ANY_UNSETTLED, ()))

    def record_reads(self, reads: Mapping[str, int], now_ms: int) -> list[str]:
        """Record when feeds were read (``{feed: ms}``); returns those that were
        idle and so are now regenerating, their follows back in the high tier
        in the same transaction (deliveries reach them again from the commit)."""
        woken: list[str] = []
        fr = feed_reads.c
        with self.db.write() as conn:
            for part in _chunks(sorted(reads)):
                # Rows first inserted (those already there are left), then every
                # row locked, each statement in feed order: no two writers wait
                # on each other in opposite orders.
                conn.execute(
                    self.db.insert_ignore(feed_reads),
                    [_tracked(f, reads[f], now_ms) for f in part],
                )
                query = select(fr.feed, fr.read_ms, fr.state, fr.state_ms).where(fr.feed.in_(part))
                known = {r.feed: r for r in conn.execute(query.order_by(fr.feed).with_for_update())}
                later = [{"f": f, "t": reads[f]} for f, r in known.items() if r.read_ms < reads[f]]
                if later:
                    conn.execute(
                        update(feed_reads)
                        .where(fr.feed == bindparam("f"))
                        .values(read_ms=bindparam("t")),
                        later,
                    )
                # A read newer than the one the feed was idled on wakes it.
                back = sorted(
                    f for f, r in known.items() if r.state == "idle" and reads[f] > r.read_ms
                )
                if back:
                    self._request_rebuilds(conn, back, now_ms, tier=readers.HIGH)
                    conn.execute(
                        update(follows)
                        .where(follows.c.follower.in_(back))
                        .values(tier=readers.HIGH, tier_ms=now_ms)
                    )
                    woken += back
        return woken

    def sweep_readers(
        self,
        now_ms: Callable[[], int],
        *,
        recent_ms: int,
        idle_ms: int | None,
        can_idle: Callable[[str], bool],
        chunk: int = 500,
    ) -> Iterator[list[str]]:
        """Put each follower feed's follows in the tier its last read gives it,
        and mark idle the active feeds ``can_idle`` accepts that were not read
        for ``idle_ms`` (None: none). Yields the feeds newly idle, a transaction
        of ``chunk`` feeds at a time, for the caller to clear their stores.

        Short transactions, each with its own time: a follow's ``tier_ms`` is
        never far before the commit that makes its tier visible (see split).
        Follows are rewritten only for feeds whose tier changes. A follower
        feed never read is taken as read now: tracking starts here.
        """
        self._track_followers(now_ms())
        fr = feed_reads.c
        after = ""
        size = chunk
        while True:
            try:
                with self.db.write() as conn:
                    started = time.monotonic()
                    rows = conn.execute(
                        select(fr.feed, fr.read_ms, fr.tier, fr.state)
                        .where(fr.feed > after)
                        .order_by(fr.feed)
                        .limit(size)
                        .with_for_update()
                    ).all()
                    if not rows:
                        return
                    idled = self._sweep_chunk(conn, rows, now_ms(), recent_ms, idle_ms, can_idle)
                    if size > 1 and time.monotonic() - started > _SWEEP_MAX_SECONDS:
                        # Its tier_ms would be too far before the commit (see
                        # split): undone, and done again in smaller pieces.
                        raise _SweepTooSlow
            except _SweepTooSlow:
                size = max(1, size // 2)
                continue
            after = rows[-1].feed
            yield idled

    def _sweep_chunk(
        self,
        conn: Connection,
        rows: Sequence[Any],
        now: int,
        recent_ms: int,
        idle_ms: int | None,
        can_idle: Callable[[str], bool],
    ) -> list[str]:
        fr = feed_reads.c
        # Only follower feeds go idle (a source's own feed is written directly).
        following = set(
            conn.execute(
                select(follows.c.follower)
                .where(follows.c.follower.in_([r.feed for r in rows]))
                .distinct()
            ).scalars()
        )
        idled: list[str] = []
        moves: dict[int, list[str]] = {}
        for r in rows:
            if r.state == "idle":
                continue  # until read again (record_reads wakes it)
            may_idle = r.state == "active" and r.feed in following and can_idle(r.feed)
            tier = readers.tier_of(r.read_ms, now, recent_ms, idle_ms if may_idle else None)
            if tier == readers.IDLE:
                idled.append(r.feed)
            if tier != r.tier:
                moves.setdefault(tier, []).append(r.feed)
        if idled:
            conn.execute(
                update(feed_reads)
                .where(fr.feed.in_(idled))
                .values(state="idle", state_ms=now, lease_ms=0)
            )
        for tier, feeds in sorted(moves.items()):
            conn.execute(update(feed_reads).where(fr.feed.in_(feeds)).values(tier=tier))
            conn.execute(
                update(follows)
                .where(follows.c.follower.in_(feeds), follows.c.tier != tier)
                .values(tier=tier, tier_ms=now)
            )
        return idled

    def _track_followers(self, now_ms: int) -> None:
        after = ""
        while True:
            with self.db.read() as conn:
                rows = self.db.fetch_raw(conn, _UNTRACKED, (after, _IN_CHUNK))
            if not rows:
                return
            feeds = [row[0] for row in rows]
            after = feeds[-1]
            with self.db.write() as conn:
                conn.execute(
                    self.db.insert_ignore(feed_reads), [_tracked(f, now_ms, now_ms) for f in feeds]
                )

    def regenerate(self, feeds: Sequence[str], now_ms: int) -> list[str]:
        """Have those of ``feeds`` that are not idle rebuilt (again); returns them."""
        fr = feed_reads.c
        out: list[str] = []
        with self.db.write() as conn:
            for part in _chunks(sorted(feeds)):
                query = select(fr.feed).where(fr.feed.in_(part), fr.state != "idle")
                chosen = list(conn.execute(query.order_by(fr.feed).with_for_update()).scalars())
                if chosen:
                    self._request_rebuilds(conn, chosen, now_ms)
                    out += chosen
        return out

    def _request_rebuilds(
        self, conn: Connection, feeds: Sequence[str], now_ms: int, tier: int | None = None
    ) -> None:
        # The token (state_ms) grows strictly per feed: a rebuild in flight for
        # an older request cannot mark a newer one done.
        fr = feed_reads.c
        token = case((fr.state_ms >= now_ms, fr.state_ms + 1), else_=now_ms)
        values: dict[str, Any] = {"state": "regenerating", "state_ms": token, "lease_ms": 0}
        if tier is not None:
            values["tier"] = tier
        conn.execute(update(feed_reads).where(fr.feed.in_(feeds)).values(values))

    def claim_regenerations(
        self, now_ms: int, lease_ms: int, limit: int = 16
    ) -> list[Regeneration]:
        """Lease up to ``limit`` rebuilds whose lease has lapsed."""
        with self.db.read() as conn:
            # Runners poll this on every wake-up: a read, not a write transaction.
            if not self.db.fetch_raw(conn, _REBUILD_DUE, (now_ms,)):
                return []
        fr = feed_reads.c
        claimed: list[Regeneration] = []
        with self.db.write() as conn:
            rows = conn.execute(
                select(fr.feed, fr.state_ms, fr.lease_ms)
                .where(fr.state == "regenerating", fr.lease_ms <= now_ms)
                .order_by(fr.lease_ms, fr.feed)
                .limit(limit)
            ).all()
            for r in sorted(rows, key=lambda r: r.feed):  # lock order: by feed
                taken = conn.execute(
                    update(feed_reads)
                    .where(
                        fr.feed == r.feed,
                        fr.state == "regenerating",
                        fr.state_ms == r.state_ms,
                        fr.lease_ms == r.lease_ms,
                    )
                    .values(lease_ms=now_ms + lease_ms)
                ).rowcount
                if taken:
                    claimed.append(Regeneration(r.feed, int(r.state_ms)))
        return claimed

    def regenerated(self, job: Regeneration, now_ms: int) -> bool:
        """Mark ``job`` done: the feed is active, unless it was asked to be rebuilt
        again meanwhile (then the newer request stays pending)."""
        fr = feed_reads.c
        with self.db.write() as conn:
            return (
                conn.execute(
                    update(feed_reads)
                    .where(
                        fr.feed == job.feed,
                        fr.state == "regenerating",
                        fr.state_ms == job.token,
                    )
                    .values(state="active", lease_ms=0)
                ).rowcount
                > 0
            )

    def retry_regeneration(self, job: Regeneration, at_ms: int) -> None:
        """Have a failed rebuild tried again from ``at_ms`` (a lease it holds until then)."""
        fr = feed_reads.c
        with self.db.write() as conn:
            conn.execute(
                update(feed_reads)
                .where(fr.feed == job.feed, fr.state == "regenerating", fr.state_ms == job.token)
                .values(lease_ms=at_ms)
            )

    def reader_counts(self) -> dict[str, int]:
        """Tracked feeds by state."""
        fr = feed_reads.c
        with self.db.read() as conn:
            rows = conn.execute(select(fr.state, func.count()).group_by(fr.state)).all()
        return {state: int(n) for state, n in rows}

    # -- outbox -------------------------------------------------------------

    def claim(self, now_ms: int, lease_ms: int, limit: int = 16) -> list[Claimed]:
        """Lease up to ``limit`` pending rows whose lease has lapsed, oldest first.

        Each claim gets a token of its own: progress, release and completion
        apply only while the row is still under it (see :meth:`advance`).
        """
        with self.db.write() as conn:
            rows = conn.execute(
                select(outbox)
                .where(outbox.c.lease_until_ms <= now_ms)
                .order_by(outbox.c.id)
                .limit(limit)
            ).all()
            # Rows queued before schema v2 carry no copy of their activity.
            legacy = [r.activity_id for r in rows if r.doc is None and r.kind != "copy"]
            docs = (
                dict(
                    conn.execute(
                        select(activities.c.id, activities.c.doc).where(activities.c.id.in_(legacy))
                    ).tuples()
                )
                if legacy
                else {}
            )
            claimed: list[Claimed] = []
            for r in rows:
                token = _token()
                # The lease compare-and-set keeps two runners off one row.
                taken = conn.execute(
                    update(outbox)
                    .where(outbox.c.id == r.id, outbox.c.lease_until_ms == r.lease_until_ms)
                    .values(
                        lease_until_ms=now_ms + lease_ms,
                        attempts=outbox.c.attempts + 1,
                        claim_token=token,
                    )
                ).rowcount
                if taken:
                    claimed.append(_claimed(r, r.doc or docs.get(r.activity_id), token))
        return claimed

    def outbox_row(self, row_id: int) -> OutboxRow | None:
        """A pending delivery or retraction (None once completed or cancelled),
        without claiming it."""
        with self.db.read() as conn:
            r = conn.execute(select(outbox).where(outbox.c.id == row_id)).one_or_none()
            if r is None or r.kind == "copy":
                return None
            doc = r.doc
            if doc is None:  # queued before schema v2
                doc = conn.execute(
                    select(activities.c.doc).where(activities.c.id == r.activity_id)
                ).scalar_one_or_none()
        return _outbox_row(r, doc)

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

    def split(self, row: OutboxRow, size: int, now_ms: int) -> list[Part] | None:
        """The parts of ``row`` not yet done, each of up to ``size`` followers of
        one tier: "high" (read recently) and "low" parts; idle followers, none.

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
                return [_part(r) for r in recorded if not r.done]
            parts: list[Part] = []
            for name, tier in (("high", readers.HIGH), ("low", readers.LOW)):
                # A row a thread runner had begun resumes where it stopped.
                after = row.position or ""
                # A tier without followers here costs one walk of the index.
                tier_parts: list[Part] = []
                while self.db.fetch_raw(conn, _ANY_OF_TIER, (row.source, after, tier)):
                    nth = self.db.fetch_raw(conn, _NTH_OF_TIER, (row.source, after, tier, size - 1))
                    if not nth:
                        tier_parts.append(Part(row.id, after, None, name, now_ms))
                        break
                    tier_parts.append(Part(row.id, after, nth[0][0], name, now_ms))
                    after = nth[0][0]
                if tier_parts:
                    # The tier's last part runs to the end of the ids (a follower
                    # that joins the tier while this runs is past its last one).
                    last = tier_parts[-1]
                    tier_parts[-1] = Part(row.id, last.after, None, name, now_ms)
                parts += tier_parts
            if parts:
                conn.execute(
                    outbox_parts.insert(),
                    [
                        {
                            "row_id": p.row_id,
                            "tier": p.tier,
                            "after": p.after,
                            "last": p.last,
                            "split_ms": p.split_ms,
                        }
                        for p in parts
                    ],
                )
        return parts

    def recorded_part(self, part: Part) -> Part | None:
        """``part`` as recorded, if it is and is not done.

        A task can outlive its row (a duplicate redelivered by the broker
        long after): a part no longer recorded must change nothing. Row ids
        are never reused, so a recorded part is always of the row it names.
        """
        with self.db.read() as conn:
            r = conn.execute(select(outbox_parts).where(*_part_key(part))).one_or_none()
        return None if r is None or r.done else _part(r)

    def part_followers(self, source: str, part: Part) -> list[str]:
        """The followers of ``source`` in ``part`` (as recorded), sorted."""
        low, high = readers.PART_TIERS[part.tier]
        since = part.split_ms - readers.TIER_CHANGE_MARGIN_MS
        with self.db.read() as conn:
            if part.last is None:
                params: tuple[Any, ...] = (source, part.after, low, high, since)
                rows = self.db.fetch_raw(conn, _PART_TAIL, params)
            else:
                params = (source, part.after, part.last, low, high, since)
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


def _tracked(feed: str, read_ms: int, now_ms: int) -> dict[str, Any]:
    return {
        "feed": feed,
        "read_ms": read_ms,
        "tier": readers.HIGH,
        "state": "active",
        "state_ms": now_ms,
        "lease_ms": 0,
    }


def _part(r: Any) -> Part:
    return Part(r.row_id, r.after, r.last, r.tier, int(r.split_ms))


def _part_key(part: Part) -> tuple[Any, ...]:
    c = outbox_parts.c
    return (c.row_id == part.row_id, c.tier == part.tier, c.after == part.after)


def _keys(raw: bytes | None) -> dict[str, str]:
    # Rows written before schema v2 have none: keys are then rendered anew.
    return {} if raw is None else dict(orjson.loads(raw))


def _token() -> int:
    # Random rather than counted: unique without reading the row first.
    return secrets.randbits(63)


def _held(row: Claimed) -> tuple[Any, ...]:
    return (outbox.c.id == row.id, outbox.c.claim_token == row.token)


def _claimed(r: Any, doc: bytes | None, token: int) -> Claimed:
    if r.kind == "copy":
        spec = orjson.loads(r.targets)
        follows = tuple((f, s, newest) for f, s, newest in spec["follows"])
        return CopyRow(r.id, token, int(spec["limit"]), follows, int(r.position or 0))
    return _outbox_row(r, doc, token)


def _outbox_row(r: Any, doc: bytes | None, token: int = 0) -> OutboxRow:
    return OutboxRow(
        id=r.id,
        kind=r.kind,
        activity=_outbox_activity(r.activity_id, doc),
        source=r.source,
        targets=tuple(orjson.loads(r.targets)),
        position=r.position,
        group_keys=_keys(r.group_keys),
        token=token,
    )


def _strategy(raw: str | None) -> Strategy:
    if raw == "pull":
        return "pull"
    return "draining" if raw == "draining" else "push"


def _outbox_activity(activity_id: str, doc: bytes | None) -> Activity:
    if doc is not None:
        return Activity.from_json(doc)
    # A pre-v2 retraction of an activity already deleted: its id is all that
    # is left, which is all flat feeds need.
    return Activity(activity_id, "", "", "", ms_time(activity_id))


def _chunks(items: Sequence[str], size: int = _IN_CHUNK) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


__all__ = ["CanonicalStore", "Claimed", "CopyRow", "Follow", "Followed", "OutboxRow", "Part"]
