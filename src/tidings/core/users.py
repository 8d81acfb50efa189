"""Users and objects: what activities name as ``actor``, ``object`` and ``target``.

A user has an id (what activities name as ``actor``), a handle people see and
type, and a free JSON profile. Handles are unique as people read them: two
handles are one when they match after NFKC normalisation, case folding and
the folding of look-alike letters (``Alice``, ``ALICE``, a full-width
``Alice``, ``AIice`` and ``alice`` in Cyrillic letters are one handle), and a
handle's letters are of one script (:mod:`tidings.core.handles`), so nobody
can pass for someone else with a look-alike.

An object is application data an activity refers to by ``type:id``
(``photo:17``), stored as JSON: getstream's collections.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from tidings.core import ids
from tidings.core.activity import check_json, check_text
from tidings.core.errors import NotFound, TidingsError, ValidationError
from tidings.core.handles import fold, mixed, skeleton
from tidings.core.limits import MAX_REF_LENGTH

MAX_HANDLE_LENGTH = 64
#: A profile, or an object's data, as JSON (the size of an activity).
MAX_PROFILE_BYTES = 10_240
MAX_OBJECT_TYPE_LENGTH = 64

#: Letters and digits (any script, after NFKC), with ``_ . -`` inside: not
#: first or last, so ``alice.`` is not a look-alike of ``alice``.
_HANDLE = re.compile(r"[^\W_](?:[\w.-]*[^\W_])?", re.UNICODE)
_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
# What an object id may hold: the characters of a feed key, so ``type:id``
# refs and URLs carry it as it is.
_OBJECT_ID = re.compile(r"[A-Za-z0-9_.@=+-]{1,255}")


class UserNotFound(NotFound):
    """No user has the given id (or handle)."""


class ObjectNotFound(NotFound):
    """No object has the given type and id."""


class NotObjectOwner(TidingsError):
    """A user changing or deleting an object someone else (or the application)
    created. HTTP 403."""


class HandleTaken(TidingsError):
    """The handle (as normalised) belongs to another user, or is reserved; or
    the user id is taken, or kept after its user's deletion (``field`` says
    which). HTTP 409."""

    def __init__(self, message: str, *, field: str = "handle") -> None:
        super().__init__(message)
        self.field = field


def handle_key(handle: str) -> str:
    """The form two handles are compared in: NFKC, case-folded, NFKC again,
    then its confusable skeleton (:mod:`tidings.core.handles`)."""
    return skeleton(fold(handle))


def check_handle(handle: object) -> str:
    """A handle as given (kept for display), checked: 1-64 characters of letters
    (of one script) and digits, with ``_``, ``.`` and ``-`` inside."""
    if not isinstance(handle, str) or not 1 <= len(handle) <= MAX_HANDLE_LENGTH:
        raise ValidationError(
            f"must be a string of 1-{MAX_HANDLE_LENGTH} characters", field="handle"
        )
    check_text(handle, "handle")
    folded = fold(handle)
    if not _HANDLE.fullmatch(folded) or len(folded) > MAX_HANDLE_LENGTH:
        raise ValidationError(
            f"{handle[:64]!r} must be letters and digits, with _ . and - only inside, "
            f"at most {MAX_HANDLE_LENGTH} once normalised",
            field="handle",
        )
    why = mixed(folded)
    if why is not None:
        raise ValidationError(f"{handle!r} {why}", field="handle")
    return handle


def check_user_id(user_id: object, name: str = "id") -> str:
    """A user id: what activities name as ``actor`` (1-255 characters), and a
    feed key (``user:<id>``), so the characters of a feed key."""
    if not isinstance(user_id, str) or not _OBJECT_ID.fullmatch(user_id):
        raise ValidationError(
            f"must be 1-{MAX_REF_LENGTH} of A-Z a-z 0-9 _ . @ = + - (it is the key of the "
            f"user's feeds), got {str(user_id)[:64]!r}",
            field=name,
        )
    return user_id


def check_document(value: object, name: str) -> dict[str, Any]:
    """A profile or an object's data: a JSON object of at most MAX_PROFILE_BYTES."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("must be a JSON object", field=name)
    check_json(value, name)
    try:
        size = len(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ValidationError(f"must be JSON-serialisable: {exc}", field=name) from None
    if size > MAX_PROFILE_BYTES:
        raise ValidationError(
            f"is {size:,} bytes as JSON; the limit is {MAX_PROFILE_BYTES:,}", field=name
        )
    return dict(value)


def check_object_ref(kind: object, object_id: object) -> tuple[str, str]:
    if not isinstance(kind, str) or not _TYPE.fullmatch(kind):
        raise ValidationError(
            f"must be 1-{MAX_OBJECT_TYPE_LENGTH} of a-z, 0-9 and _, starting with a letter",
            field="type",
        )
    if not isinstance(object_id, str) or not _OBJECT_ID.fullmatch(object_id):
        raise ValidationError(f"must be 1-{MAX_REF_LENGTH} of A-Z a-z 0-9 _ . @ = + -", field="id")
    return kind, object_id


def split_ref(ref: str) -> tuple[str, str] | None:
    """``"photo:17"`` to ``("photo", "17")``; None when ``ref`` names no object."""
    kind, sep, object_id = ref.partition(":")
    if not sep or not _TYPE.fullmatch(kind) or not _OBJECT_ID.fullmatch(object_id):
        return None
    return kind, object_id


@dataclass(frozen=True, slots=True)
class User:
    id: str
    handle: str
    profile: Mapping[str, Any] = field(default_factory=dict)
    created_us: int = 0
    updated_us: int = 0
    #: When the id's previous user was deleted, if it had one (the id was
    #: created again after the keep time): activities from before are theirs.
    replaced_us: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "handle": self.handle, "profile": dict(self.profile)}

    @property
    def first_id(self) -> str:
        """The smallest activity id that is this user's: those before are the
        previous user's of a re-created id (every id, for a first user)."""
        return "" if self.replaced_us is None else ids.floor_id(self.replaced_us // 1000 + 1)


@dataclass(frozen=True, slots=True)
class StoredObject:
    type: str
    id: str
    data: Mapping[str, Any] = field(default_factory=dict)
    created_us: int = 0
    updated_us: int = 0
    #: The user who created it, who alone (with the application) may change
    #: or delete it; None: the application's (a server token's, or stored
    #: before owners were recorded).
    owner: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.type}:{self.id}"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "id": self.id, "data": dict(self.data)}


def tombstone(ref_id: str) -> dict[str, Any]:
    """What a deleted user enriches to: never an error."""
    return {"id": ref_id, "deleted": True}


def object_tombstone(kind: str, object_id: str) -> dict[str, Any]:
    """What a deleted object enriches to: its type and id, as the object had."""
    return {"type": kind, "id": object_id, "deleted": True}


def project(document: Mapping[str, Any], fields: frozenset[str] | None) -> dict[str, Any]:
    """``document`` with only the top-level ``fields`` (None: all of it)."""
    if fields is None:
        return dict(document)
    return {k: v for k, v in document.items() if k in fields}
