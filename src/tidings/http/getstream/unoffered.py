"""Stream's hosted services that tidings does not offer, answered in Stream's
format (``NotAllowedException``, HTTP 501) with a detail naming the service,
rather than as an unknown route: personalization, analytics, open graph
scraping, file and image uploads and moderation flags.

Personalization and analytics are on paths of their own
(``/personalization/v1.0/…``, ``/analytics/v1.0/…``, where the clients send
them), mounted beside the protocol by :func:`mount`; the others are routes of
the protocol's app (:data:`ROUTES`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.http.getstream.endpoint import answer
from tidings.http.getstream.errors import Code, StreamError

_EVERY = ["GET", "POST", "PUT", "PATCH", "DELETE"]

#: Each service: its name in the answer, and the paths the clients call it on.
SERVICES = {
    "personalization": ("/enrich/personalization/{rest:path}", "/personalization/{rest:path}"),
    "open graph scraping (og)": ("/og/",),
    "file uploads": ("/files/",),
    "image uploads": ("/images/", "/images/{rest:path}"),
    "moderation flags": ("/moderation/{rest:path}",),
}

#: Where the clients send the services outside ``/api/v1.0``, and which they are.
MOUNTS = {"/personalization/v1.0": "personalization", "/analytics/v1.0": "analytics"}


def refusal(service: str) -> StreamError:
    return StreamError(
        Code.NOT_OFFERED,
        f"{service} is a hosted service of Stream's that tidings does not offer",
    )


def _refuse(service: str) -> Callable[[Request], Awaitable[Response]]:
    async def handle(_: Request) -> Response:
        started = time.perf_counter()
        error = refusal(service)
        return answer(error.status, error.body(), started)

    return handle


ROUTES = [
    Route(path, _refuse(service), methods=_EVERY)
    for service, paths in SERVICES.items()
    for path in paths
]


def mount(parent: Starlette) -> None:
    """Answer the services on paths of their own (outside the protocol's mount)."""
    for path, service in MOUNTS.items():
        routes = [Route("/{rest:path}", _refuse(service), methods=_EVERY)]
        parent.mount(path, Starlette(routes=routes))
