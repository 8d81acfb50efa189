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

from tidings.canonical.activities import Activities
from tidings.canonical.db import Database
from tidings.canonical.fanout import Fanout
from tidings.canonical.follows import Follows
from tidings.canonical.hidden import Hidden
from tidings.canonical.history import History
from tidings.canonical.marks import Marks
from tidings.canonical.outbox import Outbox
from tidings.canonical.reaction_reads import ReactionReads
from tidings.canonical.reactions import Reactions
from tidings.canonical.readers import Readers
from tidings.canonical.rules import RulesStore
from tidings.canonical.users import Users
from tidings.core.clock import real_monotonic


class CanonicalStore:
    """The sections of the canonical store, over one database."""

    def __init__(self, db: Database, monotonic: Callable[[], float] = real_monotonic) -> None:
        self.db = db
        self.activities = Activities(db)
        # (monotonic: the engine's clock, for the ages of kept follower lists)
        self.follows = Follows(db, monotonic)
        self.hidden = Hidden(db)
        self.fanout = Fanout(db)
        self.history = History(db)
        self.marks = Marks(db)
        self.readers = Readers(db)
        self.outbox = Outbox(db)
        self.reactions = Reactions(db, self.activities)
        self.reaction_reads = ReactionReads(db)
        self.users = Users(db)
        self.rules = RulesStore(db)


__all__ = ["CanonicalStore"]
