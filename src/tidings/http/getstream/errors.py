"""Errors as Stream's clients read them: ``{"exception", "code", "detail",
"status_code"}``, the code choosing the exception class a client raises
(``stream.exceptions`` in stream-python)."""

from __future__ import annotations

from enum import Enum

from tidings.core.errors import NotFound, TidingsError, UnknownFeedGroup, ValidationError
from tidings.core.rules import Blocked
from tidings.core.users import NotObjectOwner
from tidings.http.auth import Forbidden
from tidings.http.getstream.mapper import MappingError


class Code(Enum):
    """Stream's error codes (those this layer answers with): name, code, HTTP status."""

    API_KEY = ("ApiKeyException", 2, 401)
    SIGNATURE = ("SignatureException", 3, 401)
    INPUT = ("InputException", 4, 400)
    FEED_CONFIG = ("FeedConfigException", 6, 400)
    DOES_NOT_EXIST = ("DoesNotExistException", 16, 404)
    NOT_ALLOWED = ("NotAllowedException", 17, 403)
    #: A service of Stream's that tidings does not offer (501: Not Implemented).
    NOT_OFFERED = ("NotAllowedException", 17, 501)

    @property
    def exception(self) -> str:
        return self.value[0]

    @property
    def code(self) -> int:
        return self.value[1]

    @property
    def status(self) -> int:
        return self.value[2]


class StreamError(Exception):
    """An error answered in Stream's format."""

    def __init__(self, code: Code, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.kind = code
        self.detail = detail
        self.status = code.status if status is None else status

    def body(self) -> dict[str, object]:
        return {
            "exception": self.kind.exception,
            "code": self.kind.code,
            "detail": self.detail,
            "status_code": self.status,
        }


def translate(exc: Exception) -> StreamError | None:
    """The Stream error for an error of tidings (None: not one it raises on purpose)."""
    if isinstance(exc, StreamError):
        return exc
    if isinstance(exc, MappingError):
        return StreamError(Code.INPUT, str(exc))
    if isinstance(exc, UnknownFeedGroup):
        return StreamError(Code.FEED_CONFIG, str(exc))
    if isinstance(exc, ValidationError):
        return StreamError(Code.INPUT, str(exc))
    if isinstance(exc, NotFound):
        return StreamError(Code.DOES_NOT_EXIST, str(exc))
    if isinstance(exc, Forbidden | Blocked | NotObjectOwner):
        return StreamError(Code.NOT_ALLOWED, str(exc))
    if isinstance(exc, TidingsError):
        return StreamError(Code.INPUT, str(exc))
    return None
