"""Errors as ``application/problem+json`` (RFC 9457).

Every error the service returns has ``type``, ``title``, ``status`` and
``detail``; validation errors also name the offending ``field``.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, cast

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.responses import Response

from tidings.core.activity import LONE_SURROGATES
from tidings.core.errors import CursorExpired, NotFound, TidingsError, ValidationError
from tidings.core.rules import Blocked
from tidings.core.users import HandleTaken, NotObjectOwner
from tidings.http.auth import Forbidden, Unauthenticated

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://tidings.dev/problems/"


class Problem(BaseModel):
    type: str
    title: str
    status: int
    detail: str
    field: str | None = None


def problem(status: int, detail: str, *, field: str | None = None, **headers: str) -> Response:
    body = problem_body(status, detail, field=field)
    return Response(body, status, media_type=MEDIA_TYPE, headers=headers or None)


def problem_body(status: int, detail: str, *, field: str | None = None) -> bytes:
    """The JSON of a problem (also written by the server's protocol, below the app)."""
    title = HTTPStatus(status).phrase
    body: dict[str, Any] = {
        "type": TYPE_BASE + title.lower().replace(" ", "-"),
        "title": title,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    return orjson.dumps(body)


def error_problem(exc: TidingsError, invalid: int = 422) -> tuple[int, str, str | None]:
    """The status, detail and field an engine error is answered with, over HTTP
    and by the Django views alike; bad input gets ``invalid`` (422 here)."""
    if isinstance(exc, CursorExpired):
        return 410, exc.detail, exc.field
    if isinstance(exc, ValidationError):
        return invalid, exc.detail, exc.field
    if isinstance(exc, NotFound):
        return 404, str(exc), None
    if isinstance(exc, Blocked | NotObjectOwner):
        return 403, str(exc), None
    if isinstance(exc, HandleTaken):
        return 409, str(exc), exc.field
    return 400, str(exc), None


async def on_tidings_error(_: Request, exc: Exception) -> Response:
    # Registered for TidingsError alone (HANDLERS).
    status, detail, field = error_problem(cast(TidingsError, exc))
    return problem(status, detail, field=field)


async def on_unauthenticated(_: Request, exc: Exception) -> Response:
    return problem(401, str(exc), **{"WWW-Authenticate": "Bearer"})


async def on_forbidden(_: Request, exc: Exception) -> Response:
    return problem(403, str(exc))


async def on_request_validation(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    location = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    # For unparsable JSON the location is a character offset, not a field.
    field = None if first.get("type") == "json_invalid" else ".".join(location) or None
    detail = str(first.get("msg", "invalid request"))
    if first.get("type") == "string_unicode":  # pydantic's words for a lone surrogate
        detail = LONE_SURROGATES
    return problem(422, detail, field=field)


async def on_http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return problem(exc.status_code, str(exc.detail), **(exc.headers or {}))


HANDLERS: dict[type[Exception], Any] = {
    TidingsError: on_tidings_error,
    Unauthenticated: on_unauthenticated,
    Forbidden: on_forbidden,
    RequestValidationError: on_request_validation,
    HTTPException: on_http_error,
}

#: OpenAPI descriptions of the error responses every endpoint can give.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "model": Problem,
        "content": {MEDIA_TYPE: {}},
        "description": HTTPStatus(status).phrase,
    }
    for status in (400, 401, 403, 404, 409, 410, 413, 422)
}
