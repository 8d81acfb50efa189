"""What the sync and async clients share: a call's description, how an answer
becomes a result or an error, and when a failed call is tried again.

The clients only move bytes (``httpx.Client`` or ``httpx.AsyncClient``) and
sleep (``time.sleep`` or ``asyncio.sleep``); every decision is made here, so
the two cannot drift apart.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from tidings_client.errors import ApiError, TidingsClientError, Unreachable, error_class

T = TypeVar("T")

#: Answers worth another try of an idempotent call: the service (or a proxy
#: before it) is overloaded, restarting or briefly without a store.
RETRY_STATUSES = frozenset({429, 502, 503, 504})

try:  # orjson when the caller's environment has it: several times faster.
    import orjson

    def dumps(value: Any) -> bytes:
        """``value`` as JSON bytes."""
        return orjson.dumps(value)

    loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment

    def dumps(value: Any) -> bytes:
        """``value`` as JSON bytes."""
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    loads = json.loads


def json_result(content: bytes) -> Any:
    """A JSON answer, decoded: the TypedDict the call names, as sent."""
    return loads(content)


def no_result(content: bytes) -> None:
    """A 204 answer: nothing to return."""
    return None


def text_result(content: bytes) -> str:
    return content.decode()


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One HTTP request and how its answer becomes a ``T``.

    ``idempotent`` calls (reads, publishes carrying a ``foreign_id``) may be
    sent again after a failure: a second one changes nothing the first did.
    """

    method: str
    path: str
    decode: Callable[[bytes], T]
    params: Mapping[str, str] | None = None
    body: bytes | None = None
    idempotent: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)


def segment(value: str) -> str:
    """``value`` as one path segment (a ``/`` or ``?`` in an id stays inside it)."""
    return quote(value, safe="")


def feed_path(feed: str) -> str:
    """``/v1/feeds/{group}/{key}`` of a feed id ``group:key``."""
    group, colon, key = feed.partition(":")
    if not colon or not group or not key:
        raise ValueError(f"a feed id is group:key, such as timeline:alice; got {feed!r}")
    return f"/v1/feeds/{segment(group)}/{segment(key)}"


def query(**values: str | int | bool | None) -> dict[str, str]:
    """Query parameters, the unset ones left out and booleans as true/false."""
    out: dict[str, str] = {}
    for name, value in values.items():
        if value is None or value is False:
            continue
        out[name] = "true" if value is True else str(value)
    return out


def finish(call: Call[T], status: int, headers: Mapping[str, str], content: bytes) -> T:
    """The call's result, or the :class:`ApiError` its answer describes."""
    if 200 <= status < 300:
        return call.decode(content)
    raise problem_error(status, headers, content)


def problem_error(status: int, headers: Mapping[str, str], content: bytes) -> ApiError:
    """The exception of an error answer; a body that is not problem+json (a
    proxy's HTML page) still gives its status and its first characters."""
    try:
        body = loads(content) if content else {}
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    title = str(body.get("title") or f"HTTP {status}")
    detail = str(body.get("detail") or content[:200].decode(errors="replace"))
    problem_field = body.get("field")
    return error_class(status)(
        status,
        title,
        detail,
        type=str(body.get("type") or "about:blank"),
        field=problem_field if isinstance(problem_field, str) else None,
        retry_after=_retry_after(headers.get("retry-after")),
    )


def _retry_after(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:  # an HTTP date: not sent by the service; wait as usual
        return None


@dataclass(frozen=True, slots=True)
class Retry:
    """How often, and after how long, a failed idempotent call is tried again.

    ``attempts`` counts every try (1: never again). Delays double from
    ``backoff`` up to ``max_delay``, each drawn between half and all of it
    (so clients failing together do not come back together); a
    ``Retry-After`` the service sends wins, up to ``max_delay``.
    """

    attempts: int = 4
    backoff: float = 0.1
    max_delay: float = 2.0

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``failures``-th failure in a row."""
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        ceiling = min(self.max_delay, self.backoff * 2.0 ** (failures - 1))
        return ceiling * (0.5 + random.random() / 2)


#: Live streams reconnect for longer: a restarting server is back in seconds.
STREAM_RETRY = Retry(attempts=30, backoff=0.1, max_delay=2.0)


class Attempts:
    """The tries of one call: after each failure, how long to wait before the
    next, or the error to raise when there is no next."""

    def __init__(self, policy: Retry, idempotent: bool) -> None:
        self.policy = policy
        self.idempotent = idempotent
        self.failures = 0

    def after(self, error: TidingsClientError) -> float:
        """Seconds until the next try; raises ``error`` when none is due."""
        self.failures += 1
        if not self.idempotent or self.failures >= self.policy.attempts:
            raise error
        if isinstance(error, ApiError):
            if error.status not in RETRY_STATUSES:
                raise error
            return self.policy.delay(self.failures, error.retry_after)
        return self.policy.delay(self.failures)


def unreachable(call: Call[Any], exc: Exception) -> Unreachable:
    error = Unreachable(f"{call.method} {call.path}: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


__all__ = [
    "STREAM_RETRY",
    "Attempts",
    "Call",
    "Retry",
    "dumps",
    "feed_path",
    "finish",
    "json_result",
    "loads",
    "no_result",
    "problem_error",
    "query",
    "segment",
    "text_result",
    "unreachable",
]
