"""What every view of the app does the same way: the methods it answers, the
signed-in user it acts for, CSRF, and errors as JSON.

The views answer JSON only, never a redirect to a login page: a script asking
for a feed wants a status it can act on. Errors have the shape of the HTTP
API's problems (``application/problem+json``: ``type``, ``title``,
``status``, ``detail``, and ``field`` for bad input), with Django's statuses
for bad input (400, where the HTTP API says 422).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import orjson
import pydantic
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_protect

from tidings.core.errors import (
    TidingsError,
    UnknownFeedGroup,
    ValidationError,
)
from tidings.http.problems import (
    MEDIA_TYPE,
    STORE_RETRY_AFTER,
    OutageLog,
    error_problem,
    problem_body,
    unavailable_problem,
)

#: A view of the app: the request, the signed-in user, the URL's values.
View = Callable[..., HttpResponse]
M = TypeVar("M", bound=pydantic.BaseModel)
#: The views' store outages, logged once each (and then every few seconds).
#: The process's, like the engine they use (:func:`.engine.get_engine`).
_outages = OutageLog(logging.getLogger("tidings.contrib.django"))


class Refused(Exception):
    """The signed-in user may not do this (403); the message says why."""


def refuse(reason: str | None) -> None:
    """Raise :class:`Refused` with ``reason`` (a refusal of
    :class:`~tidings.services.access.Access`), unless it is None."""
    if reason is not None:
        raise Refused(reason)


def json_response(body: Any, status: int = 200) -> HttpResponse:
    """``body`` as JSON, times as ISO-8601 in UTC with ``Z`` (as the HTTP API sends them)."""
    content = orjson.dumps(body, option=orjson.OPT_UTC_Z)
    return HttpResponse(content, status=status, content_type="application/json")


def problem(status: int, detail: str, *, field: str | None = None) -> HttpResponse:
    """An error as the HTTP API sends one."""
    body = problem_body(status, detail, field=field)
    return HttpResponse(body, status=status, content_type=MEDIA_TYPE)


def endpoint(*methods: str) -> Callable[[View], View]:
    """A view answering ``methods`` for a signed-in user, called as
    ``view(request, request.user, **url_values)``; CSRF-checked as Django's views
    are (unsafe methods need the token), never cached, errors as JSON."""

    def wrap(view: View) -> View:
        @functools.wraps(view)
        def answer(request: HttpRequest, **values: Any) -> HttpResponse:
            if request.method not in methods:
                response = problem(
                    405, f"{request.method} is not allowed here; use {' or '.join(methods)}"
                )
                response["Allow"] = ", ".join(methods)
            else:
                response = _answer(view, request, values)
            add_never_cache_headers(response)
            return response

        protected: View = csrf_protect(answer)
        return protected

    return wrap


def _answer(view: View, request: HttpRequest, values: Mapping[str, Any]) -> HttpResponse:
    user = getattr(request, "user", None)
    if user is None:
        raise ImproperlyConfigured(
            "tidings' views need request.user: add "
            "django.contrib.auth.middleware.AuthenticationMiddleware to MIDDLEWARE"
        )
    if not user.is_authenticated:
        return problem(401, "not signed in: these views act for the user of the session")
    try:
        return view(request, user, **values)
    except Refused as exc:
        return problem(403, str(exc))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        return problem(400, first["msg"], field=field)
    except TidingsError as exc:
        return _error(exc)
    except Exception as exc:
        # A store that cannot be reached: 503 as over HTTP; anything else is a bug.
        found = unavailable_problem(exc)
        if found is None:
            raise
        store, kind, detail = found
        _outages(store, kind, exc)
        response = problem(503, detail)
        response["Retry-After"] = str(STORE_RETRY_AFTER)
        return response


def _error(exc: TidingsError) -> HttpResponse:
    # As the HTTP API maps them, bad input aside (400 here, 422 there); a feed
    # of a group nobody configured is a feed that does not exist.
    if isinstance(exc, UnknownFeedGroup):
        return problem(404, exc.detail, field=exc.field)
    status, detail, field = error_problem(exc, invalid=400)
    return problem(status, detail, field=field)


def json_body(request: HttpRequest, model: type[M], **given: Any) -> M:
    """The request's JSON body as ``model`` (the HTTP API's request shapes, with
    their limits), ``given`` filled in by the view; a body naming one of
    ``given`` itself is refused (the signed-in user is who acts)."""
    try:
        body = orjson.loads(request.body or b"null")
    except orjson.JSONDecodeError as exc:
        raise ValidationError(f"the body must be JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ValidationError("the body must be a JSON object")
    for name in given:
        if name in body:
            raise ValidationError("leave it out: the signed-in user is who acts", field=name)
    return model.model_validate({**body, **given})
