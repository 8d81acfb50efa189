"""Reactions on the read side: pages of an activity's (or a reaction's)
reactions, and what a feed page's activities carry about theirs
(``?reactions=counts,latest,own``), fetched in one batch per page.

Page entries are the stored JSON of each activity; the reaction fields are
spliced onto it rather than parsing and re-serialising every activity.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import orjson

from tidings.canonical.store import CanonicalStore
from tidings.core import ids
from tidings.core.cursor import CursorCodec
from tidings.core.errors import InvalidCursor, ValidationError
from tidings.core.limits import check_page_limit
from tidings.core.reactions import Include, Reaction, check_kind, check_reaction_id, check_user
from tidings.core.results import Page

_ID_PREFIX = b'{"id":"'


def activity_id_of(doc: bytes) -> str:
    """The id of a stored activity's JSON, which begins with it (``Activity.to_dict``)."""
    if doc.startswith(_ID_PREFIX):
        return doc[7:39].decode()
    found: str = orjson.loads(doc)["id"]
    return found


def splice(doc: bytes, fields: bytes) -> bytes:
    """``doc`` (a JSON object) with ``fields`` (``,"name":value…``) added at its end."""
    return doc[:-1] + fields + b"}"


def _by_kind(found: dict[str, list[bytes]] | None) -> bytes:
    """``{"kind": [reaction, …], …}`` from reactions already JSON."""
    if not found:
        return b"{}"
    members = [b'"' + kind.encode() + b'":[' + b",".join(rs) + b"]" for kind, rs in found.items()]
    return b"{" + b",".join(members) + b"}"


class ReactionReads:
    def __init__(self, canonical: CanonicalStore, cursors: CursorCodec, latest: int) -> None:
        self.canonical = canonical
        self.cursors = cursors
        self.latest = latest

    def page(
        self,
        activity_id: str,
        *,
        parent: str | None = None,
        kind: str | None = None,
        limit: int = 25,
        cursor: str | None = None,
        before: str | None = None,
    ) -> Page[Reaction]:
        """Reactions to the activity (or, with ``parent``, to that reaction),
        newest first; ``kind`` narrows them. Cursors are exact: a reaction
        added meanwhile is not shown on a later page and none is skipped.
        ``before`` (a reaction id) starts the page below it, as a cursor would
        (for protocols that page by id)."""
        if not ids.is_valid(activity_id):
            raise ValidationError(f"not an activity id: {str(activity_id)[:64]!r}", field="id")
        check_page_limit(limit)
        if kind is not None:
            check_kind(kind)
        if parent is not None:
            check_reaction_id(parent, "parent")
        context = f"reactions:{activity_id}:{parent or ''}:{kind or ''}"
        before = self._before(context, cursor, before)
        rows = self.canonical.reaction_reads.page(
            activity_id, parent=parent, kind=kind, before=before, limit=limit + 1
        )
        return self._cut(context, rows, limit)

    def by_user(
        self,
        user: str,
        *,
        kind: str | None = None,
        limit: int = 25,
        cursor: str | None = None,
        before: str | None = None,
    ) -> Page[Reaction]:
        """``user``'s reactions, to any activity or reaction, newest first
        (``kind``, ``cursor`` and ``before`` as for :meth:`page`)."""
        check_user(user)
        check_page_limit(limit)
        if kind is not None:
            check_kind(kind)
        context = f"reactions-by:{user}:{kind or ''}"
        before = self._before(context, cursor, before)
        rows = self.canonical.reaction_reads.by_user(
            user, kind=kind, before=before, limit=limit + 1
        )
        return self._cut(context, rows, limit)

    def _cut(self, context: str, rows: list[Reaction], limit: int) -> Page[Reaction]:
        """The page of ``rows`` (read one over ``limit``, to know whether more follow)."""
        more = len(rows) > limit
        rows = rows[:limit]
        nxt = self.cursors.encode(context, rows[-1].id) if more and rows else None
        return Page(rows, nxt)

    def _before(self, context: str, cursor: str | None, before: str | None) -> str | None:
        """The id a page starts below: ``before`` itself, or the one ``cursor`` holds."""
        if before is not None:
            if cursor is not None:
                raise ValidationError("give a cursor or before, not both", field="before")
            return check_reaction_id(before, "before")
        if cursor is None:
            return None
        found = self.cursors.decode(context, cursor)
        if not ids.is_valid(found):
            raise InvalidCursor("cursor is malformed", field="cursor")
        return found

    def decorate(
        self, docs: Sequence[bytes], include: Collection[Include], user: str
    ) -> list[bytes]:
        """``docs`` with ``reaction_counts``, ``latest_reactions`` and
        ``own_reactions`` (``user``'s), as ``include`` asks: one query each."""
        if not include or not docs:
            return list(docs)
        activity_ids = [activity_id_of(d) for d in docs]
        found = self._fields(activity_ids, include, user)
        return [splice(doc, found[aid]) for aid, doc in zip(activity_ids, docs, strict=True)]

    def fields(
        self, activity_ids: Sequence[str], include: Collection[Include], user: str
    ) -> dict[str, dict[str, Any]]:
        """What each activity carries about its reactions, by id (see :meth:`decorate`)."""
        found = self._fields(activity_ids, include, user)
        return {aid: orjson.loads(b"{" + raw[1:] + b"}") for aid, raw in found.items()}

    def _fields(
        self, activity_ids: Sequence[str], include: Collection[Include], user: str
    ) -> dict[str, bytes]:
        """Each activity's fields as JSON members, each preceded by a comma."""
        unique = list(dict.fromkeys(activity_ids))
        store = self.canonical.reaction_reads
        counts = latest = None
        if Include.COUNTS in include or Include.LATEST in include:
            found, newest = store.summary(unique, self.latest if Include.LATEST in include else 0)
            counts = found if Include.COUNTS in include else None
            latest = newest if Include.LATEST in include else None
        own = store.own(unique, user) if Include.OWN in include else None
        out: dict[str, bytes] = {}
        for aid in unique:
            parts: list[bytes] = []
            if counts is not None:
                parts += (b',"reaction_counts":', orjson.dumps(counts.get(aid, {})))
            if latest is not None:
                parts += (b',"latest_reactions":', _by_kind(latest.get(aid)))
            if own is not None:
                parts += (b',"own_reactions":', _by_kind(own.get(aid)))
            out[aid] = b"".join(parts)
        return out

    def extras(self, docs: Sequence[bytes], *, enriched: bool = False) -> list[dict[str, Any]]:
        """The fields :meth:`decorate` (or a ranked read, or enrichment) added to
        each doc, for the Python API's :attr:`Page.extras`."""
        fields = _ADDED + _ENRICHED if enriched else _ADDED
        out: list[dict[str, Any]] = []
        for doc in docs:
            parsed = orjson.loads(doc)
            out.append({k: parsed[k] for k in fields if k in parsed})
        return out


_ADDED = ("score", "explain", "reaction_counts", "latest_reactions", "own_reactions")
_ENRICHED = ("actor", "object", "target")
