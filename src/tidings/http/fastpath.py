"""The route nearly all traffic takes, ``GET /v1/feeds/{group}/{key}``, served
lean; and the reading of query values by hand, which every route shares.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoint's
# annotations at runtime to build the route's dependant.
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import orjson
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import request_response

from tidings.core import as2
from tidings.core.errors import ValidationError
from tidings.core.feeds import parse_feed_id
from tidings.core.limits import MAX_PAGE_SIZE
from tidings.engine import Tidings
from tidings.http import auth, models
from tidings.http.access import check_readable
from tidings.http.problems import ERRORS
from tidings.http.responses import json_response

#: Seconds a client reading a feed being rebuilt is told to wait: a rebuild
#: writes at most ``max_length`` entries, well under a second unless the
#: runners are behind.
REGENERATION_RETRY_AFTER = 2

# -- query values --------------------------------------------------------------

# Query values are text; these are the only spellings read as values. Python's
# int() (and pydantic's lax mode) would also read "1_0", " 5", "+5" and other
# scripts' digits ("\u0665" is 5), and pydantic's bool "yes", "on" and "t".
_BOOLS = {"true": True, "1": True, "false": False, "0": False}
_INTEGER = re.compile(r"-?[0-9]{1,18}")


def bool_param(raw: str | None, name: str) -> bool:
    """``raw`` as a boolean: true/false or 1/0 only; absent is False."""
    if raw is None:
        return False
    try:
        return _BOOLS[raw]
    except KeyError:
        raise ValidationError(
            f"must be true or false (or 1 or 0), got {raw[:32]!r}", field=name
        ) from None


def int_param(raw: str | None, name: str, *, default: int) -> int:
    """``raw`` as an integer in ASCII digits (an optional minus sign); absent is ``default``."""
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):
        raise ValidationError(f"must be an integer in ASCII digits, got {raw[:32]!r}", field=name)
    return int(raw)


# -- the route -----------------------------------------------------------------


class StarletteRoute(APIRoute):
    """A route FastAPI documents like any other but Starlette serves.

    FastAPI's request handler solves the endpoint's dependencies, validates and
    serialises, inside two AsyncExitStacks, on every request: ~50 us, as much as
    the rest of a page request's work in this process. An endpoint that takes the
    bare ``Request`` and returns a ``Response`` needs none of it, so it is served
    by Starlette's ``request_response``, as a plain ``starlette.routing.Route``
    would be. Unlike a plain Route, this keeps what FastAPI reads from an
    ``APIRoute``: the OpenAPI operation (``response_model``, ``responses``,
    ``openapi_extra``), ``scope["route"]`` for the metrics, and ``methods`` as
    given (Starlette would add HEAD to GET). Errors raised by the endpoint reach
    the app's exception handlers as before.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self.app = request_response(endpoint)


READ_PARAMETERS = [
    {"name": "group", "in": "path", "required": True, "schema": {"type": "string"}},
    {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}},
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 25},
    },
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "schema": {"type": "string", "maxLength": 1024},
    },
    {
        "name": "reactions",
        "in": "query",
        "required": False,
        "description": "comma-separated counts, latest, own: what each activity "
        "carries about its reactions",
        "schema": {"type": "string", "maxLength": 64},
    },
    {
        "name": "user",
        "in": "query",
        "required": False,
        "description": "whose own_reactions (server tokens; user tokens: their own)",
        "schema": {"type": "string", "maxLength": 255},
    },
    {
        "name": "explain",
        "in": "query",
        "required": False,
        "description": "ranked feeds: each activity's score variables",
        "schema": {"type": "boolean", "default": False},
    },
    {
        "name": "enrich",
        "in": "query",
        "required": False,
        "description": "actor as the user, object and target as the stored objects "
        "(tombstones for deleted ones)",
        "schema": {"type": "boolean", "default": False},
    },
    {
        "name": "fields",
        "in": "query",
        "required": False,
        "description": "with enrich: comma-separated keys of profiles and objects' data to keep",
        "schema": {"type": "string", "maxLength": 1024},
    },
    {
        "name": "format",
        "in": "query",
        "required": False,
        "description": "as2: an ActivityStreams 2.0 OrderedCollectionPage (as with "
        "Accept: application/activity+json)",
        "schema": {"type": "string", "enum": [f.value for f in as2.PageFormat]},
    },
    {
        "name": "mark_seen",
        "in": "query",
        "required": False,
        "description": "notification feeds: mark the returned aggregates seen",
        "schema": {"type": "boolean", "default": False},
    },
]


async def read(request: Request) -> Response:
    """A page of the feed, newest first; pass `next` back as `cursor`."""
    # The route nearly all traffic takes, so it is lean (see StarletteRoute):
    # it takes the bare request, parses its four inputs itself (described in
    # READ_PARAMETERS for the schema) and checks the feed id once for both
    # the route and the read check. async, so the read runs on the event
    # loop without a thread-pool hop; on Redis its round trip is awaited,
    # so the worker parses other requests meanwhile.
    state = request.app.state
    tokens: auth.TokenCache = state.tokens
    who = tokens.verify(request.headers.get("authorization"))
    params = request.path_params
    engine: Tidings = state.engine
    feed = f"{params['group']}:{params['key']}"
    parsed = parse_feed_id(feed, engine.feed_groups)
    await check_readable(engine, who, feed, parsed)
    # Starlette's query_params would build a multidict (and two copies of
    # it) for the two values read here; a dict of parse_qsl's pairs gives
    # the same answers (last value wins).
    query_string = request.scope["query_string"]
    query = dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
    limit = int_param(query.get("limit"), "limit", default=25)
    as2_page = _wants_as2(request, query)
    if engine.feed_groups[parsed.group].aggregated:
        # Accept: application/activity+json is a preference: aggregates come as JSON.
        if query.get("format") == as2.PageFormat.AS2:
            raise ValidationError(
                f"{feed} is a feed of aggregates: "
                "ActivityStreams pages are of flat and ranked feeds",
                field="format",
            )
        # Blocking store calls (and a write transaction with mark_seen): in
        # a thread, so the worker's other requests are not held up.
        return await run_in_threadpool(read_aggregates, who, engine, feed, limit, query)
    if "mark_seen" in query:
        bool_param(query["mark_seen"], "mark_seen")
        raise ValidationError(
            f"{feed} is a flat feed: only notification feeds have seen state", field="mark_seen"
        )
    page = await engine.reads.json_async(
        feed,
        limit=limit,
        cursor=query.get("cursor"),
        reactions=query.get("reactions"),
        user=_reader(who, query.get("user")),
        explain=bool_param(query.get("explain"), "explain"),
        enrich=bool_param(query.get("enrich"), "enrich"),
        fields=query.get("fields"),
    )
    if as2_page:
        return _as2(request, feed, page.results, page.next)
    # The stored JSON of each activity is already the response's shape.
    body = b'{"results":[' + b",".join(page.results) + b'],"next":'
    body += orjson.dumps(page.next)
    body += b',"renewed":true}' if page.renewed else b"}"
    if page.regenerating:
        return _regenerating(Response(body, media_type="application/json"))
    return Response(body, media_type="application/json")


def _wants_as2(request: Request, query: dict[str, str]) -> bool:
    """``?format=as2``, or ``Accept: application/activity+json`` (``?format=json``
    wins over the header)."""
    chosen = query.get("format")
    if chosen is not None and chosen not in (as2.PageFormat.JSON, as2.PageFormat.AS2):
        raise ValidationError(f"must be json or as2, got {chosen[:32]!r}", field="format")
    if chosen is not None:
        return chosen == as2.PageFormat.AS2
    return as2.MEDIA_TYPE in request.headers.get("accept", "")


def _as2(request: Request, feed: str, docs: list[bytes], next_cursor: str | None) -> Response:
    """A page as an ActivityStreams 2.0 ``OrderedCollectionPage``."""
    base = str(request.base_url).rstrip("/")
    body = as2.page(
        [orjson.loads(d) for d in docs],
        base_url=base,
        feed=feed,
        next_cursor=next_cursor,
        this_url=str(request.url),
        query=parse_qsl(request.scope["query_string"].decode("latin-1"), keep_blank_values=True),
    )
    return Response(orjson.dumps(body), media_type=as2.MEDIA_TYPE)


def _reader(who: auth.Principal, user: str | None) -> str | None:
    """Whose ``own_reactions`` a page shows: ``user`` (a server token may name
    anyone), else a user token's own; None: the feed's key."""
    if user is None:
        return None if who.server else who.subject
    if not who.server and user != who.subject:
        raise auth.Forbidden(f"a token for {who.subject!r} may not read the reactions of {user!r}")
    return user


def read_aggregates(
    who: auth.Principal, engine: Tidings, feed: str, limit: int, query: dict[str, str]
) -> Response:
    """A page of an aggregated feed's aggregates (blocking: :func:`read` runs it in a thread)."""
    if bool_param(query.get("explain"), "explain"):
        raise ValidationError(
            f"{feed} is a feed of aggregates: only ranked feeds have scores to explain",
            field="explain",
        )
    reactions = query.get("reactions")
    reader = _reader(who, query.get("user"))
    mark = bool_param(query.get("mark_seen"), "mark_seen")
    if mark:
        auth.check_owner(who, feed, "mark aggregates seen in")
    # Every value checked before the read: with mark_seen it writes (the
    # reactions are checked by the read itself, before it marks).
    enrich = bool_param(query.get("enrich"), "enrich")
    fields = query.get("fields")
    if enrich:
        engine.reads.enrich([], fields)
    body, regenerating = engine.reads.aggregates_json(
        feed, limit, query.get("cursor"), reactions=reactions, user=reader, mark_seen=mark
    )
    if enrich:
        engine.reads.enrich([a for g in body["results"] for a in g["activities"]], fields)
    if regenerating:
        return _regenerating(json_response(body))
    return json_response(body)


def _regenerating(response: Response) -> Response:
    """206 for a page of a feed being rebuilt after its owner was idle (as
    Mastodon answers): a flat feed's page is complete, served from the
    canonical store; an aggregated one's may miss aggregates until the rebuild ends."""
    response.status_code = 206
    response.headers["Retry-After"] = str(REGENERATION_RETRY_AFTER)
    return response


#: Built here rather than by a router: ``create_app`` hands it to FastAPI's
#: constructor, the one way to have it before the docs routes FastAPI adds
#: (the router tries routes in order). So the app's error responses, which a
#: router would merge in, are named here.
route = StarletteRoute(
    "/v1/feeds/{group}/{key}",
    read,
    methods=["GET"],
    response_model=models.Page | models.GroupPage,
    responses={
        **ERRORS,
        206: {
            "model": models.Page | models.GroupPage,
            "description": "The feed is being rebuilt after its owner was idle; "
            "ask again after `Retry-After` seconds for the fast path.",
            "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
        },
    },
    tags=["feeds"],
    openapi_extra={"parameters": READ_PARAMETERS, "security": [{"HTTPBearer": []}]},
)
