"""Collections over the Stream protocol (``collections/{name}/…``): add, get,
update and delete entries, each the tidings object ``<name>:<id>`` (its
``data`` the object's), which enrichment resolves ``SO:<name>:<id>`` to.

A collection's name is an object type (1-64 of a-z, 0-9 and _, starting
with a letter). An entry added by a user (a user token, or ``user_id`` from
a server) is that user's: other users may read it but not change it.
"""

from __future__ import annotations

import uuid
from typing import Any

from tidings.core.users import ObjectNotFound
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import MappingError
from tidings.http.getstream.records import entry_out

#: The status Stream answers the add of an id its collection holds with.
CONFLICT = 409


def add(call: Call) -> tuple[int, dict[str, Any]]:
    """A new entry (``id``, else a new UUID) with ``data``."""
    body = _object(call.body)
    name = call.path["collection"]
    entry_id = body.get("id") or str(uuid.uuid4())
    objects = call.engine.objects
    try:
        objects.get(name, entry_id)
    except ObjectNotFound:
        stored, _ = objects.put(name, entry_id, body.get("data"), user=_writer(call, body))
        return 201, entry_out(stored)
    raise StreamError(
        Code.INPUT, f"collection {name!r} already has an entry {entry_id!r}", status=CONFLICT
    )


def get(call: Call) -> tuple[int, dict[str, Any]]:
    return 200, entry_out(call.engine.objects.get(call.path["collection"], call.path["entry_id"]))


def update(call: Call) -> tuple[int, dict[str, Any]]:
    """Replace an entry's ``data`` (it must exist)."""
    body = _object(call.body)
    name, entry_id = call.path["collection"], call.path["entry_id"]
    objects = call.engine.objects
    objects.get(name, entry_id)
    stored, _ = objects.put(name, entry_id, body.get("data"), user=_writer(call, {}))
    return 200, entry_out(stored)


def delete(call: Call) -> tuple[int, dict[str, Any]]:
    name, entry_id = call.path["collection"], call.path["entry_id"]
    call.engine.objects.delete(name, entry_id, user=_writer(call, {}))
    return 200, {}


def _writer(call: Call, body: dict[str, Any]) -> str | None:
    """Who writes: a user token's user; for a server token, the ``user_id`` it
    names (the entry's owner, if new), else the application (which may change any)."""
    grant = call.grant
    if not grant.server:
        named = body.get("user_id")
        if named is not None and named != grant.user_id:
            raise StreamError(
                Code.NOT_ALLOWED,
                f"a token for {grant.user_id!r} may not add entries as {named!r}",
            )
        return grant.user_id
    named = body.get("user_id")
    if named is not None and not isinstance(named, str):
        raise MappingError("must be a string", field="user_id")
    return named


def _object(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise MappingError(f"must be a JSON object, got {type(body).__name__}", field="entry")
    return body
