"""Users, objects, and any feed's counts.

Any token reads users, objects and counts. A user token creates, changes and
deletes only its own user (``id`` = its subject). Objects are written with a
server token, or a user token for the types in ``user_object_types``, which
then changes and deletes only the objects it created.
"""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from tidings.core.users import User
from tidings.engine import Tidings
from tidings.http import auth, models
from tidings.http.deps import Engine, Who, feed_id
from tidings.http.responses import json_response

router = APIRouter(tags=["users"])


@router.post(
    "/v1/users",
    status_code=201,
    response_model=models.UserOut,
    responses={409: {"description": "the id, or the handle (in any case or width), is taken"}},
)
def create_user(body: models.UserIn, who: Who, engine: Engine) -> Response:
    """Create a user; its handle is unique after NFKC normalisation and case folding."""
    _check_self(who, body.id, "create")
    user = engine.users.create(body.id, body.handle, body.profile)
    return json_response(_user(engine, user), 201)


@router.get("/v1/users/by-handle/{handle}", response_model=models.UserOut)
def by_handle(handle: str, who: Who, engine: Engine) -> Response:
    """The user holding the handle, in any case or width (or who gave it up lately)."""
    return json_response(_user(engine, engine.users.by_handle(handle)))


@router.get("/v1/users/{user_id}", response_model=models.UserOut)
def get_user(user_id: str, who: Who, engine: Engine) -> Response:
    """A user, with exact follower, following and activity counts."""
    return json_response(_user(engine, engine.users.get(user_id)))


@router.patch("/v1/users/{user_id}", response_model=models.UserOut)
def update_user(user_id: str, body: models.UserPatch, who: Who, engine: Engine) -> Response:
    """Rename (the old handle keeps resolving for a while) and/or replace the profile."""
    _check_self(who, user_id, "change")
    user = engine.users.update(user_id, handle=body.handle, profile=body.profile)
    return json_response(_user(engine, user))


@router.delete("/v1/users/{user_id}", status_code=204)
def delete_user(user_id: str, who: Who, engine: Engine) -> Response:
    """Delete a user: enriched reads show its activities' actor as a tombstone."""
    _check_self(who, user_id, "delete")
    engine.users.delete(user_id)
    return Response(status_code=204)


@router.get("/v1/feeds/{group}/{key}/stats", response_model=models.StatsOut)
def feed_stats(group: str, key: str, who: Who, engine: Engine) -> Response:
    """Exact follower, following and published-activity counts of any feed."""
    stats = engine.users.feed_stats(feed_id(engine, group, key))
    body = {"followers": stats.followers, "following": stats.following}
    return json_response(body | {"activities": stats.activities})


@router.put(
    "/v1/objects/{kind}/{object_id}",
    response_model=models.ObjectOut,
    responses={201: {"model": models.ObjectOut, "description": "created"}},
)
def put_object(
    kind: str, object_id: str, body: models.ObjectIn, who: Who, engine: Engine
) -> Response:
    """Store what activities refer to as `kind:object_id` (201 new, 200 replaced)."""
    _check_object_writer(who, engine, kind)
    stored, created = engine.objects.put(kind, object_id, body.data, user=_writer(who))
    return json_response(stored.to_dict(), 201 if created else 200)


@router.get("/v1/objects/{kind}/{object_id}", response_model=models.ObjectOut)
def get_object(kind: str, object_id: str, who: Who, engine: Engine) -> Response:
    return json_response(engine.objects.get(kind, object_id).to_dict())


@router.delete("/v1/objects/{kind}/{object_id}", status_code=204)
def delete_object(kind: str, object_id: str, who: Who, engine: Engine) -> Response:
    """Delete an object: enriched reads show it as a tombstone."""
    _check_object_writer(who, engine, kind)
    engine.objects.delete(kind, object_id, user=_writer(who))
    return Response(status_code=204)


def _user(engine: Tidings, user: User) -> dict[str, Any]:
    return user.to_dict() | {"counts": engine.users.counts(user.id)}


def _check_self(who: auth.Principal, user_id: str, action: str) -> None:
    if not who.server and user_id != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may not {action} user {user_id!r}")


def _check_object_writer(who: auth.Principal, engine: Tidings, kind: str) -> None:
    if not who.server and kind not in engine.settings.user_object_types:
        raise auth.Forbidden(
            f"objects of type {kind!r} are written with a server token "
            "(user tokens: the types in user_object_types)"
        )


def _writer(who: auth.Principal) -> str | None:
    """Who writes an object: a user token's subject (None: the application)."""
    return None if who.server else who.subject
