"""Reactions: add (to an activity or a reaction), read, change, remove.

A user token reads and adds reactions only to activities it may see (its
own, in a feed it may read, addressed to it, or from a feed one of its feeds
follows), reacts only as itself, names in ``to`` only feeds it may address,
and changes or removes only its own reactions (changes only where it may
still see the activity: not once its owner blocks it).
"""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
from typing import Annotated

from fastapi import APIRouter, Query
from starlette.responses import Response

from tidings.core.reactions import MAX_KIND_LENGTH, Reaction, ReactionNotFound
from tidings.core.results import Page
from tidings.engine import Tidings
from tidings.http import auth, models
from tidings.http.deps import Cursor, Engine, Limit, Who
from tidings.http.responses import json_response

router = APIRouter(tags=["reactions"])

Kind = Annotated[str | None, Query(min_length=1, max_length=MAX_KIND_LENGTH)]


@router.post(
    "/v1/activities/{activity_id}/reactions",
    status_code=201,
    response_model=models.ReactionOut,
    responses={200: {"model": models.ReactionOut, "description": "a unique kind already added"}},
)
def add_reaction(activity_id: str, body: models.ReactionIn, who: Who, engine: Engine) -> Response:
    """React to the activity (or, with `parent`, to one of its reactions). For
    unique kinds (`like`) a second add by the same user returns the first (200)."""
    _check_self(who, body.user, "react as")
    _check_visible(who, engine, activity_id)
    auth.check_to(who, body.to, engine.access)
    reaction, created = engine.reactions.put(
        activity_id, body.kind, body.user, body.data, to=body.to, parent=body.parent
    )
    engine.settle()  # (its notice written before the answer: any process reads it)
    return json_response(reaction.to_dict(), 201 if created else 200)


@router.get("/v1/activities/{activity_id}/reactions", response_model=models.ReactionPage)
def reactions(
    activity_id: str,
    who: Who,
    engine: Engine,
    kind: Kind = None,
    limit: Limit = 25,
    cursor: Cursor = None,
) -> Response:
    """The activity's reactions, newest first (`kind`: of that kind only)."""
    _check_visible(who, engine, activity_id)
    return _page(engine.reactions.page(activity_id, kind, limit=limit, cursor=cursor))


@router.get("/v1/reactions/{reaction_id}", response_model=models.ReactionOut)
def get_reaction(reaction_id: str, who: Who, engine: Engine) -> Response:
    reaction = engine.reactions.get(reaction_id)
    _check_visible(who, engine, reaction.activity_id)
    return json_response(reaction.to_dict())


@router.get("/v1/reactions/{reaction_id}/children", response_model=models.ReactionPage)
def children(
    reaction_id: str,
    who: Who,
    engine: Engine,
    kind: Kind = None,
    limit: Limit = 25,
    cursor: Cursor = None,
) -> Response:
    """Reactions to this reaction (replies to a comment), newest first."""
    _check_visible(who, engine, engine.reactions.get(reaction_id).activity_id)
    return _page(engine.reactions.children(reaction_id, kind, limit=limit, cursor=cursor))


@router.patch("/v1/reactions/{reaction_id}", response_model=models.ReactionOut)
def update_reaction(
    reaction_id: str, body: models.ReactionUpdateIn, who: Who, engine: Engine
) -> Response:
    """Replace the reaction's `data` (a user token: its own reaction, on an
    activity it may still see, as adding one needs)."""
    reaction = _check_own(who, engine, reaction_id, "change")
    if reaction is not None:
        # Whom the activity's owner has blocked since may not change what
        # they said there, as they may not add to it.
        _check_visible(who, engine, reaction.activity_id)
    return json_response(engine.reactions.update(reaction_id, body.data).to_dict())


@router.delete("/v1/reactions/{reaction_id}", status_code=204)
def remove_reaction(reaction_id: str, who: Who, engine: Engine, soft: bool = False) -> Response:
    """Remove the reaction, the reactions under it and their notifications (a
    user token: its own, also where it has been blocked since: one may
    always take back what one said). With `soft=true`, every read leaves them
    out as well, but `POST .../restore` brings them back; removing a reaction
    removed softly (without `soft`) deletes it for good."""
    try:
        _check_own(who, engine, reaction_id, "remove")
    except ReactionNotFound:  # (or removed softly already: still its owner's)
        _check_own(who, engine, reaction_id, "remove", removed=True)
    engine.reactions.remove(reaction_id, soft=soft)
    return Response(status_code=204)


@router.post("/v1/reactions/{reaction_id}/restore", response_model=models.ReactionOut)
def restore_reaction(reaction_id: str, who: Who, engine: Engine) -> Response:
    """Bring back a reaction removed with `soft=true`: it, the reactions
    removed under it, their counts and their notifications (a user token: its
    own). 404 for a reaction not removed softly."""
    removed = _check_own(who, engine, reaction_id, "restore", removed=True)
    if removed is not None:
        # Restoring adds again: only where, and to whom, the user may still
        # add (not on the activity of someone who has blocked them since).
        _check_visible(who, engine, removed.activity_id)
        auth.check_to(who, removed.to, engine.access)
    reaction = engine.reactions.restore(reaction_id)
    engine.settle()  # (its notices written before the answer, as an add's)
    return json_response(reaction.to_dict())


def _check_self(who: auth.Principal, user: str, action: str) -> None:
    if not who.server and user != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may not {action} {user!r}")


def _check_visible(who: auth.Principal, engine: Tidings, activity_id: str) -> None:
    """The activity exists (404), and a user token may see it: its own, in a feed
    it may read, addressed to it, or from a feed one of its feeds follows."""
    activity = engine.get_activity(activity_id)
    refused = None if who.server else engine.access.activity_refusal(activity, who.subject)
    if refused is not None:
        raise auth.Forbidden(refused)


def _check_own(
    who: auth.Principal,
    engine: Tidings,
    reaction_id: str,
    action: str,
    *,
    removed: bool = False,
) -> Reaction | None:
    """A user token's own reaction (403 for another's), live or, with
    ``removed``, removed softly (404 if there is none); None for a server token."""
    if who.server:
        return None
    find = engine.reactions.get_removed if removed else engine.reactions.get
    reaction = find(reaction_id)
    if reaction.user != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may {action} only its own reactions")
    return reaction


def _page(page: Page[Reaction]) -> Response:
    return json_response({"results": [r.to_dict() for r in page.results], "next": page.next})
