"""A user's mutes, blocks and keyword filters: add, list, delete.

A user token manages only its own; a server token, anyone's.
"""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
from fastapi import APIRouter
from starlette.responses import Response

from tidings.core.errors import NotFound
from tidings.http import auth, models
from tidings.http.deps import Engine, Who
from tidings.http.responses import json_response

router = APIRouter(tags=["rules"])


def _own(who: auth.Principal, user_id: str) -> None:
    if not who.server and user_id != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may not manage the rules of {user_id!r}")


@router.post("/v1/users/{user_id}/mutes", status_code=201, response_model=models.MuteOut)
def mute(user_id: str, body: models.MuteIn, who: Who, engine: Engine) -> Response:
    """Hide `target`'s activities from this user's reads and events (for
    `duration_s`, or until deleted); nothing is deleted."""
    _own(who, user_id)
    made = engine.rules.mute(
        user_id, body.target, duration_s=body.duration_s, notifications=body.notifications
    )
    return json_response(made.to_dict(), 201)


@router.get("/v1/users/{user_id}/mutes", response_model=models.ListOut)
def mutes(user_id: str, who: Who, engine: Engine) -> Response:
    _own(who, user_id)
    return json_response({"results": [m.to_dict() for m in engine.rules.mutes(user_id)]})


@router.delete("/v1/users/{user_id}/mutes/{target}", status_code=204)
def unmute(user_id: str, target: str, who: Who, engine: Engine) -> Response:
    _own(who, user_id)
    if not engine.rules.unmute(user_id, target):
        raise NotFound(f"{user_id!r} does not mute {target!r}")
    return Response(status_code=204)


@router.post("/v1/users/{user_id}/blocks", status_code=201, response_model=models.BlockIn)
def block(user_id: str, body: models.BlockIn, who: Who, engine: Engine) -> Response:
    """Block `target`: hidden everywhere, follows between the two end both ways,
    and new ones are refused (403)."""
    _own(who, user_id)
    engine.rules.block(user_id, body.target)
    return json_response({"target": body.target}, 201)


@router.get("/v1/users/{user_id}/blocks", response_model=models.ListOut)
def blocks(user_id: str, who: Who, engine: Engine) -> Response:
    _own(who, user_id)
    return json_response({"results": [{"target": t} for t in engine.rules.blocks(user_id)]})


@router.delete("/v1/users/{user_id}/blocks/{target}", status_code=204)
def unblock(user_id: str, target: str, who: Who, engine: Engine) -> Response:
    _own(who, user_id)
    if not engine.rules.unblock(user_id, target):
        raise NotFound(f"{user_id!r} does not block {target!r}")
    return Response(status_code=204)


@router.post("/v1/users/{user_id}/filters", status_code=201, response_model=models.FilterOut)
def add_filter(user_id: str, body: models.FilterIn, who: Who, engine: Engine) -> Response:
    """Hide activities holding any of `keywords` in the `contexts` named."""
    _own(who, user_id)
    made = engine.rules.add_filter(
        user_id,
        body.keywords,
        whole_word=body.whole_word,
        contexts=body.contexts,
        duration_s=body.duration_s,
    )
    return json_response(made.to_dict(), 201)


@router.get("/v1/users/{user_id}/filters", response_model=models.ListOut)
def filters(user_id: str, who: Who, engine: Engine) -> Response:
    _own(who, user_id)
    return json_response({"results": [f.to_dict() for f in engine.rules.filters(user_id)]})


@router.delete("/v1/users/{user_id}/filters/{filter_id}", status_code=204)
def delete_filter(user_id: str, filter_id: str, who: Who, engine: Engine) -> Response:
    _own(who, user_id)
    if not engine.rules.delete_filter(user_id, filter_id):
        raise NotFound(f"{user_id!r} has no filter {filter_id!r}")
    return Response(status_code=204)
