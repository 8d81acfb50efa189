"""What the routes share: the engine and the caller as FastAPI dependencies, the
query parameters FastAPI declares, and the feed id a route's path names."""

# No `from __future__ import annotations`: FastAPI reads these annotations at
# runtime to build dependencies and the schema.
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPBearer
from pydantic import BeforeValidator

from tidings.core.feeds import parse_feed_id
from tidings.core.limits import MAX_PAGE_SIZE
from tidings.engine import Tidings
from tidings.http import auth
from tidings.http.fastpath import bool_param, int_param

_bearer = HTTPBearer(auto_error=False, description="a tidings JWT (`tidings token`)")


async def engine(request: Request) -> Tidings:
    """The app's engine (``create_app``). async: a sync dependency costs a thread-pool hop."""
    feeds: Tidings = request.app.state.engine
    return feeds


async def principal(request: Request, _: Annotated[Any, Depends(_bearer)]) -> auth.Principal:
    """The caller, from the request's bearer token."""
    # The HTTPBearer dependency documents the scheme in OpenAPI; the header is
    # checked by auth.verify so every failure gets the same problem shape.
    # async: checking a token is a few microseconds of CPU (less with the
    # cache), far cheaper than the thread-pool hop a sync dependency costs.
    tokens: auth.TokenCache = request.app.state.tokens
    return tokens.verify(request.headers.get("authorization"))


def _query(parse: Callable[[str], Any]) -> BeforeValidator:
    """A query parameter FastAPI declares, read by the same rule as those read by
    hand; pydantic reports the ValueError as the parameter's (so no name is given)."""
    return BeforeValidator(lambda raw: parse(raw) if isinstance(raw, str) else raw)


Engine = Annotated[Tidings, Depends(engine)]
Who = Annotated[auth.Principal, Depends(principal)]
Limit = Annotated[
    int, _query(lambda raw: int_param(raw, "", default=0)), Query(ge=1, le=MAX_PAGE_SIZE)
]
Flag = Annotated[bool, _query(lambda raw: bool_param(raw, ""))]
Cursor = Annotated[str | None, Query(max_length=1024)]


def feed_id(engine: Tidings, group: str, key: str) -> str:
    """The id of the feed a route's path names, checked against the engine's feed groups."""
    feed = f"{group}:{key}"
    parse_feed_id(feed, engine.feed_groups)
    return feed
