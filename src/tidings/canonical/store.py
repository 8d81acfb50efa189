"""The canonical store: the source of truth every feed can be rebuilt from.

It holds activities, follows, reactions, users and objects, per-feed counters, reads and marks, and the
outbox of pending deliveries, in SQLite or PostgreSQL through
:class:`tidings.canonical.db.Database`. Each section is a class of its own
over the same database; each public method of a section is one transaction,
so an operation that writes several sections' tables (publishing writes the
activity and its outbox row; following writes follows, counts and the copy
row) lives whole in the section that owns it.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from tidings.canonical.activities import Activities
from tidings.canonical.counts import CountsCache
from tidings.canonical.db import Database
from tidings.canonical.fanout import Fanout
from tidings.canonical.follows import Follows
from tidings.canonical.hidden import Hidden
from tidings.canonical.history import History
from tidings.canonical.marks import Marks
from tidings.canonical.outbox import Outbox
from tidings.canonical.placements import Placements
from tidings.canonical.reaction_reads import ReactionReads
from tidings.canonical.reactions import LATEST_KEPT, Reactions
from tidings.canonical.readers import Readers
from tidings.canonical.rules import RulesStore
from tidings.canonical.users import Users
from tidings.core.activity import Activity
from tidings.core.clock import real_monotonic


class CanonicalStore:
    """The sections of the canonical store, over one database."""

    def __init__(
        self,
        db: Database,
        *,
        latest_reactions: int = LATEST_KEPT,
        counts_cache: CountsCache | None = None,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        """``latest_reactions``: how many newest reactions each count row keeps;
        ``counts_cache``: where feed counts are looked up first (Redis);
        ``monotonic``: the engine's clock, for the ages of kept follower lists."""
        self.db = db
        # Removing an activity removes its reactions in the same transaction.
        self.activities = Activities(db, on_removed=self._activity_removed)
        self.follows = Follows(db, monotonic)
        self.hidden = Hidden(db)
        self.placements = Placements(db)
        self.fanout = Fanout(db)
        self.history = History(db)
        self.marks = Marks(db)
        self.readers = Readers(db)
        self.outbox = Outbox(db)
        self.reactions = Reactions(db, self.activities, kept=latest_reactions)
        self.reaction_reads = ReactionReads(db)
        self.users = Users(db, counts_cache)
        self.rules = RulesStore(db)

    def _activity_removed(
        self, conn: Connection, activity: Activity, now_ms: int
    ) -> list[tuple[str, Activity, dict[str, str]]]:
        return self.reactions.activity_removed(conn, activity, now_ms)


__all__ = ["CanonicalStore"]
