"""Mutes, blocks and keyword filters in the canonical store.

A block is recorded, and every follow between the two users' feeds (both
ways) is found, in one transaction; the caller then unfollows them (which
retracts what they delivered). A follow checks for blocks in its own
transaction, under locks the block takes too (PostgreSQL advisory locks on
the feeds; SQLite runs one write at a time), so a follow racing a block
either is found by it or sees it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson
from sqlalchemy import Connection, delete, or_, select

from tidings.canonical.db import Database
from tidings.canonical.rows import chunks
from tidings.canonical.schema import blocks, follows, keyword_filters, mutes
from tidings.core.rules import Context, KeywordFilter, Mute, Rules


class RulesStore:
    """Each user's mutes, blocks and filters."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def any_rules(self) -> bool:
        """Whether any user has a mute, a block or a filter (expired ones too)."""
        with self.db.read() as conn:
            return any(
                conn.execute(select(table.c.user_id).limit(1)).first() is not None
                for table in (mutes, blocks, keyword_filters)
            )

    def rules(self, user_id: str, now_ms: int) -> Rules:
        """Everything ``user_id`` set that is in force at ``now_ms``."""
        return self.rules_many([user_id], now_ms)[user_id]

    def rules_many(self, user_ids: Sequence[str], now_ms: int) -> dict[str, Rules]:
        """:meth:`rules` of several users, three queries in all (expired mutes and
        filters left out: they no longer count, nor make a reader's rules
        non-empty)."""
        users = sorted(set(user_ids))
        muted: dict[str, dict[str, Mute]] = {u: {} for u in users}
        blocked: dict[str, set[str]] = {u: set() for u in users}
        filters: dict[str, list[KeywordFilter]] = {u: [] for u in users}
        m, b, f = mutes.c, blocks.c, keyword_filters.c
        with self.db.read() as conn:
            for part in chunks(users):
                for row in conn.execute(
                    select(m.user_id, m.target, m.until_ms, m.notifications).where(
                        m.user_id.in_(part), or_(m.until_ms.is_(None), m.until_ms > now_ms)
                    )
                ):
                    mute = Mute(row.target, row.until_ms, bool(row.notifications))
                    muted[row.user_id][row.target] = mute
                for user, target in conn.execute(
                    select(b.user_id, b.target).where(b.user_id.in_(part))
                ):
                    blocked[user].add(target)
                query = (
                    select(f.user_id, f.id, f.keywords, f.whole_word, f.contexts, f.until_ms)
                    .where(f.user_id.in_(part), or_(f.until_ms.is_(None), f.until_ms > now_ms))
                    .order_by(f.user_id, f.id)
                )
                for found in conn.execute(query):
                    filters[found.user_id].append(_filter(found[1:]))
        return {u: Rules(muted[u], frozenset(blocked[u]), tuple(filters[u])) for u in users}

    # -- mutes ----------------------------------------------------------------------

    def mute(self, user_id: str, mute: Mute, now_ms: int) -> None:
        values = {
            "until_ms": mute.until_ms,
            "notifications": int(mute.notifications),
            "created_ms": now_ms,
        }
        stmt = self.db.dialect_insert(mutes).values(user_id=user_id, target=mute.target, **values)
        with self.db.write() as conn:
            conn.execute(
                stmt.on_conflict_do_update(index_elements=["user_id", "target"], set_=values)
            )

    def unmute(self, user_id: str, target: str) -> bool:
        m = mutes.c
        with self.db.write() as conn:
            return bool(
                conn.execute(delete(mutes).where(m.user_id == user_id, m.target == target)).rowcount
            )

    # -- blocks ---------------------------------------------------------------------

    def block(
        self, user_id: str, target: str, now_ms: int, feeds_of: Mapping[str, Sequence[str]]
    ) -> list[tuple[str, str]]:
        """Record the block and find every follow between the two users' feeds
        (``feeds_of`` names each user's feeds, one per group), for the caller
        to unfollow: ``(follower, source)``."""
        with self.db.write() as conn:
            # The locks a follow of any of these feeds takes: a follow racing
            # this block commits first (and is found below) or sees the block.
            self.db.lock_sources(conn, [*feeds_of[user_id], *feeds_of[target]], shared=False)
            conn.execute(
                self.db.insert_ignore(blocks),
                [{"user_id": user_id, "target": target, "created_ms": now_ms}],
            )
            return self._unfollow_between(conn, feeds_of[user_id], feeds_of[target])

    def _unfollow_between(
        self, conn: Connection, mine: Sequence[str], theirs: Sequence[str]
    ) -> list[tuple[str, str]]:
        c = follows.c
        either = or_(
            c.follower.in_(mine) & c.source.in_(theirs),
            c.follower.in_(theirs) & c.source.in_(mine),
        )
        found = [
            (row.follower, row.source)
            for row in conn.execute(select(c.follower, c.source).where(either))
        ]
        return found

    def unblock(self, user_id: str, target: str) -> bool:
        b = blocks.c
        with self.db.write() as conn:
            return bool(
                conn.execute(
                    delete(blocks).where(b.user_id == user_id, b.target == target)
                ).rowcount
            )

    def blocked_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Those ``(user, user)`` pairs where either blocks the other."""
        if not pairs:
            return []
        users = sorted({u for pair in pairs for u in pair})
        b = blocks.c
        with self.db.read() as conn:
            rows = conn.execute(
                select(b.user_id, b.target).where(b.user_id.in_(users), b.target.in_(users))
            ).all()
        held = {(row.user_id, row.target) for row in rows}
        return [p for p in pairs if p in held or (p[1], p[0]) in held]

    # -- filters --------------------------------------------------------------------

    def add_filter(self, user_id: str, kept: KeywordFilter, now_ms: int) -> None:
        with self.db.write() as conn:
            conn.execute(
                keyword_filters.insert().values(
                    id=kept.id,
                    user_id=user_id,
                    keywords=orjson.dumps(list(kept.keywords)),
                    whole_word=int(kept.whole_word),
                    contexts=orjson.dumps(sorted(c.value for c in kept.contexts)),
                    until_ms=kept.until_ms,
                    created_ms=now_ms,
                )
            )

    def delete_filter(self, user_id: str, filter_id: str) -> bool:
        f = keyword_filters.c
        with self.db.write() as conn:
            return bool(
                conn.execute(
                    delete(keyword_filters).where(f.user_id == user_id, f.id == filter_id)
                ).rowcount
            )


def _filter(row: Sequence[object]) -> KeywordFilter:
    filter_id, keywords, whole_word, contexts, until_ms = row
    return KeywordFilter(
        id=str(filter_id),
        keywords=tuple(orjson.loads(keywords)),  # type: ignore[arg-type]
        whole_word=bool(whole_word),
        contexts=frozenset(Context(c) for c in orjson.loads(contexts)),  # type: ignore[arg-type]
        until_ms=None if until_ms is None else int(until_ms),  # type: ignore[call-overload]
    )
