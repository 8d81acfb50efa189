"""Collections over many entries (``collections/`` without a name): ``upsert``
(``POST``), ``select`` (``GET`` with ``foreign_ids``) and ``delete_many``
(``DELETE`` with ``collection_name`` and ``ids``), each over the tidings
objects ``<name>:<id>`` as :mod:`tidings.http.getstream.collections` keeps them.

They are the application's calls (a server token): a user token is refused.
Every entry named is checked before the first is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.datastructures import QueryParams
from starlette.routing import Route

from tidings.core.errors import ValidationError
from tidings.core.limits import MAX_BATCH
from tidings.core.users import ObjectNotFound, check_document, check_object_ref
from tidings.http.getstream.endpoint import Call
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import MappingError
from tidings.http.getstream.records import entry_out
from tidings.http.getstream.resource import resource_endpoint as on


def upsert(call: Call) -> tuple[int, dict[str, Any]]:
    """Store each entry of ``data`` (``{collection: [{"id": …, field: …}]}``):
    its fields other than ``id`` are its data, replacing what was there."""
    _server_only(call, "upsert")
    given = call.body.get("data") if isinstance(call.body, Mapping) else None
    if not isinstance(given, Mapping) or not given:
        raise MappingError(
            "must be an object of collection names to lists of entries", field="data"
        )
    planned: list[tuple[str, str, dict[str, Any]]] = []
    for name, entries in given.items():
        if not isinstance(entries, list):
            raise MappingError("must be a list of entries", field=f"data.{name}")
        for i, entry in enumerate(entries):
            field = f"data.{name}.{i}"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str | int):
                raise MappingError("must be an object with an id", field=field)
            data = {k: v for k, v in entry.items() if k != "id"}
            planned.append((*_ref(name, entry["id"], field), _document(data, field)))
    if len(planned) > MAX_BATCH:
        raise MappingError(
            f"{len(planned)} entries; the limit is {MAX_BATCH} per call", field="data"
        )
    stored: dict[str, list[dict[str, Any]]] = {}
    for name, entry_id, data in planned:
        entry, _ = call.engine.objects.put(name, entry_id, data)
        stored.setdefault(name, []).append(entry_out(entry))
    return 201, {"data": stored}


def select(call: Call) -> tuple[int, dict[str, Any]]:
    """The entries of ``foreign_ids`` (``<collection>:<id>``, comma separated)
    that exist, in the order named."""
    _server_only(call, "select")
    refs = _listed(call, "foreign_ids")
    named = []
    for i, ref in enumerate(refs):
        name, sep, entry_id = ref.partition(":")
        if not sep:
            raise MappingError("must be <collection>:<id>", field=f"foreign_ids.{i}")
        named.append(_ref(name, entry_id, f"foreign_ids.{i}"))
    found = []
    for name, entry_id in named:
        try:
            found.append(entry_out(call.engine.objects.get(name, entry_id)))
        except ObjectNotFound:
            continue
    return 200, {"response": {"data": found}}


def delete_many(call: Call) -> tuple[int, dict[str, Any]]:
    """Delete the entries ``ids`` of ``collection_name``; those not stored are skipped."""
    _server_only(call, "delete_many")
    name = call.query.get("collection_name", "")
    named = [_ref(name, entry_id, f"ids.{i}") for i, entry_id in enumerate(_listed(call, "ids"))]
    for kind, entry_id in named:
        try:
            call.engine.objects.delete(kind, entry_id)
        except ObjectNotFound:
            continue
    return 200, {}


def _server_only(call: Call, what: str) -> None:
    if not call.grant.server:
        raise StreamError(
            Code.NOT_ALLOWED, f"collections {what} takes a server token, not a user's"
        )


def _listed(call: Call, name: str) -> list[str]:
    """A list parameter, sent repeated (``ids=1&ids=2``) or comma separated."""
    values = [v for given in QueryParams(call.query).getlist(name) for v in given.split(",") if v]
    if not 1 <= len(values) <= MAX_BATCH:
        raise MappingError(f"must list 1 to {MAX_BATCH} values", field=name)
    return values


def _ref(name: str, entry_id: object, field: str) -> tuple[str, str]:
    try:
        return check_object_ref(name, str(entry_id))
    except ValidationError as exc:
        raise MappingError(str(exc), field=field) from None


def _document(data: dict[str, Any], field: str) -> dict[str, Any]:
    try:
        return check_document(data, "data")
    except ValidationError as exc:
        raise MappingError(str(exc), field=field) from None


ROUTES = [
    Route("/collections/", on("collections", "write", upsert), methods=["POST"]),
    Route("/collections/", on("collections", "read", select), methods=["GET"]),
    Route("/collections/", on("collections", "delete", delete_many), methods=["DELETE"]),
]
