"""A reaction's life: added (with its notification), changed, removed.

A reaction with ``to`` publishes a notification-style activity into those
feeds, in the reaction's own transaction: ``actor`` the reacting user,
``verb`` the kind, ``object`` the object of the activity reacted to and
``target`` ``activity:<id>``, so "bob liked your photo" joins an
aggregate in notification feeds as any activity does. Its ``foreign_id`` is
``reaction:<id>``; removing the reaction retracts it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidings.canonical.activities import Accepted
from tidings.canonical.store import CanonicalStore
from tidings.core import ids
from tidings.core.activity import Activity, validate
from tidings.core.clock import Clock
from tidings.core.errors import ValidationError
from tidings.core.events import EventType
from tidings.core.reactions import (
    Reaction,
    ReactionNotFound,
    check_data,
    check_notice_extra,
    check_reaction_id,
    validate_reaction,
)
from tidings.writes.activities import ActivityWrites

#: Told of each reaction added or removed, with the activity's counts after.
ReactionChanged = Callable[[EventType, Reaction], None]


class ReactionWrites:
    def __init__(
        self,
        canonical: CanonicalStore,
        activities: ActivityWrites,
        clock: Clock,
        *,
        unique: frozenset[str],
        changed: ReactionChanged | None = None,
    ) -> None:
        self.canonical = canonical
        self.activities = activities
        self.clock = clock
        self.unique = unique
        self._changed = changed
        self._last_id = ""
        self._ids_lock = threading.Lock()

    def _new_id(self, ms: int) -> str:
        """A reaction id, greater than every one this process made before: pages
        are newest first by id, and two reactions of one millisecond (a reply
        right after its comment) must come out in the order they were made."""
        with self._ids_lock:
            made = ids.new_id(ms)
            if made <= self._last_id:
                made = ids.after(self._last_id)
            self._last_id = made
            return made

    def add(
        self,
        activity_id: str,
        kind: str,
        user: str,
        data: Mapping[str, Any] | None = None,
        to: Sequence[str] = (),
        parent: str | None = None,
        notice_extra: Mapping[str, Any] | None = None,
    ) -> tuple[Reaction, bool]:
        new = validate_reaction(
            activity_id, kind, user, data, to, parent, check_feed=self.activities.check_feed
        )
        # Checked before the transaction, as ``data`` is: its field named.
        extra = check_notice_extra(notice_extra)
        now_us = self.clock.us()
        reaction_id = self._new_id(now_us // 1000)
        added = self.canonical.reactions.add(
            new,
            reaction_id,
            now_us,
            unique=new.kind in self.unique,
            notice_for=functools.partial(self._notice, extra=extra),
        )
        if added.notice is not None:
            self.activities.stored([added.notice])
        if added.created and self._changed is not None:
            self._changed(EventType.REACTION_ADDED, added.reaction)
        return added.reaction, added.created

    def _notice(
        self, reaction: Reaction, activity: Activity, *, extra: Mapping[str, Any]
    ) -> Accepted:
        """The notification activity of ``reaction``, into its first ``to`` feed
        (and the others through ``to``); ``extra`` joins its own extra fields,
        which keep their names (they link the notice to its reaction)."""
        first, *others = reaction.to
        notice = validate(
            {
                "actor": reaction.user,
                "verb": reaction.kind,
                "object": activity.object,
                "target": f"activity:{activity.id}",
                "foreign_id": f"reaction:{reaction.id}",
                "to": others,
                "extra": {**extra, "reaction": reaction.id, "activity_id": activity.id},
            },
            now=self.clock.now(),
        )
        keys = self.activities.deliverer.aggregate_keys(notice)
        return Accepted(first, notice, keys, reaction.created_us)

    def get(self, reaction_id: str) -> Reaction:
        found = self.canonical.reaction_reads.get(check_reaction_id(reaction_id))
        if found is None:
            raise ReactionNotFound(f"no reaction with id {reaction_id}")
        return found

    def update(self, reaction_id: str, data: Mapping[str, Any]) -> Reaction:
        if not isinstance(data, Mapping):
            raise ValidationError("must be a JSON object", field="data")
        checked = check_data(data)
        return self.canonical.reactions.update_data(
            check_reaction_id(reaction_id), checked, self.clock.us()
        )

    def remove(self, reaction_id: str, *, soft: bool = False) -> Reaction:
        """Remove the reaction, the reactions under it and their notifications;
        ``soft``: keep them, for :meth:`restore`."""
        rid = check_reaction_id(reaction_id)
        section = self.canonical.reactions
        if soft:
            removed = section.remove_softly(rid, self.clock.us())
        else:
            removed = section.remove(rid, self.clock.ms())
        self.activities.removed(removed.notices)
        if self._changed is not None and not removed.from_trash:
            for reaction in removed.reactions:
                self._changed(EventType.REACTION_REMOVED, reaction)
        return removed.reactions[0]

    def restore(self, reaction_id: str) -> Reaction:
        """Bring back a reaction removed softly, with those under it and their
        notifications."""
        restored = self.canonical.reactions.restore(check_reaction_id(reaction_id), self.clock.us())
        if restored.notices:
            # Delivered by the runner from their outbox rows, not written here
            # after the commit: a removal that commits in between (it can find
            # them: the reaction's id was known) cancels those rows, while a
            # write made after it would bring a retracted notice back.
            self.canonical.users.forget([item.feed for item, _ in restored.notices])
            self.activities.notify()
        if self._changed is not None:
            for reaction in restored.reactions:
                self._changed(EventType.REACTION_ADDED, reaction)
        return self.get(restored.reactions[0].id)

    def get_removed(self, reaction_id: str) -> Reaction:
        found = self.canonical.reaction_reads.removed(check_reaction_id(reaction_id))
        if found is None:
            raise ReactionNotFound(f"no reaction with id {reaction_id}, live or removed softly")
        return found
