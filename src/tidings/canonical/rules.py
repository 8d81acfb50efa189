"""Mutes, blocks and keyword filters in the canonical store.

A block takes every follow between the two users' feeds out, both ways, in
its own transaction (the caller retracts what those follows delivered), and
follows check for blocks in theirs, so a block and a follow racing end with
no follow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson
from sqlalchemy import Connection, delete, or_, select

from tidings.canonical.db import Database
from tidings.canonical.schema import blocks, follows, keyword_filters, mutes
from tidings.core.rules import Context, KeywordFilter, Mute, Rules


class RulesStore:
    """Each user's mutes, blocks and filters."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def rules(self, user_id: str) -> Rules:
        """Everything ``user_id`` set, in one read transaction."""
        with self.db.read() as conn:
            m, b, f = mutes.c, blocks.c, keyword_filters.c
            muted = {
                row.target: Mute(row.target, row.until_ms, bool(row.notifications))
                for row in conn.execute(
                    select(m.target, m.until_ms, m.notifications).where(m.user_id == user_id)
                )
            }
            blocked = frozenset(
                conn.execute(select(b.target).where(b.user_id == user_id)).scalars()
            )
            filters = tuple(
                _filter(row)
                for row in conn.execute(
                    select(f.id, f.keywords, f.whole_word, f.contexts, f.until_ms)
                    .where(f.user_id == user_id)
                    .order_by(f.id)
                )
            )
        return Rules(muted, blocked, filters)

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
        """Record the block and delete every follow between the two users'
        feeds (``feeds_of`` names each user's feeds, one per group); returns
        the follows deleted as ``(follower, source)``."""
        with self.db.write() as conn:
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
