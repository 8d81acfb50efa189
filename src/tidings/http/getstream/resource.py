"""The endpoint of calls that are not on a feed: reactions, users and
collections (``reaction/…``, ``user/…``, ``collections/…``).

What :func:`tidings.http.getstream.endpoint.endpoint` does for a feed's
calls, without a feed: a server token is held to its ``resource`` and
``action`` claims (its ``feed_id`` names no feed here); a user token may
make the call, and the work holds it to its own reactions, user and entries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from tidings.engine import Tidings
from tidings.http.getstream.auth import Grant
from tidings.http.getstream.endpoint import Work, endpoint
from tidings.http.getstream.errors import Code, StreamError


def resource_endpoint(resource: str, action: str, work: Work) -> Callable[[Request], Any]:
    """An ASGI endpoint doing ``work`` for tokens that may do ``action`` on
    ``resource``: server tokens by their claims, user tokens by each call's rules."""
    return endpoint(resource, action, work, claims_scope)


def claims_scope(
    grant: Grant, request: Request, engine: Tidings, resource: str, action: str
) -> tuple[str, str]:
    """No feed: a server token's claims must name ``resource`` and ``action``."""
    check_claims(grant, resource, action)
    return "", ""


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
