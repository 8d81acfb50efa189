"""The endpoint of calls that are not on a feed: reactions, users and
collections (``reaction/…``, ``user/…``, ``collections/…``).

What :func:`tidings.http.getstream.endpoint.endpoint` does for a feed's
calls, without a feed: a server token is held to its ``resource`` and
``action`` claims (its ``feed_id`` names no feed here); a user token may
make the call, and the work holds it to its own reactions, user and entries.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from tidings.engine import Tidings
from tidings.http.getstream.auth import Grant, authenticate
from tidings.http.getstream.endpoint import Call, Work, answer
from tidings.http.getstream.errors import Code, StreamError, translate
from tidings.settings import StreamKey


def resource_endpoint(resource: str, action: str, work: Work) -> Callable[[Request], Any]:
    """An ASGI endpoint doing ``work`` for tokens that may do ``action`` on ``resource``."""

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        try:
            call = await _call(request, resource, action)
            status, body = await run_in_threadpool(work, call)
        except Exception as exc:
            error = translate(exc)
            if error is None:
                raise
            status, body = error.status, error.body()
        return answer(status, body, started)

    return handle


def check_claims(grant: Grant, resource: str, action: str) -> None:
    """Raise unless a server token's claims name ``resource`` and ``action`` (or ``*``)."""
    if not grant.server:
        return
    for claim, value in (("resource", resource), ("action", action)):
        granted = getattr(grant, claim)
        if granted not in ("*", value):
            raise StreamError(
                Code.NOT_ALLOWED,
                f"the token's {claim} claim is {granted!r}; this needs {value!r} (or '*')",
            )


async def _call(request: Request, resource: str, action: str) -> Call:
    state = request.app.state
    engine: Tidings | None = getattr(state.parent.state, "engine", None)
    if engine is None:
        raise RuntimeError("the Stream protocol is served before the engine started")
    keys: Mapping[str, StreamKey] = state.keys
    grant = authenticate(keys, request.query_params, request.headers, engine.clock.timestamp)
    check_claims(grant, resource, action)
    body = None
    if request.method in ("POST", "PUT"):
        raw = await request.body()
        if raw:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise StreamError(Code.INPUT, f"the body is not JSON: {exc}") from None
    return Call(engine, grant, "", "", request.query_params, request.path_params, body)
