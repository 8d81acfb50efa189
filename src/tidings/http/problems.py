"""Errors as ``application/problem+json`` (RFC 9457).

Every error the service returns has ``type``, ``title``, ``status`` and
``detail``; validation errors also name the offending ``field``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, cast

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.responses import Response

from tidings.core.activity import LONE_SURROGATES
from tidings.core.clock import real_monotonic
from tidings.core.errors import CursorExpired, NotFound, TidingsError, ValidationError
from tidings.core.rules import Blocked
from tidings.core.store_errors import unavailable
from tidings.core.users import HandleTaken, NotObjectOwner
from tidings.http.auth import Forbidden, Unauthenticated

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://tidings.dev/problems/"
#: Seconds a client is told to wait (``Retry-After``) when a store cannot be
#: reached: a PostgreSQL restart or a Redis Cluster failover takes seconds.
STORE_RETRY_AFTER = 2
#: While a store stays unreachable, its log line is repeated at most this often.
OUTAGE_LOG_SECONDS = 10.0


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


def unavailable_problem(exc: BaseException) -> tuple[str, str, str] | None:
    """``(store, kind, detail)`` when ``exc`` says a store cannot be reached or
    cannot take the request now (:func:`tidings.core.store_errors.unavailable`):
    answered 503 with ``Retry-After: STORE_RETRY_AFTER``, over HTTP and by the
    Django views alike; a request answered so was not carried out (a publish
    that got 503 may be sent again: its ``foreign_id`` keeps it once). None
    for any other exception (a bug stays a 500)."""
    found = unavailable(exc)
    if found is None:
        return None
    store, kind = found
    name = {"postgresql": "PostgreSQL", "redis": "Redis", "sqlite": "SQLite"}.get(store, store)
    detail = f"{name} cannot be reached or cannot take this now ({kind}); try again shortly"
    return store, kind, detail


class OutageLog:
    """One log line when a store becomes unreachable, naming it and the
    driver's error; while it stays so, one line every :data:`OUTAGE_LOG_SECONDS`
    with the requests answered 503 meanwhile, instead of one per request."""

    def __init__(
        self, logger: logging.Logger, monotonic: Callable[[], float] = real_monotonic
    ) -> None:
        self.logger = logger
        self.monotonic = monotonic
        self._lock = threading.Lock()
        #: (store, kind) -> (when last logged, requests answered 503 since)
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def __call__(self, store: str, kind: str, exc: BaseException) -> None:
        now = self.monotonic()
        with self._lock:
            logged, since = self._last.get((store, kind), (-OUTAGE_LOG_SECONDS, 0))
            if now - logged < OUTAGE_LOG_SECONDS:
                self._last[(store, kind)] = (logged, since + 1)
                return
            self._last[(store, kind)] = (now, 0)
        more = f" ({since} more since the last line)" if since else ""
        self.logger.warning(
            "store unavailable: %s %s: %s; answering 503 with Retry-After: %d%s",
            store,
            kind,
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
            STORE_RETRY_AFTER,
            more,
        )


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
