"""The ``enrich/`` reads: a feed page whose references are resolved, as
stream-python's ``feed.get(enrich=True)`` (or ``reactions=…``) asks.

A top-level field of an activity holding ``SU:<user id>`` becomes that user,
``SO:<collection>:<id>`` that collection entry, ``SR:<reaction id>`` that
reaction, each looked up once per page; the users of the reactions a page
carries (``latest_reactions``, ``own_reactions``) are added as ``user``. A
reference to nothing stored (never, or deleted) stays the string it was.
"""

from __future__ import annotations

from typing import Any

from tidings.core.errors import NotFound, ValidationError
from tidings.engine import Tidings
from tidings.http.getstream import feeds
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.mapper import MappingError, from_uuid
from tidings.http.getstream.records import entry_out, reaction_out, reference, user_out

#: Fields an activity has that are never references.
_PLAIN = frozenset({"id", "time", "foreign_id", "verb", "to", "origin"})
_REACTION_FIELDS = ("latest_reactions", "own_reactions")


def read(call: Call) -> tuple[int, dict[str, Any]]:
    """A page of the feed, as ``feed/…`` reads it, enriched."""
    status, body = feeds.read(call)
    if "results" in body:
        Resolver(call.engine).activities(body["results"])
        body["next"] = body["next"].replace(
            f"{feeds.PREFIX}/feed/", f"{feeds.PREFIX}/enrich/feed/", 1
        )
    return status, body


class Resolver:
    """Resolves references, each once (a page names the same actor often)."""

    def __init__(self, engine: Tidings) -> None:
        self.engine = engine
        self.found: dict[str, Any] = {}

    def activities(self, items: list[dict[str, Any]]) -> None:
        """Enrich Stream's activities in place."""
        for item in items:
            for key, value in item.items():
                if key not in _PLAIN and isinstance(value, str):
                    item[key] = self.resolve(value)
            for name in _REACTION_FIELDS:
                for rows in (item.get(name) or {}).values():
                    for row in rows:
                        user = self.resolve(f"SU:{row['user_id']}")
                        if isinstance(user, dict):
                            row["user"] = user

    def resolve(self, value: str) -> Any:
        """What ``value`` refers to in Stream's shape, or ``value`` itself."""
        if value not in self.found:
            self.found[value] = self._lookup(value)
        return self.found[value]

    def _lookup(self, value: str) -> Any:
        ref = reference(value)
        if ref is None:
            return value
        try:
            if ref[0] == "SU":
                return user_out(self.engine.users.get(ref[1]))
            if ref[0] == "SO":
                return entry_out(self.engine.objects.get(ref[1], ref[2]))
            return reaction_out(self.engine.reactions.get(from_uuid(ref[1])).to_dict())
        except (NotFound, ValidationError, MappingError):
            return value  # (a reference tidings cannot hold, or to nothing stored)
