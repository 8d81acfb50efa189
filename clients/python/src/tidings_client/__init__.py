"""A typed client for a tidings service's HTTP API.

``Client`` blocks, ``AsyncClient`` awaits; both cover every route, raise
:class:`ApiError` (with the problem+json fields) for error answers, retry
only idempotent calls, and read live events that resume by ``Last-Event-ID``.
Results are the service's JSON, typed by the TypedDicts of :mod:`.types`.
"""

from tidings_client._core import Call, Retry
from tidings_client._sse import Event
from tidings_client.aio import AsyncClient, AsyncEventStream
from tidings_client.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    StreamEnded,
    TidingsClientError,
    TooLarge,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    Unreachable,
)
from tidings_client.sync import Client, EventStream

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncEventStream",
    "BadRequest",
    "Call",
    "Client",
    "Conflict",
    "Event",
    "EventStream",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "Retry",
    "StreamEnded",
    "TidingsClientError",
    "TooLarge",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "Unreachable",
    "__version__",
]
