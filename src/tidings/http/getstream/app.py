"""The Stream protocol's ASGI app, mounted under ``/api/v1.0`` by
:func:`tidings.http.create_app` when ``stream_keys`` is set.

A Starlette app of its own, so that every answer, the router's own 404 and
405 included, is in Stream's shape rather than tidings' problem+json.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.http.getstream import (
    aliases,
    collection_batches,
    faye,
    feeds,
    follows,
    social_routes,
    unoffered,
    unscoped,
)
from tidings.http.getstream.auth import GrantCache
from tidings.http.getstream.endpoint import answer, endpoint
from tidings.http.getstream.errors import Code, StreamError
from tidings.settings import StreamKey

MOUNT_PATH = "/api/v1.0"
_FEED = "/feed/{slug}/{user_id}"

ROUTES = [
    Route(f"{_FEED}/", endpoint("feed", "write", feeds.add), methods=["POST"]),
    Route(f"{_FEED}/", endpoint("feed", "read", feeds.read_on_loop), methods=["GET"]),
    Route(f"{_FEED}/follows/", endpoint("follower", "write", follows.follow), methods=["POST"]),
    Route(f"{_FEED}/follows/", endpoint("follower", "read", follows.following), methods=["GET"]),
    Route(f"{_FEED}/followers/", endpoint("follower", "read", follows.followers), methods=["GET"]),
    Route(
        f"{_FEED}/follows/{{target}}/",
        endpoint("follower", "delete", follows.unfollow),
        methods=["DELETE"],
    ),
    Route(
        f"{_FEED}/{{activity_id}}/", endpoint("feed", "delete", feeds.remove), methods=["DELETE"]
    ),
    *unscoped.ROUTES,
    # Before the aliases: its enrich/ reads resolve references, where the
    # aliases' plain read would not (the first matching route serves).
    *social_routes.ROUTES,
    *aliases.ROUTES,
    *faye.ROUTES,
    *collection_batches.ROUTES,
    *unoffered.ROUTES,
]


def create_stream_app(parent: Starlette, keys: Sequence[StreamKey]) -> Starlette:
    """The protocol for the API keys ``keys``, over the engine ``parent`` serves."""
    app = Starlette(routes=ROUTES, exception_handlers={HTTPException: _on_http_error})
    app.state.parent = parent  # (its engine may be built after this, in its lifespan)
    app.state.grants = GrantCache({k.key: k for k in keys})
    return app


async def _on_http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    started = time.perf_counter()
    if exc.status_code == 404:
        error = StreamError(Code.DOES_NOT_EXIST, "no such endpoint in this protocol (so far)")
    else:
        error = StreamError(Code.INPUT, str(exc.detail), status=exc.status_code)
    return answer(error.status, error.body(), started)
