"""What every Stream endpoint does around its work: time it, name the app by
its key and check the token, read the body, run the work off the event loop,
and answer in Stream's shape (``duration`` in every body, errors included)."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from tidings.core.feeds import parse_feed_id
from tidings.engine import Tidings
from tidings.http.getstream.auth import Grant, GrantCache
from tidings.http.getstream.errors import Code, StreamError, translate
from tidings.http.getstream.mapper import duration


@dataclass(frozen=True, slots=True)
class Call:
    """One request, checked: the feed its path names (if it names one: else
    ``slug`` and ``user_id`` are empty) and what it sent."""

    engine: Tidings
    grant: Grant
    slug: str
    user_id: str
    query: Mapping[str, str]
    path: Mapping[str, str]
    body: Any

    @property
    def feed(self) -> str:
        return f"{self.slug}:{self.user_id}"

    def check_groups(self, feeds: list[str]) -> None:
        """Raise unless every feed named (in ``to``, a follow's target) is a
        valid feed id of a group this api key reaches."""
        for feed in feeds:
            parse_feed_id(feed, self.engine.feed_groups)
            group = feed.partition(":")[0]
            if group not in self.grant.key.groups:
                raise StreamError(
                    Code.FEED_CONFIG, f"feed group {group!r} is not configured for this api key"
                )


#: The work of an endpoint: its status and body (``duration`` is added).
#: Blocking (run in the thread pool), or a coroutine function run on the
#: event loop, for work that awaits the store itself.
Work = Callable[[Call], tuple[int, dict[str, Any]]]
AsyncWork = Callable[[Call], Awaitable[tuple[int, dict[str, Any]]]]
#: What a token may reach, checked before the work: raises if ``action`` on
#: ``resource`` is not granted; the feed the path names (``slug``,
#: ``user_id``), or two empty strings.
Scope = Callable[[Grant, Request, Tidings, str, str], tuple[str, str]]


def feed_scope(
    grant: Grant, request: Request, engine: Tidings, resource: str, action: str
) -> tuple[str, str]:
    """The feed in the path, which the token must reach; a call naming no
    feed (``activities/``, ``follow_many/``...) needs every feed."""
    slug, user_id = request.path_params.get("slug", ""), request.path_params.get("user_id", "")
    if slug or user_id:
        grant.check(resource, action, slug, user_id)
        engine.check_feed(f"{slug}:{user_id}")
    else:
        grant.check_all(resource, action)
    return slug, user_id


def endpoint(
    resource: str, action: str, work: Work | AsyncWork, scope: Scope = feed_scope
) -> Callable[[Request], Any]:
    """An ASGI endpoint doing ``work`` for tokens that may do ``action`` on
    ``resource`` within ``scope``."""
    run = _awaitable(work)

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        try:
            call = await _call(request, resource, action, scope)
            status, body = await run(call)
        except Exception as exc:
            error = translate(exc)
            if error is None:
                raise
            status, body = error.status, error.body()
        return answer(status, body, started)

    return handle


def _awaitable(work: Work | AsyncWork) -> AsyncWork:
    """``work`` as a coroutine function: blocking work runs in the thread pool."""
    if inspect.iscoroutinefunction(work):
        return cast(AsyncWork, work)
    blocking = cast(Work, work)

    async def in_thread(call: Call) -> tuple[int, dict[str, Any]]:
        return await run_in_threadpool(blocking, call)

    return in_thread


def answer(status: int, body: dict[str, Any], started: float) -> Response:
    body["duration"] = duration(time.perf_counter() - started)
    return Response(orjson.dumps(body), status, media_type="application/json")


async def _call(request: Request, resource: str, action: str, scope: Scope) -> Call:
    state = request.app.state
    engine: Tidings | None = getattr(state.parent.state, "engine", None)
    if engine is None:
        raise RuntimeError("the Stream protocol is served before the engine started")
    grants: GrantCache = state.grants
    grant = grants.authenticate(request.query_params, request.headers, engine.clock.timestamp)
    slug, user_id = scope(grant, request, engine, resource, action)
    body = None
    if request.method in ("POST", "PUT"):
        raw = await request.body()
        if raw:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise StreamError(Code.INPUT, f"the body is not JSON: {exc}") from None
    return Call(engine, grant, slug, user_id, request.query_params, request.path_params, body)
