"""Users over the Stream protocol (``user/``): add (``get_or_create``), get
(``with_follow_counts``), update, delete, on tidings' users service.

A Stream user is a tidings user whose handle is its id and whose profile is
its ``data``: so an id must also be a valid handle (letters and digits, with
``_ . -`` inside), and two ids that are one handle as people read them
(``Alice`` and ``alice``) cannot both be users. A user token reads any user
and writes only its own.
"""

from __future__ import annotations

import contextlib
from typing import Any

from tidings.core.users import HandleTaken, UserNotFound
from tidings.http import auth
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import MappingError, flag
from tidings.http.getstream.records import user_out

#: The status Stream answers a second add of an id with.
CONFLICT = 409


def add(call: Call) -> tuple[int, dict[str, Any]]:
    """A new user ``id`` with ``data``; with ``get_or_create`` an existing one is returned."""
    body = call.body
    if not isinstance(body, dict):
        raise MappingError("must be a JSON object", field="user")
    user_id = body.get("id")
    if not isinstance(user_id, str):
        raise MappingError("must be a string", field="id")
    _check_self(call, user_id, "create")
    users = call.engine.users
    try:
        created = users.create(user_id, user_id, body.get("data"))
    except HandleTaken as exc:
        held = None
        if flag(call.query, "get_or_create"):
            # (UserNotFound: the handle is another user's, a conflict all the same)
            with contextlib.suppress(UserNotFound):
                held = users.get(user_id)
        if held is None:
            raise StreamError(Code.INPUT, str(exc), status=CONFLICT) from None
        return 200, user_out(held)
    return 201, user_out(created)


def get(call: Call) -> tuple[int, dict[str, Any]]:
    user_id = call.path["user_id"]
    users = call.engine.users
    counts = users.counts(user_id) if flag(call.query, "with_follow_counts") else None
    return 200, user_out(users.get(user_id), counts)


def update(call: Call) -> tuple[int, dict[str, Any]]:
    """Replace the user's ``data``."""
    user_id = call.path["user_id"]
    _check_self(call, user_id, "change")
    body = call.body if isinstance(call.body, dict) else {}
    return 200, user_out(call.engine.users.update(user_id, profile=body.get("data") or {}))


def delete(call: Call) -> tuple[int, dict[str, Any]]:
    user_id = call.path["user_id"]
    _check_self(call, user_id, "delete")
    call.engine.users.delete(user_id)
    return 200, {}


def _check_self(call: Call, user_id: object, action: str) -> None:
    who = call.grant.principal()
    if not who.server and user_id != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may not {action} user {user_id!r}")
