"""Reactions: likes, comments and replies attached to an activity (or to
another reaction), with exact counts per kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidings.canonical.store import CanonicalStore
from tidings.core.reactions import Reaction, parse_includes
from tidings.core.results import Page
from tidings.reading.reactions import ReactionReads
from tidings.writes.reactions import ReactionWrites


class ReactionService:
    """``feeds.reactions``: add, change, remove and page reactions."""

    def __init__(
        self, writes: ReactionWrites, reads: ReactionReads, canonical: CanonicalStore
    ) -> None:
        self._writes = writes
        self._reads = reads
        self._canonical = canonical

    def add(
        self,
        activity_id: str,
        kind: str,
        user: str,
        data: Mapping[str, Any] | None = None,
        *,
        to: Sequence[str] = (),
        parent: str | None = None,
        notice_extra: Mapping[str, Any] | None = None,
    ) -> Reaction:
        """``user`` reacts to the activity (or, with ``parent``, to that reaction,
        up to 3 levels deep) with ``kind``. For kinds in ``unique_reactions``
        (``like``) adding again returns the reaction held. With ``to``, a
        notification activity (actor ``user``, verb ``kind``) goes into those
        feeds, with ``notice_extra`` among its extra fields."""
        return self.put(
            activity_id, kind, user, data, to=to, parent=parent, notice_extra=notice_extra
        )[0]

    def put(
        self,
        activity_id: str,
        kind: str,
        user: str,
        data: Mapping[str, Any] | None = None,
        *,
        to: Sequence[str] = (),
        parent: str | None = None,
        notice_extra: Mapping[str, Any] | None = None,
    ) -> tuple[Reaction, bool]:
        """:meth:`add`, also saying whether the reaction is new (False: a
        unique kind this user had added already; nothing changed)."""
        return self._writes.add(activity_id, kind, user, data, to, parent, notice_extra)

    def get(self, reaction_id: str) -> Reaction:
        return self._writes.get(reaction_id)

    def update(self, reaction_id: str, data: Mapping[str, Any]) -> Reaction:
        """Replace a reaction's ``data``."""
        return self._writes.update(reaction_id, data)

    def remove(self, reaction_id: str, *, soft: bool = False) -> Reaction:
        """Remove a reaction, the reactions under it and the notifications they
        made. ``soft``: the same for every read (pages, counts, latest, own,
        children), but kept aside, so that :meth:`restore` brings it all back;
        removing it again without ``soft`` deletes it for good."""
        return self._writes.remove(reaction_id, soft=soft)

    def restore(self, reaction_id: str) -> Reaction:
        """Bring back a reaction removed with ``soft``: it, the reactions removed
        under it, their counts and the notification activities they had
        published (the same ones). A reaction not removed softly (live,
        removed for good, or under another one removed) is not found; a unique
        kind its user has added again since is refused."""
        return self._writes.restore(reaction_id)

    def get_removed(self, reaction_id: str) -> Reaction:
        """A reaction removed softly, as it was (whose it is, before a restore)."""
        return self._writes.get_removed(reaction_id)

    def page(
        self,
        activity_id: str,
        kind: str | None = None,
        *,
        limit: int = 25,
        cursor: str | None = None,
        before: str | None = None,
    ) -> Page[Reaction]:
        """Reactions to an activity, newest first (``kind``: of that kind only);
        ``before``, instead of a cursor: those older than that reaction id."""
        return self._reads.page(activity_id, kind=kind, limit=limit, cursor=cursor, before=before)

    def children(
        self,
        reaction_id: str,
        kind: str | None = None,
        *,
        limit: int = 25,
        cursor: str | None = None,
        before: str | None = None,
    ) -> Page[Reaction]:
        """Reactions to a reaction (replies to a comment), newest first
        (``before`` as for :meth:`page`)."""
        parent = self._writes.get(reaction_id)
        return self._reads.page(
            parent.activity_id,
            parent=parent.id,
            kind=kind,
            limit=limit,
            cursor=cursor,
            before=before,
        )

    def by_user(
        self,
        user: str,
        kind: str | None = None,
        *,
        limit: int = 25,
        cursor: str | None = None,
        before: str | None = None,
    ) -> Page[Reaction]:
        """``user``'s reactions, to any activity (or reaction), newest first
        (``kind``: of that kind only; ``before`` as for :meth:`page`)."""
        return self._reads.by_user(user, kind=kind, limit=limit, cursor=cursor, before=before)

    def counts(self, activity_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """Exact counts of the reactions to each activity, per kind."""
        return self._canonical.reaction_reads.counts(list(activity_ids))

    def fields(
        self, activity_ids: Sequence[str], reactions: str | Sequence[str], user: str
    ) -> dict[str, dict[str, Any]]:
        """What each activity carries about its reactions (``reactions``:
        ``"counts,latest,own"`` or some of them; ``own`` is ``user``'s), by id:
        for pages of aggregates, whose activities a caller decorates itself."""
        return self._reads.fields(activity_ids, parse_includes(reactions), user)
