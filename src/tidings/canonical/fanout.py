"""Each source's fan-out strategy, as recorded (push unless a row says otherwise);
see :mod:`tidings.core.fanout` for when it changes."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from tidings.canonical.db import Database
from tidings.canonical.rows import chunks
from tidings.canonical.schema import fanout, feed_stats
from tidings.core.fanout import Strategy

_ANY_PULLED = "SELECT 1 FROM tidings_fanout LIMIT 1"
# The recorded strategies of some feeds ({feeds}: a set parameter): every
# follow_many copy asks, for a batch's sources.
_STRATEGIES = "SELECT feed, strategy FROM tidings_fanout WHERE feed IN ({feeds})"


class Fanout:
    """Push, pull or draining, by source."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def strategy(self, feed: str) -> Strategy:
        return self.strategies([feed]).get(feed, Strategy.PUSH)

    def pulled_sinces(self, feeds: Sequence[str]) -> dict[str, int]:
        """When each of ``feeds`` that is pulled went to pull (ms); one cheap
        query and no more when no source is pulled or draining at all."""
        if not feeds or not self.any_pulled():
            return {}
        out: dict[str, int] = {}
        with self.db.read() as conn:
            for part in chunks(list(dict.fromkeys(feeds))):
                rows = conn.execute(
                    select(fanout.c.feed, fanout.c.changed_ms).where(
                        fanout.c.feed.in_(part), fanout.c.strategy == Strategy.PULL
                    )
                )
                out.update((feed, int(ms)) for feed, ms in rows)
        return out

    def any_pulled(self) -> bool:
        """Whether any source is pulled or draining (readers then merge at all)."""
        with self.db.read() as conn:
            return bool(self.db.fetch_raw(conn, _ANY_PULLED, ()))

    def strategies(self, feeds: Sequence[str]) -> dict[str, Strategy]:
        """The strategy of each of ``feeds`` that is not pushed."""
        if not feeds:
            return {}
        sql = _STRATEGIES.replace("{feeds}", self.db.in_set())
        with self.db.read() as conn:
            rows = self.db.fetch_raw(conn, sql, (self.db.set_param(list(dict.fromkeys(feeds))),))
        return {feed: _strategy(raw) for feed, raw in rows}

    def set_strategy(self, feed: str, strategy: Strategy, now_ms: int) -> None:
        with self.db.write() as conn:
            conn.execute(delete(fanout).where(fanout.c.feed == feed))
            if strategy != Strategy.PUSH:
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


def _strategy(raw: str | None) -> Strategy:
    # No row (an outer join's NULL) is a pushed source.
    return Strategy.PUSH if raw is None else Strategy(raw)
