"""Follows, the follower counts kept with them, and the copy of a source's
newest activities a new follow queues in the same transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, delete, func, select, tuple_, update

from tidings.canonical.db import Database
from tidings.canonical.follow_rows import count_follows, insert_follows
from tidings.canonical.follower_lists import FollowerList, FollowerLists
from tidings.canonical.rows import IN_CHUNK, CopyRow, chunks, new_token
from tidings.canonical.schema import feed_stats, follows, outbox, unfollows
from tidings.core import ids
from tidings.core.clock import real_monotonic
from tidings.core.fanout import OutboxKind
from tidings.core.readers import Tier
from tidings.core.results import Follow
from tidings.core.rules import Blocked

#: How long unfollows stay logged: longer than a delivery keeps its lease
#: (60 s) plus the clock margin deliveries allow (60 s), with room to spare.
UNFOLLOW_LOG_MS = 600_000

# The followers (idle ones skipped) of some sources ({sources}: their placeholders).
_SMALL_FOLLOWERS = (
    "SELECT source, follower, since_row FROM tidings_follows WHERE source IN ({sources}) "
    "AND tier < 2 ORDER BY source, follower"
)
# Unfollows of some sources logged since a time ({sources}: their placeholders).
_UNFOLLOWED = (
    "SELECT follower, source FROM tidings_unfollows WHERE source IN ({sources}) AND ms >= {p}"
)

# "{p}" is the driver's placeholder. Every feed id sorts above "". Idle
# followers (tier 2) are skipped by deliveries; the query reads only the
# (source, follower, tier, tier_ms) index.
_FOLLOWER_CHUNK = (
    "SELECT follower FROM tidings_follows WHERE source = {p} AND follower > {p} "
    "AND tier < 2 AND since_row < {p} ORDER BY follower LIMIT {p}"
)
# The tiers of some feeds ({feeds}: a set parameter), their rows held.
_HELD_TIERS = "SELECT feed, tier FROM tidings_feed_reads WHERE feed IN ({feeds}) ORDER BY feed"
_FOLLOWER_STATS = (
    "SELECT feed, followers, follows_version FROM tidings_feed_stats WHERE feed IN ({feeds})"
)
# A source's activity ``t`` that reaches its followers: not one placed there.
_UNPLACED = "NOT EXISTS (SELECT 1 FROM tidings_placed p WHERE p.activity_id = t.id)"
# The span a follow copies, for many sources at once: the oldest and newest
# of each source's newest ``copy_limit`` activities (NULL: nothing to copy).
# Both read the (feed, id) index, and the placed table's key for each id.
_COPY_SPANS_SQLITE = (
    "SELECT s.value, (SELECT min(id) FROM (SELECT id FROM tidings_activities t "
    f"WHERE feed = s.value AND {_UNPLACED} ORDER BY id DESC LIMIT {{p}})), "
    "(SELECT max(id) FROM tidings_activities t WHERE feed = s.value "
    f"AND {_UNPLACED}) FROM json_each({{p}}) AS s"
)
_COPY_SPANS_POSTGRES = (
    "SELECT s.source, x.lo, x.hi FROM unnest(CAST({p} AS text[])) AS s(source) "
    "CROSS JOIN LATERAL (SELECT min(id) AS lo, max(id) AS hi FROM (SELECT id "
    f"FROM tidings_activities t WHERE feed = s.source AND {_UNPLACED} "
    "ORDER BY id DESC LIMIT {p}) AS n) AS x"
)
_COPIED = (
    "SELECT id FROM tidings_activities t WHERE feed = {p} AND id >= {p} AND id <= {p} "
    f"AND {_UNPLACED} ORDER BY id DESC LIMIT {{p}}"
)


# The history starts of many follows, by (follower, source), one query per chunk.
_BLOCKS_AMONG = (
    "SELECT user_id, target FROM tidings_blocks WHERE user_id IN ({users}) AND target IN ({users})"
)
_STARTS_SQLITE = (
    "SELECT f.follower, f.source, f.history_from FROM json_each({p}) AS j "
    "JOIN tidings_follows f ON f.follower = json_extract(j.value, '$[0]') "
    "AND f.source = json_extract(j.value, '$[1]')"
)
_STARTS_POSTGRES = (
    "SELECT f.follower, f.source, f.history_from "
    "FROM jsonb_array_elements(CAST({p} AS jsonb)) AS j(r) "
    "JOIN tidings_follows f ON f.follower = j.r->>0 AND f.source = j.r->>1"
)
# Many spans at once: each the newest `limit` ids of a source from `lo` to `hi`
# (inclusive), placed ones left out. Both read those ids through the (feed,
# id) index, each probing the (small) placed table's key.
_COPIED_MANY_SQLITE = (
    "WITH s(n, source, lo, hi) AS (SELECT key, json_extract(value, '$[0]'), "
    "json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each({p})) "
    "SELECT s.n, t.id FROM s JOIN tidings_activities t ON t.feed = s.source "
    "AND t.id <= s.hi AND t.id >= COALESCE((SELECT b.id FROM tidings_activities b "
    "WHERE b.feed = s.source AND b.id >= s.lo AND b.id <= s.hi AND NOT EXISTS "
    "(SELECT 1 FROM tidings_placed q WHERE q.activity_id = b.id) "
    f"ORDER BY b.id DESC LIMIT 1 OFFSET {{p}}), s.lo) AND {_UNPLACED} "
    "ORDER BY s.n, t.id DESC"
)
_COPIED_MANY_POSTGRES = (
    "SELECT s.n - 1, x.id FROM jsonb_array_elements(CAST({p} AS jsonb)) "
    "WITH ORDINALITY AS s(r, n) CROSS JOIN LATERAL (SELECT id FROM tidings_activities t "
    f"WHERE feed = s.r->>0 AND id >= s.r->>1 AND id <= s.r->>2 AND {_UNPLACED} "
    "ORDER BY id DESC LIMIT {p}) AS x "
    "ORDER BY s.n, x.id DESC"
)


def _held_tiers(db: Database, conn: Connection, feeds: set[str]) -> dict[str, int]:
    """The feeds' tiers, their rows held (shared) until the commit: a sweep or
    a wake-up changing one waits, then moves the new follows too."""
    # The feeds as one parameter, on the driver's cursor: SQLAlchemy took
    # longer to compile an IN list of a batch's 1,000 feeds than to run it.
    sql = _HELD_TIERS.replace("{feeds}", db.in_set())
    if db.dialect != "sqlite":  # (SQLite: the write lock holds them)
        sql += " FOR SHARE"
    tiers: dict[str, int] = {}
    for part in chunks(sorted(feeds)):
        tiers.update((feed, tier) for feed, tier in db.fetch_raw(conn, sql, (db.set_param(part),)))
    return tiers


@dataclass(frozen=True, slots=True)
class Followed:
    """The pairs a follow call created, and the copy it queued (if any)."""

    created: list[tuple[str, str]]
    copy: CopyRow | None


class Follows:
    """Who follows whom, from when, and how many."""

    def __init__(self, db: Database, monotonic: Callable[[], float] = real_monotonic) -> None:
        self.db = db
        #: Follower lists of small sources, kept between batched deliveries.
        self.lists = FollowerLists(clock=monotonic)

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
        with self.db.write() as conn:
            self.db.lock_sources(conn, [s for _, s in unique], shared=False)
            # Under the sources' locks, which a block takes too: a block either
            # committed before (and is seen here) or waits, and then finds
            # these follows to end.
            _refuse_blocked(self.db, conn, unique)
            since_row = self.db.outbox_mark(conn)
            tiers = _held_tiers(self.db, conn, {f for f, _ in unique})
            # What each follow would copy: its history starts at the oldest.
            spans = (
                self._copy_spans(conn, sorted({s for _, s in unique}), copy_limit)
                if copy_limit
                else {}
            )
            rows = [
                {
                    "follower": f,
                    "source": s,
                    "created_ms": now_ms,
                    "history_from": min(start, spans[s][0]) if s in spans else start,
                    "tier": tiers.get(f, Tier.HIGH),
                    "tier_ms": now_ms,
                    "since_row": since_row,
                }
                for f, s in unique
            ]
            created = insert_follows(self.db, conn, rows)
            count_follows(self.db, conn, created, +1)
            copy = None
            if copy_limit and created:
                copy = self._queue_copy(conn, created, spans, copy_limit, now_ms, lease_until_ms)
        return Followed(created, copy)

    def _copy_spans(
        self, conn: Connection, sources: Sequence[str], limit: int
    ) -> dict[str, tuple[str, str]]:
        """``(oldest, newest)`` of the newest ``limit`` activities of each of
        ``sources`` that has any: one query per chunk of sources."""
        spans: dict[str, tuple[str, str]] = {}
        for part in chunks(sources):
            params: tuple[Any, ...]
            if self.db.dialect == "sqlite":
                params = (limit, orjson.dumps(list(part)).decode())
                rows = self.db.fetch_raw(conn, _COPY_SPANS_SQLITE, params)
            else:
                rows = self.db.fetch_raw(conn, _COPY_SPANS_POSTGRES, (list(part), limit))
            spans.update((source, (lo, hi)) for source, lo, hi in rows if hi is not None)
        return spans

    def _queue_copy(
        self,
        conn: Connection,
        created: Sequence[tuple[str, str]],
        spans: Mapping[str, tuple[str, str]],
        limit: int,
        now_ms: int,
        lease_until_ms: int,
    ) -> CopyRow | None:
        """Queue the copy of the new follows' ``spans`` (by source: the oldest
        and newest id each copies, their history starting at the oldest): one
        row for the whole batch, so a process that dies midway leaves it to a
        runner. Follows of sources with nothing to copy are left out (None:
        none is left)."""
        copies = tuple(sorted((f, s, spans[s][1]) for f, s in created if s in spans))
        if not copies:
            return None
        token = new_token()
        row_id = conn.execute(
            outbox.insert()
            .values(
                kind=OutboxKind.COPY,
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
        with self.db.read() as conn:
            for start in range(0, len(pairs), IN_CHUNK):
                part = pairs[start : start + IN_CHUNK]
                sql = _STARTS_SQLITE if self.db.dialect == "sqlite" else _STARTS_POSTGRES
                rows = self.db.fetch_raw(conn, sql, (orjson.dumps(part).decode(),))
                out.update(((follower, source), start or "") for follower, source, start in rows)
        return out

    def copied_ids_many(
        self, spans: Sequence[tuple[str, str, str]], limit: int
    ) -> dict[tuple[str, str, str], list[str]]:
        """:meth:`copied_ids` of many ``(source, lowest, highest)`` spans, in one
        query per chunk of them."""
        out: dict[tuple[str, str, str], list[str]] = {span: [] for span in spans}
        if limit <= 0:
            return out
        ordered = list(out)
        with self.db.read() as conn:
            for start in range(0, len(ordered), IN_CHUNK):
                part = ordered[start : start + IN_CHUNK]
                spans_param = orjson.dumps(part).decode()
                if self.db.dialect == "sqlite":
                    sql, params = _COPIED_MANY_SQLITE, (spans_param, limit - 1)
                else:
                    sql, params = _COPIED_MANY_POSTGRES, (spans_param, limit)
                for n, activity_id in self.db.fetch_raw(conn, sql, params):
                    out[part[int(n)]].append(activity_id)
        return out

    def followers_among(
        self, source: str, feeds: Sequence[str], *, row_id: int | None = None
    ) -> list[str]:
        """Those of ``feeds`` that follow ``source``, sorted; with ``row_id``,
        those that outbox row reaches, as :meth:`follower_chunk` gives them
        (followed before the row, not idle)."""
        c = follows.c
        reached = [] if row_id is None else [c.tier < Tier.IDLE, c.since_row < row_id]
        found: list[str] = []
        with self.db.read() as conn:
            for part in chunks(sorted(set(feeds)), IN_CHUNK):
                found += conn.execute(
                    select(c.follower).where(c.source == source, c.follower.in_(part), *reached)
                ).scalars()
        return sorted(found)

    def sources_among(self, follower: str, sources: Sequence[str]) -> list[str]:
        """Those of ``sources`` that ``follower`` follows."""
        c = follows.c
        found: list[str] = []
        with self.db.read() as conn:
            for part in chunks(sorted(set(sources)), IN_CHUNK):
                found += conn.execute(
                    select(c.source).where(c.follower == follower, c.source.in_(part))
                ).scalars()
        return found

    def copied_ids(self, source: str, lowest: str, highest: str, limit: int) -> list[str]:
        """Ids of the newest ``limit`` activities of ``source`` from ``lowest`` to
        ``highest`` (inclusive), newest first: what a follow copies."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _COPIED, (source, lowest, highest, limit))
        return [row[0] for row in rows]

    def unfollow(self, follower: str, source: str, now_ms: int) -> bool:
        with self.db.write() as conn:
            removed = conn.execute(
                delete(follows).where(follows.c.follower == follower, follows.c.source == source)
            ).rowcount
            if removed:
                count_follows(self.db, conn, [(follower, source)], -1)
                log = unfollows.c
                conn.execute(delete(unfollows).where(log.ms < now_ms - UNFOLLOW_LOG_MS))
                conn.execute(
                    self.db.dialect_insert(unfollows)
                    .values(source=source, follower=follower, ms=now_ms)
                    .on_conflict_do_update(
                        index_elements=[log.source, log.follower], set_={"ms": now_ms}
                    )
                )
        return bool(removed)

    def unfollowed_since(self, sources: Sequence[str], since_ms: int) -> set[tuple[str, str]]:
        """``(follower, source)`` of the unfollows of ``sources`` logged since
        ``since_ms`` that have not been followed again."""
        f = follows.c
        gone: set[tuple[str, str]] = set()
        with self.db.read() as conn:
            # Every chunk of every delivery asks, and nearly always finds
            # nothing: the driver's cursor, not SQLAlchemy's statement handling.
            for part in chunks(sorted(set(sources)), 500):
                sql = _UNFOLLOWED.format(sources=", ".join(["{p}"] * len(part)), p="{p}")
                gone.update((r[0], r[1]) for r in self.db.fetch_raw(conn, sql, (*part, since_ms)))
            if gone:
                again = select(f.follower, f.source).where(
                    tuple_(f.follower, f.source).in_(sorted(gone))
                )
                gone -= {(f, s) for f, s in conn.execute(again)}
        return gone

    def recount(self, feeds: Sequence[str]) -> None:
        """Set the follower and following counts of ``feeds`` from the follows
        themselves: after follows were loaded in bulk, around :meth:`follow`."""
        f, stats = follows.c, feed_stats.c
        with self.db.write() as conn:
            for part in chunks(sorted(set(feeds))):
                conn.execute(self.db.insert_ignore(feed_stats), [{"feed": feed} for feed in part])
                followers = select(func.count()).where(f.source == stats.feed).scalar_subquery()
                following = select(func.count()).where(f.follower == stats.feed).scalar_subquery()
                conn.execute(
                    update(feed_stats)
                    .where(stats.feed.in_(part))
                    .values(
                        followers=followers,
                        following=following,
                        follows_version=stats.follows_version + 1,
                    )
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

    def follower_chunk(
        self, source: str, after: str | None, limit: int, *, row_id: int
    ) -> list[str]:
        """Followers of ``source`` after ``after`` that outbox row ``row_id``
        reaches (followed before it), sorted: the unit of delivery.

        Hot path of every fan-out, so it skips SQLAlchemy's row processing,
        which costs twice the query itself at 5,000 rows.
        """
        with self.db.read() as conn:
            params = (source, after or "", row_id, limit)
            rows = self.db.fetch_raw(conn, _FOLLOWER_CHUNK, params)
        return [row[0] for row in rows]

    def follower_counts(self, sources: Sequence[str]) -> dict[str, int]:
        """How many follow each of ``sources`` (those with any)."""
        return {feed: count for feed, (count, _) in self._follower_stats(sources).items()}

    def _follower_stats(self, sources: Sequence[str]) -> dict[str, tuple[int, int]]:
        """``(followers, followers version)`` of each of ``sources`` with a stats row."""
        # On the driver's cursor, the feeds as one parameter: every batched
        # delivery asks this (SQLAlchemy's IN list cost ~1 ms a batch).
        sql = _FOLLOWER_STATS.replace("{feeds}", self.db.in_set())
        param = self.db.set_param(sorted(set(sources)))
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, sql, (param,))
        return {feed: (int(count), int(version)) for feed, count, version in rows}

    def small_followers(self, sources: Sequence[str], at_most: int) -> dict[str, FollowerList]:
        """``(follower, since_row)`` of the followers (idle ones skipped) of each
        of ``sources`` that has at most ``at_most`` followers, sorted. Sources
        with more are left out (delivered in chunks).

        The hot read of every batched delivery. A list is kept (see
        :class:`FollowerLists`) and read again only when its source's followers
        version moved; the versions are read *before* the lists, so a list read
        after a concurrent follow is kept under the older version, and merely
        read again next time.
        """
        versions = self._follower_stats(sources)
        out: dict[str, FollowerList] = {}
        missing: list[str] = []
        for source in sorted(set(sources)):
            count, version = versions.get(source, (0, 0))
            if count > at_most:
                continue
            kept = self.lists.get(source, version)
            if kept is None:
                missing.append(source)
            else:
                out[source] = kept
        if missing:
            read: dict[str, list[tuple[str, int]]] = {s: [] for s in missing}
            with self.db.read() as conn:
                # The driver's cursor, as follower_chunk.
                for part in chunks(missing, 500):
                    sql = _SMALL_FOLLOWERS.format(sources=", ".join(["{p}"] * len(part)), p="{p}")
                    for source, follower, since_row in self.db.fetch_raw(conn, sql, tuple(part)):
                        read[source].append((follower, int(since_row)))
            for source, found in read.items():
                out[source] = tuple(found)
                self.lists.put(source, versions.get(source, (0, 0))[1], out[source])
        # Counts are kept with the follows; a source found bigger all the same
        # (follows loaded around them) is left to the chunked path.
        return {s: found for s, found in out.items() if len(found) <= at_most}

    def follower_spans(self, source: str, after: str | None, limit: int) -> list[tuple[str, str]]:
        """``(follower, history_from)`` of followers of ``source`` after ``after``, sorted."""
        query = select(follows.c.follower, follows.c.history_from).where(follows.c.source == source)
        if after is not None:
            query = query.where(follows.c.follower > after)
        with self.db.read() as conn:
            rows = conn.execute(query.order_by(follows.c.follower).limit(limit))
            return [(r.follower, r.history_from or "") for r in rows]

    def counts(self, feed: str) -> tuple[int, int]:
        """``(followers, following)`` of a feed."""
        with self.db.read() as conn:
            row = conn.execute(
                select(feed_stats.c.followers, feed_stats.c.following).where(
                    feed_stats.c.feed == feed
                )
            ).one_or_none()
        return (0, 0) if row is None else (int(row.followers), int(row.following))


def followers_moved(conn: Connection, followers: Sequence[str]) -> None:
    """Bump the followers version of every source ``followers`` follow, in the
    transaction that moved them into or out of idle (idle followers are left
    out of deliveries). The stats rows are updated in feed order, as every
    other writer of them does, so two transactions never wait on each other
    in opposite orders."""
    f = follows.c
    sources: set[str] = set()
    for part in chunks(sorted(set(followers))):
        sources.update(conn.execute(select(f.source).where(f.follower.in_(part))).scalars())
    if sources:
        conn.execute(
            update(feed_stats)
            .where(feed_stats.c.feed == bindparam("s"))
            .values(follows_version=feed_stats.c.follows_version + 1),
            [{"s": s} for s in sorted(sources)],
        )


def _refuse_blocked(db: Database, conn: Connection, pairs: Sequence[tuple[str, str]]) -> None:
    """Raise :class:`Blocked` when the users of a pair (the feeds' keys) block
    one another."""
    users = {(f.partition(":")[2], s.partition(":")[2]) for f, s in pairs}
    users = {(a, b) for a, b in users if a != b}
    if not users:
        return
    # The users as one parameter, on the driver's cursor: a batch of 1,000
    # follows spent more compiling SQLAlchemy's IN lists than running them.
    everyone = db.set_param(sorted({u for pair in users for u in pair}))
    held = {
        (user_id, target)
        for user_id, target in db.fetch_raw(
            conn, _BLOCKS_AMONG.replace("{users}", db.in_set()), (everyone, everyone)
        )
    }
    if held:
        for a, c in sorted(users):
            if (a, c) in held or (c, a) in held:
                raise Blocked(f"{a!r} and {c!r} cannot follow each other: one blocks the other")
