"""Every error tidings raises on purpose.

Each one carries a message that says what was wrong and, where there is one,
the limit that was broken. The HTTP layer maps the classes to status codes.
"""

from __future__ import annotations


class TidingsError(Exception):
    """Base class of every error raised by tidings on purpose."""


class ValidationError(TidingsError, ValueError):
    """Input broke a rule; ``field`` names the offending field when there is one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.detail = message


class InvalidFeedId(ValidationError):
    """A feed id is not of the form ``group:key`` or its parts are malformed."""


class UnknownFeedGroup(ValidationError):
    """A feed id names a group that is not configured."""


class InvalidCursor(ValidationError):
    """A pagination cursor was malformed, tampered with, or made for another feed."""


class CursorExpired(InvalidCursor):
    """A cursor whose position is no longer kept (a ranked page's snapshot): read
    from the first page again. HTTP: 410."""


class NotFound(TidingsError, LookupError):
    """Base class for lookups that found nothing."""


class ActivityNotFound(NotFound):
    """No activity has the given id, or (feed, foreign_id)."""


class ConfigurationError(TidingsError):
    """Settings are inconsistent or an optional dependency is missing."""
