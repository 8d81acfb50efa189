"""What the client raises.

Every answer of the service that is an error becomes an :class:`ApiError`
(or the subclass for its status), carrying the ``application/problem+json``
body's fields; a service that cannot be reached is :class:`Unreachable`.
"""

from __future__ import annotations

import re
from typing import Any

#: A setting or limit named at the end of a detail, as the service words its
#: refusals: "... its limit (live_connections_per_user)".
_NAMED = re.compile(r"\(([a-z][a-z0-9_]*)\)\s*$")


class TidingsClientError(Exception):
    """Anything the client raises."""


class Unreachable(TidingsClientError):
    """No answer from the service (refused, reset, timed out), after any retries."""


class StreamEnded(TidingsClientError):
    """A live stream cannot go on: its token expired, or reconnecting kept failing."""


class ApiError(TidingsClientError):
    """An error answer of the service, with its problem+json fields.

    ``field`` names the offending input (validation errors, expired cursors);
    ``limit`` the setting or limit the detail names, if any; ``retry_after``
    the seconds a 429 or 503 asks to wait.
    """

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        type: str = "about:blank",
        field: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.field = field
        self.retry_after = retry_after

    @property
    def limit(self) -> str | None:
        """The limit the error names: a setting in parentheses ending the
        detail, else the offending field."""
        found = _NAMED.search(self.detail)
        return found.group(1) if found else self.field

    @property
    def problem(self) -> dict[str, Any]:
        """The problem+json body's fields."""
        body: dict[str, Any] = {"type": self.type, "title": self.title, "status": self.status}
        body["detail"] = self.detail
        if self.field is not None:
            body["field"] = self.field
        return body


class BadRequest(ApiError):
    """400: a request the service cannot take (firehose filters beyond their limits...)."""


class Unauthorized(ApiError):
    """401: no usable token (missing, malformed, expired, wrongly signed)."""


class Forbidden(ApiError):
    """403: the token may not do this (or a block forbids it)."""


class NotFound(ApiError):
    """404: no such feed entry, activity, user, object or rule."""


class Conflict(ApiError):
    """409: the id or handle is taken."""


class Gone(ApiError):
    """410: the cursor has expired; read again from the first page."""


class TooLarge(ApiError):
    """413: the request body is too large."""


class Invalid(ApiError):
    """422: a value the service refuses; ``field`` names it."""


class TooManyRequests(ApiError):
    """429: a per-user limit (live connections...) is reached."""


class Unavailable(ApiError):
    """503 (or 502, 504): the service or one of its stores does not answer now."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: TooLarge,
    422: Invalid,
    429: TooManyRequests,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def error_class(status: int) -> type[ApiError]:
    """The exception raised for ``status``."""
    return _BY_STATUS.get(status, ApiError)


__all__ = [
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "StreamEnded",
    "TidingsClientError",
    "TooLarge",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "Unreachable",
    "error_class",
]
