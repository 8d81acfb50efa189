"""Hidden entries: activities an owner took out of their own feed alone (one
that reached it by ``to`` or through a follow), kept out of it for good:
history, pulled-source, follow-copy and backfill reads leave them out."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from sqlalchemy import delete, select, update

from tidings.canonical.db import Database
from tidings.canonical.rows import stored_keys
from tidings.canonical.schema import activities, addressed, follows, hidden, outbox
from tidings.core.fanout import OutboxKind

_HIDDEN_OF = "SELECT activity_id, feed FROM tidings_hidden WHERE activity_id IN ({ids})"


class Hidden:
    """Entries their feed's owner removed."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def hide(self, feed: str, activity_id: str) -> dict[str, str] | None:
        """Take the activity out of ``feed`` alone, for good: it reached ``feed``
        by ``to`` or through a follow, and stays in its own feed and every other.
        Its ``to`` record for ``feed`` goes, a hidden entry is recorded (history,
        pulled-source, copy and backfill reads leave it out, so no rebuild brings
        it back), and ``feed`` leaves its pending deliveries. Returns the
        activity's aggregate keys; None when it never reached ``feed``.

        A runner already carrying out the delivery may still write ``feed`` with
        the targets it read before this; as with removal, that is the one race.
        """
        a = activities.c
        with self.db.write() as conn:
            row = conn.execute(
                select(a.feed, a.group_keys).where(a.id == activity_id)
            ).one_or_none()
            if row is None:
                return None
            was_addressed = conn.execute(
                delete(addressed).where(
                    addressed.c.feed == feed, addressed.c.activity_id == activity_id
                )
            ).rowcount
            start = conn.execute(
                select(follows.c.history_from).where(
                    follows.c.follower == feed, follows.c.source == row.feed
                )
            ).one_or_none()
            followed = start is not None and activity_id >= (start.history_from or "")
            if not (was_addressed or followed):
                return None
            conn.execute(
                self.db.insert_ignore(hidden), [{"feed": feed, "activity_id": activity_id}]
            )
            pending = conn.execute(
                select(outbox.c.id, outbox.c.targets).where(
                    outbox.c.activity_id == activity_id, outbox.c.kind == OutboxKind.DELIVER
                )
            ).all()
            for r in pending:
                targets = [t for t in orjson.loads(r.targets) if t != feed]
                conn.execute(
                    update(outbox).where(outbox.c.id == r.id).values(targets=orjson.dumps(targets))
                )
        return stored_keys(row.group_keys)

    def without_hidden(
        self, feeds: Sequence[str], activity_ids: Sequence[str]
    ) -> list[tuple[list[str], list[str]]]:
        """Writes of ``activity_ids`` into ``feeds`` as ``(ids, feeds)`` pairs, less
        the entries their owners removed: the common case, nothing hidden, is
        the one write it was."""
        hidden = self.hidden_in(feeds, activity_ids)
        if not hidden:
            return [(list(activity_ids), list(feeds))]
        touched = {feed for feed, _ in hidden}
        writes = [(list(activity_ids), [f for f in feeds if f not in touched])]
        writes += [
            ([i for i in activity_ids if (f, i) not in hidden], [f]) for f in feeds if f in touched
        ]
        return [(ids, targets) for ids, targets in writes if ids and targets]

    def hidden_of(self, activity_ids: Sequence[str]) -> dict[str, set[str]]:
        """The feeds each of ``activity_ids`` was taken out of (those with any):
        a delivery under way leaves them out, though they follow its source."""
        out: dict[str, set[str]] = {}
        if not activity_ids:
            return out
        with self.db.read() as conn:
            if not self.db.fetch_raw(conn, "SELECT 1 FROM tidings_hidden LIMIT 1", ()):
                return out  # the common case: no owner ever removed an entry
            sql = _HIDDEN_OF.replace("{ids}", self.db.in_set())
            param = self.db.set_param(sorted(set(activity_ids)))
            for activity_id, feed in self.db.fetch_raw(conn, sql, (param,)):
                out.setdefault(activity_id, set()).add(feed)
        return out

    def hidden_in(self, feeds: Sequence[str], activity_ids: Sequence[str]) -> set[tuple[str, str]]:
        """The ``(feed, activity id)`` entries of these that their feed's owner removed."""
        if not feeds:
            return set()
        found = self.hidden_of(activity_ids)
        if not found:
            return set()
        wanted = set(feeds)
        return {(f, i) for i, gone in found.items() for f in gone if f in wanted}
