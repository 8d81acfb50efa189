"""Readers: when each follower feed was last read, the delivery tier that gives
its follows, idle feeds, and the rebuilds of feeds read again.

Lock order, for PostgreSQL: a transaction that changes a feed's tier or state
locks its tidings_feed_reads row first (several: in feed order), then its
follows, then (for moves into or out of idle) the tidings_feed_stats rows of
the sources they follow, in feed order, as publishes and follows lock them.
``Follows.follow`` takes the feed_reads rows shared, so a new follow gets the
tier its follower has when it commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, case, func, select, update

from tidings.canonical.db import Database
from tidings.canonical.follows import followers_moved
from tidings.canonical.rows import IN_CHUNK, Regeneration, chunks
from tidings.canonical.schema import feed_reads, follows
from tidings.core import readers
from tidings.core.readers import ReaderState, Tier

# "{p}" is the driver's placeholder.
_READER_STATE = "SELECT state FROM tidings_feed_reads WHERE feed = {p}"
_ANY_UNSETTLED = (
    "SELECT 1 FROM tidings_feed_reads WHERE state IN "
    f"('{ReaderState.IDLE}', '{ReaderState.REGENERATING}') LIMIT 1"
)
_REBUILD_DUE = (
    f"SELECT 1 FROM tidings_feed_reads WHERE state = '{ReaderState.REGENERATING}' "
    "AND lease_ms <= {p} LIMIT 1"
)
# Follower feeds with no read recorded, in feed order (the follows primary key).
_UNTRACKED = (
    "SELECT DISTINCT follower FROM tidings_follows f WHERE follower > {p} AND NOT EXISTS "
    "(SELECT 1 FROM tidings_feed_reads r WHERE r.feed = f.follower) ORDER BY follower LIMIT {p}"
)

#: A sweep transaction taking longer than this is undone and redone in
#: smaller pieces: well inside the margin deliveries allow tier changes.
_SWEEP_MAX_SECONDS = readers.TIER_CHANGE_MARGIN_MS / 4000


class _SweepTooSlow(Exception):
    pass


class Readers:
    """Reads, tiers, idle feeds and regenerations."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def reader_state(self, feed: str) -> ReaderState:
        """ACTIVE (also when never read), IDLE or REGENERATING."""
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, _READER_STATE, (feed,))
        return ReaderState(rows[0][0]) if rows else ReaderState.ACTIVE

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
            # (feed_reads rows, then follows, chunk by chunk; the stats rows of
            # the woken feeds' sources last, once, in feed order.)
            for part in chunks(sorted(reads)):
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
                    f
                    for f, r in known.items()
                    if r.state == ReaderState.IDLE and reads[f] > r.read_ms
                )
                if back:
                    self._request_rebuilds(conn, back, now_ms, tier=Tier.HIGH)
                    conn.execute(
                        update(follows)
                        .where(follows.c.follower.in_(back))
                        .values(tier=Tier.HIGH, tier_ms=now_ms)
                    )
                    woken += back
            if woken:
                followers_moved(conn, woken)
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
        never far before the commit that makes its tier visible (see Outbox.split).
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
                    started = now_ms()
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
                    took = (now_ms() - started) / 1000
                    if size > 1 and took > _SWEEP_MAX_SECONDS:
                        # Its tier_ms would be too far before the commit (see
                        # Outbox.split): undone, and done again in smaller pieces.
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
        moves: dict[Tier, list[str]] = {}
        for r in rows:
            if r.state == ReaderState.IDLE:
                continue  # until read again (record_reads wakes it)
            may_idle = r.state == ReaderState.ACTIVE and r.feed in following and can_idle(r.feed)
            tier = readers.tier_of(r.read_ms, now, recent_ms, idle_ms if may_idle else None)
            if tier == Tier.IDLE:
                idled.append(r.feed)
            if tier != r.tier:
                moves.setdefault(tier, []).append(r.feed)
        if idled:
            conn.execute(
                update(feed_reads)
                .where(fr.feed.in_(idled))
                .values(state=ReaderState.IDLE, state_ms=now, lease_ms=0)
            )
        for tier, feeds in sorted(moves.items()):
            conn.execute(update(feed_reads).where(fr.feed.in_(feeds)).values(tier=tier))
            conn.execute(
                update(follows)
                .where(follows.c.follower.in_(feeds), follows.c.tier != tier)
                .values(tier=tier, tier_ms=now)
            )
        if idled:
            # Only idleness changes which follows deliveries reach.
            followers_moved(conn, idled)
        return idled

    def _track_followers(self, now_ms: int) -> None:
        after = ""
        while True:
            with self.db.read() as conn:
                rows = self.db.fetch_raw(conn, _UNTRACKED, (after, IN_CHUNK))
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
            for part in chunks(sorted(feeds)):
                query = select(fr.feed).where(fr.feed.in_(part), fr.state != ReaderState.IDLE)
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
        values: dict[str, Any] = {
            "state": ReaderState.REGENERATING,
            "state_ms": token,
            "lease_ms": 0,
        }
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
                .where(fr.state == ReaderState.REGENERATING, fr.lease_ms <= now_ms)
                .order_by(fr.lease_ms, fr.feed)
                .limit(limit)
            ).all()
            for r in sorted(rows, key=lambda r: r.feed):  # lock order: by feed
                taken = conn.execute(
                    update(feed_reads)
                    .where(
                        fr.feed == r.feed,
                        fr.state == ReaderState.REGENERATING,
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
        done = (
            update(feed_reads).where(*_requested(job)).values(state=ReaderState.ACTIVE, lease_ms=0)
        )
        with self.db.write() as conn:
            return conn.execute(done).rowcount > 0

    def retry_regeneration(self, job: Regeneration, at_ms: int) -> None:
        """Have a failed rebuild tried again from ``at_ms`` (a lease it holds until then)."""
        with self.db.write() as conn:
            conn.execute(update(feed_reads).where(*_requested(job)).values(lease_ms=at_ms))

    def reader_counts(self) -> dict[str, int]:
        """Tracked feeds by state."""
        fr = feed_reads.c
        with self.db.read() as conn:
            rows = conn.execute(select(fr.state, func.count()).group_by(fr.state)).all()
        return {state: int(n) for state, n in rows}


def _tracked(feed: str, read_ms: int, now_ms: int) -> dict[str, Any]:
    return {
        "feed": feed,
        "read_ms": read_ms,
        "tier": Tier.HIGH,
        "state": ReaderState.ACTIVE,
        "state_ms": now_ms,
        "lease_ms": 0,
    }


def _requested(job: Regeneration) -> tuple[Any, ...]:
    # Still the request ``job`` was claimed for (see _request_rebuilds).
    fr = feed_reads.c
    return (fr.feed == job.feed, fr.state == ReaderState.REGENERATING, fr.state_ms == job.token)
