"""Reactions over the Stream protocol: add (to an activity, or as a child of
a reaction, with ``target_feeds``), get, update, delete (``soft`` too) and
restore, and the lists by activity or by parent reaction
(``reaction/{lookup}/{value}/{kind?}``).

A user token reacts only as itself, to activities it may see, names in
``target_feeds`` only feeds it may address, and changes or deletes only its
own reactions: the rules of tidings' own reaction routes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from tidings.core.limits import MAX_PAGE_SIZE
from tidings.core.reactions import Reaction, ReactionNotFound
from tidings.core.results import Page
from tidings.http import auth
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.mapper import (
    MappingError,
    activity_out,
    flag,
    from_uuid,
    id_bounds,
    integer,
    recipient,
    to_uuid,
)
from tidings.http.getstream.records import reaction_out

PREFIX = "/api/v1.0"
#: Newest children of each kind a reaction read by id or in a list carries.
LATEST_CHILDREN = 5


def add(call: Call) -> tuple[int, dict[str, Any]]:
    """A reaction to ``activity_id``, or with ``parent`` to that reaction."""
    body = _object(call.body, "reaction")
    if body.get("id") is not None:
        raise MappingError(
            "tidings gives each reaction its id (time-ordered, for paging); "
            "one chosen by the client cannot be kept",
            field="id",
        )
    engine, who = call.engine, call.grant.principal()
    user = body.get("user_id") or (None if who.server else who.subject)
    if not isinstance(user, str):
        raise MappingError("must be a string: the id of the user reacting", field="user_id")
    if not who.server and user != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may not react as {user!r}")
    parent = body.get("parent") or None
    if parent is not None:
        parent = from_uuid(parent, "parent")
        activity_id = engine.reactions.get(parent).activity_id
    else:
        activity_id = from_uuid(body.get("activity_id", ""), "activity_id")
    _check_visible(call, activity_id)
    targets = body.get("target_feeds") or []
    if not isinstance(targets, list):
        raise MappingError("must be a list of feed ids", field="target_feeds")
    targets = [recipient(t) for t in targets]
    if all(isinstance(t, str) for t in targets):
        call.check_groups(targets)
        auth.check_to(who, targets, engine.access)
    reaction, created = engine.reactions.put(
        activity_id,
        body.get("kind", ""),  # (the service checks it)
        user,
        body.get("data"),
        to=targets,
        parent=parent,
        notice_extra=body.get("target_feeds_extra_data"),
    )
    engine.settle()  # (its notice written before the answer: any process reads it)
    return 201 if created else 200, reaction_out(reaction.to_dict())


def get(call: Call) -> tuple[int, dict[str, Any]]:
    reaction = call.engine.reactions.get(from_uuid(call.path["reaction_id"], "reaction_id"))
    _check_visible(call, reaction.activity_id)
    return 200, _out(call, reaction)


def update(call: Call) -> tuple[int, dict[str, Any]]:
    """New ``data`` for the reaction; ``target_feeds`` may only repeat the ones it has."""
    body = _object(call.body, "reaction")
    reaction = _own(call, "change")
    targets = body.get("target_feeds")
    if targets is not None:
        if not isinstance(targets, list):
            raise MappingError("must be a list of feed ids", field="target_feeds")
        if sorted(str(recipient(t)) for t in targets) != sorted(reaction.to):
            raise MappingError(
                "a reaction's target feeds are set when it is added; tidings does not "
                "move its notification activity to other feeds",
                field="target_feeds",
            )
    if body.get("data") is not None:
        _check_visible(call, reaction.activity_id)
        reaction = call.engine.reactions.update(reaction.id, body["data"])
    return 200, reaction_out(reaction.to_dict())


def delete(call: Call) -> tuple[int, dict[str, Any]]:
    """Delete the reaction, those under it and their notification activities;
    ``soft=true``: the same for every read, but restorable. A reaction deleted
    softly is deleted for good by a delete without it."""
    soft = flag(call.query, "soft")
    reaction_id = from_uuid(call.path["reaction_id"], "reaction_id")
    try:
        _own(call, "delete")
    except ReactionNotFound:  # (or deleted softly already: still its owner's)
        _own_removed(call, reaction_id, "delete")
    call.engine.reactions.remove(reaction_id, soft=soft)
    call.engine.settle()
    return 200, {}


def restore(call: Call) -> tuple[int, dict[str, Any]]:
    """Bring back a reaction deleted softly: it, those deleted under it, their
    counts and their notification activities."""
    reaction_id = from_uuid(call.path["reaction_id"], "reaction_id")
    removed = _own_removed(call, reaction_id, "restore")
    if removed is not None:
        # Restoring adds again: only where, and to whom, the user may still
        # add (as tidings' restore route judges).
        _check_visible(call, removed.activity_id)
        auth.check_to(call.grant.principal(), removed.to, call.engine.access)
    call.engine.reactions.restore(reaction_id)
    call.engine.settle()  # (its notices written before the answer, as an add's)
    return 200, {}


def filter_reactions(call: Call) -> tuple[int, dict[str, Any]]:
    """Reactions to an activity (``activity_id``), to a reaction
    (``reaction_id``) or by a user (``user_id``; a user token: its own),
    newest first, of ``kind`` if the path names one;
    ``limit``, ``id_lt``/``id_lte``/``id_gt``/``id_gte``, ``with_activity_data``."""
    lookup, value, kind = call.path["lookup"], call.path["value"], call.path.get("kind")
    if flag(call.query, "with_own_children"):
        raise MappingError("own children of listed reactions are not served", field="kind")
    limit = integer(call.query, "limit", 10, 1, MAX_PAGE_SIZE)
    before, after = id_bounds(call.query)
    reactions = call.engine.reactions
    if lookup == "activity_id":
        activity_id = from_uuid(value, "activity_id")
        _check_visible(call, activity_id)
        page = reactions.page(activity_id, kind, limit=limit, before=before)
    elif lookup == "reaction_id":
        parent = reactions.get(from_uuid(value, "reaction_id"))
        activity_id = parent.activity_id
        _check_visible(call, activity_id)
        page = reactions.children(parent.id, kind, limit=limit, before=before)
    elif lookup == "user_id":
        who = call.grant.principal()
        if not who.server and value != who.subject:
            # (they span activities this token may not see)
            raise auth.Forbidden(f"a token for {who.subject!r} may list only its own reactions")
        activity_id = None
        page = reactions.by_user(value, kind, limit=limit, before=before)
    else:
        raise MappingError(
            "reactions are listed by activity_id, reaction_id or user_id", field=lookup
        )
    shown = [r for r in page.results if after is None or r.id > after]
    body: dict[str, Any] = {
        "results": [_out(call, r) for r in shown],
        "next": _next(call, page, shown, limit),
    }
    if flag(call.query, "with_activity_data") and activity_id is not None:
        body["activity"] = activity_out(call.engine.get_activity(activity_id).to_dict())
    return 200, body


def _next(call: Call, page: Page[Reaction], shown: list[Reaction], limit: int) -> str:
    if page.next is None or len(shown) < len(page.results) or not shown:
        return ""
    path = call.path
    kind = f"{path['kind']}/" if path.get("kind") else ""
    last = to_uuid(shown[-1].id)
    query = {"api_key": call.query["api_key"], "limit": limit, "id_lt": last}
    return f"{PREFIX}/reaction/{path['lookup']}/{path['value']}/{kind}?{urlencode(query)}"


def _out(call: Call, reaction: Reaction) -> dict[str, Any]:
    """A reaction with the newest of its children of each kind."""
    children = {
        kind: [
            reaction_out(child.to_dict())
            for child in call.engine.reactions.children(
                reaction.id, kind, limit=LATEST_CHILDREN
            ).results
        ]
        for kind in reaction.children_counts
    }
    return reaction_out(reaction.to_dict(), children)


def _own(call: Call, action: str) -> Reaction:
    reaction = call.engine.reactions.get(from_uuid(call.path["reaction_id"], "reaction_id"))
    who = call.grant.principal()
    if not who.server and reaction.user != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may {action} only its own reactions")
    return reaction


def _own_removed(call: Call, reaction_id: str, action: str) -> Reaction | None:
    """As :func:`_own`, for a reaction deleted softly (not found: no such one);
    None for a server token."""
    who = call.grant.principal()
    if who.server:
        return None
    removed = call.engine.reactions.get_removed(reaction_id)
    if removed.user != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may {action} only its own reactions")
    return removed


def _check_visible(call: Call, activity_id: str) -> None:
    """The activity exists, and a user token may see it (as tidings' routes judge)."""
    activity = call.engine.get_activity(activity_id)
    who = call.grant.principal()
    refused = None if who.server else call.engine.access.activity_refusal(activity, who.subject)
    if refused is not None:
        raise auth.Forbidden(refused)


def _object(body: object, field: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise MappingError(f"must be a JSON object, got {type(body).__name__}", field=field)
    return body
