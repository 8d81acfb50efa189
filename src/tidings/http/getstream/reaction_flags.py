"""What a feed page's activities carry about their reactions, as Stream's
clients ask: ``withOwnReactions`` (``own_reactions``), ``withRecentReactions``
(``latest_reactions``), ``withReactionCounts`` (``reaction_counts``), each
narrowed to the kinds of ``reactionKindsFilter``.

One batch per page, from the reactions service. Whose reactions are "own":
a user token's user; for a server token, ``user_id`` in the query, else the
feed's user id (as tidings' own reads default to the feed's key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.mapper import MappingError, flag, from_uuid
from tidings.http.getstream.records import reaction_out

#: Stream's query flags, and the tidings include each asks for.
FLAGS = {"withOwnReactions": "own", "withRecentReactions": "latest", "withReactionCounts": "counts"}
#: Kinds one ``reactionKindsFilter`` may name.
MAX_KINDS = 50


def add_fields(call: Call, results: list[dict[str, Any]]) -> None:
    """Add the reaction fields the query asks for to ``results`` (Stream's activities), in place."""
    include = [word for name, word in FLAGS.items() if flag(call.query, name)]
    if not include or not results:
        return
    kinds = _kinds(call.query)
    found = call.engine.reactions.fields(
        [from_uuid(item["id"]) for item in results], ",".join(include), _reader(call)
    )
    for item in results:
        fields = found[from_uuid(item["id"])]
        if "reaction_counts" in fields:
            counts = fields["reaction_counts"]
            item["reaction_counts"] = {k: n for k, n in counts.items() if _kept(k, kinds)}
        for name in ("latest_reactions", "own_reactions"):
            if name in fields:
                item[name] = {
                    kind: [reaction_out(r) for r in rows]
                    for kind, rows in fields[name].items()
                    if _kept(kind, kinds)
                }


def _reader(call: Call) -> str:
    grant = call.grant
    if not grant.server:
        assert grant.user_id is not None  # (a user token has one)
        return grant.user_id
    return call.query.get("user_id") or call.user_id


def _kinds(query: Mapping[str, str]) -> frozenset[str] | None:
    raw = query.get("reactionKindsFilter")
    if not raw:
        return None
    kinds = frozenset(k.strip() for k in raw.split(",") if k.strip())
    if len(kinds) > MAX_KINDS:
        raise MappingError(
            f"{len(kinds)} kinds; the limit is {MAX_KINDS}", field="reactionKindsFilter"
        )
    return kinds


def _kept(kind: str, kinds: frozenset[str] | None) -> bool:
    return kinds is None or kind in kinds
