"""The REST API: an ASGI app over the engine facade.

Nothing here touches a store: every route calls :class:`tidings.Tidings`.
Responses are serialised with orjson into a ``Response`` directly, which
skips FastAPI's ``jsonable_encoder`` (~100x slower for a page of 25); the
``response_model`` of each route still documents the shape in OpenAPI.
"""

# No `from __future__ import annotations`: FastAPI reads these annotations at
# runtime to build dependencies and the schema.
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import parse_qsl

import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import BeforeValidator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import request_response

from tidings.canonical.store import Follow
from tidings.core.activity import validate
from tidings.core.errors import ConfigurationError, ValidationError
from tidings.core.feeds import parse_feed_id
from tidings.core.limits import MAX_BATCH_TO, MAX_BODY_BYTES, MAX_PAGE_SIZE
from tidings.engine import Tidings
from tidings.http import auth, models
from tidings.http.metrics import Metrics
from tidings.http.problems import ERRORS, HANDLERS, MEDIA_TYPE, problem
from tidings.settings import Settings

MIN_SECRET_LENGTH = 32
#: Seconds a client reading a feed being rebuilt is told to wait: a rebuild
#: writes at most ``max_length`` entries, well under a second unless the
#: runners are behind.
REGENERATION_RETRY_AFTER = 2

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _json(body: Any, status: int = 200) -> Response:
    return Response(
        orjson.dumps(body, option=orjson.OPT_UTC_Z), status, media_type="application/json"
    )


def _regenerating(response: Response) -> Response:
    """206 for a page of a feed being rebuilt after its owner was idle (as
    Mastodon answers): a flat feed's page is complete, served from the
    canonical store; a grouped one's may miss groups until the rebuild ends."""
    response.status_code = 206
    response.headers["Retry-After"] = str(REGENERATION_RETRY_AFTER)
    return response


def _follow(row: Follow) -> dict[str, Any]:
    created = datetime.fromtimestamp(row.created_ms / 1000, UTC)
    return {"follower": row.follower, "source": row.source, "created_at": created}


class _Guard:
    """ASGI middleware: body size limit (413) and request metrics."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            response = problem(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
            await response(scope, receive, sending)
        else:
            received = 0

            async def receiving() -> Message:
                nonlocal received
                message = await receive()
                received += len(message.get("body", b""))
                if received > MAX_BODY_BYTES:
                    raise _BodyTooLarge()
                return message

            try:
                await self.app(scope, receiving, sending)
            except _BodyTooLarge:
                response = problem(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
                await response(scope, receive, sending)
        route = scope.get("route")
        template = getattr(route, "path", "unmatched")
        self.metrics.observe(scope["method"], template, status, time.perf_counter() - started)


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
        "name": "mark_seen",
        "in": "query",
        "required": False,
        "description": "notification feeds: mark the returned groups seen",
        "schema": {"type": "boolean", "default": False},
    },
]


# Query values are text; these are the only spellings read as values. Python's
# int() (and pydantic's lax mode) would also read "1_0", " 5", "+5" and other
# scripts' digits ("\u0665" is 5), and pydantic's bool "yes", "on" and "t".
_BOOLS = {"true": True, "1": True, "false": False, "0": False}
_INTEGER = re.compile(r"-?[0-9]{1,18}")


def _bool_param(raw: str | None, name: str) -> bool:
    if raw is None:
        return False
    try:
        return _BOOLS[raw]
    except KeyError:
        raise ValidationError(
            f"must be true or false (or 1 or 0), got {raw[:32]!r}", field=name
        ) from None


def _int_param(raw: str | None, name: str, *, default: int) -> int:
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):
        raise ValidationError(f"must be an integer in ASCII digits, got {raw[:32]!r}", field=name)
    return int(raw)


def _query(parse: Callable[[str], Any]) -> BeforeValidator:
    """A query parameter FastAPI declares, read by the same rule as those read by
    hand; pydantic reports the ValueError as the parameter's (so no name is given)."""
    return BeforeValidator(lambda raw: parse(raw) if isinstance(raw, str) else raw)


class _StarletteRoute(APIRoute):
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


class _BodyTooLarge(HTTPException):
    """Raised from ``receive``: an HTTPException, so FastAPI passes it on instead of
    turning it into 400 "error parsing the body"; the problem handler answers 413."""

    def __init__(self) -> None:
        super().__init__(413, f"request body is larger than {MAX_BODY_BYTES} bytes")


_bearer = HTTPBearer(auto_error=False, description="a tidings JWT (`tidings token`)")


async def _principal(request: Request, _: Annotated[Any, Depends(_bearer)]) -> auth.Principal:
    # The HTTPBearer dependency documents the scheme in OpenAPI; the header is
    # checked by auth.verify so every failure gets the same problem shape.
    # async: checking a token is a few microseconds of CPU (less with the
    # cache), far cheaper than the thread-pool hop a sync dependency costs.
    tokens: auth.TokenCache = request.app.state.tokens
    return tokens.verify(request.headers.get("authorization"))


Who = Annotated[auth.Principal, Depends(_principal)]
Limit = Annotated[
    int, _query(lambda raw: _int_param(raw, "", default=0)), Query(ge=1, le=MAX_PAGE_SIZE)
]
Flag = Annotated[bool, _query(lambda raw: _bool_param(raw, ""))]
Cursor = Annotated[str | None, Query(max_length=1024)]


def create_app(engine: "Tidings | None" = None, *, settings: "Settings | None" = None) -> FastAPI:
    """The API over ``engine``, or over an engine built from ``settings`` for the app's life.

    The settings' ``secret`` signs and checks tokens; there is no default.
    """
    settings = engine.settings if engine is not None else (settings or Settings.load())
    secret = settings.secret
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        raise ConfigurationError(
            f"the HTTP service needs TIDINGS_SECRET of at least {MIN_SECRET_LENGTH} characters "
            "(HS256 keys shorter than the hash are brute-forceable)"
        )
    metrics = Metrics()
    holder: dict[str, Tidings] = {}
    if engine is not None:
        holder["engine"] = engine

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        owned = "engine" not in holder
        if owned:
            holder["engine"] = await run_in_threadpool(Tidings, settings)
        try:
            yield
        finally:
            if owned:
                await run_in_threadpool(holder.pop("engine").close)

    app = FastAPI(
        title="tidings",
        version="1",
        summary="Activity feeds: publish, follow, read.",
        lifespan=lifespan,
        responses=ERRORS,
    )
    for exc_type, handler in HANDLERS.items():
        app.add_exception_handler(exc_type, handler)
    app.add_middleware(_Guard, metrics=metrics)

    app.state.tokens = auth.TokenCache(secret)

    def openapi() -> dict[str, Any]:
        # FastAPI documents a response model under the route's media type
        # (application/json); problems are sent as application/problem+json.
        cached = app.openapi_schema
        if cached is None:
            cached = FastAPI.openapi(app)  # builds and caches app.openapi_schema
            for item in cached["paths"].values():
                for operation in item.values():
                    for response in operation.get("responses", {}).values():
                        content = response.get("content", {})
                        if MEDIA_TYPE in content and "application/json" in content:
                            content[MEDIA_TYPE] = content.pop("application/json")
        return cached

    app.openapi = openapi  # type: ignore[method-assign]

    def feeds() -> Tidings:
        return holder["engine"]

    def feed_id(group: str, key: str) -> str:
        feed = f"{group}:{key}"
        parse_feed_id(feed, feeds().groups)
        return feed

    # -- reading (first: see below) ----------------------------------------

    tokens: auth.TokenCache = app.state.tokens

    async def read(request: Request) -> Response:
        """A page of the feed, newest first; pass `next` back as `cursor`."""
        # The route nearly all traffic takes, so it is lean (see _StarletteRoute):
        # it takes the bare request, parses its four inputs itself (described in
        # READ_PARAMETERS for the schema) and checks the feed id once for both
        # the route and the read check. async, so the read runs on the event
        # loop without a thread-pool hop; on Redis its round trip is awaited,
        # so the worker parses other requests meanwhile.
        who = tokens.verify(request.headers.get("authorization"))
        params = request.path_params
        engine = feeds()
        feed = f"{params['group']}:{params['key']}"
        parsed = parse_feed_id(feed, engine.groups)
        auth.check_read(who, feed, engine.groups, parsed=parsed)
        # Starlette's query_params would build a multidict (and two copies of
        # it) for the two values read here; a dict of parse_qsl's pairs gives
        # the same answers (last value wins).
        query_string = request.scope["query_string"]
        query = dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
        limit = _int_param(query.get("limit"), "limit", default=25)
        if engine.groups[parsed.group].grouped:
            # Blocking store calls (and a write transaction with mark_seen): in
            # a thread, so the worker's other requests are not held up.
            return await run_in_threadpool(read_groups, who, engine, feed, limit, query)
        if "mark_seen" in query:
            _bool_param(query["mark_seen"], "mark_seen")
            raise ValidationError(
                f"{feed} is a flat feed: only notification feeds have seen state", field="mark_seen"
            )
        page = await engine.read_json_async(feed, limit=limit, cursor=query.get("cursor"))
        # The stored JSON of each activity is already the response's shape.
        body = b'{"results":[' + b",".join(page.results) + b'],"next":'
        body += orjson.dumps(page.next) + b"}"
        if page.regenerating:
            return _regenerating(Response(body, media_type="application/json"))
        return Response(body, media_type="application/json")

    def read_groups(
        who: auth.Principal, engine: Tidings, feed: str, limit: int, query: dict[str, str]
    ) -> Response:
        mark = _bool_param(query.get("mark_seen"), "mark_seen")
        if mark:
            auth.check_owner(who, feed, "mark groups seen in")
        page = engine.read_groups(feed, limit=limit, cursor=query.get("cursor"), mark_seen=mark)
        body: dict[str, Any] = {"results": [g.to_dict() for g in page.results], "next": page.next}
        if page.unseen is not None:
            body["unseen"], body["unread"] = page.unseen, page.unread
        if page.regenerating:
            return _regenerating(_json(body))
        return _json(body)

    # The router tries routes in order, and this is the route nearly all
    # traffic takes: it goes first, also before the docs routes FastAPI adds
    # on creation (no other route has its shape, so no match changes).
    app.router.add_api_route(
        "/v1/feeds/{group}/{key}",
        read,
        methods=["GET"],
        response_model=models.Page | models.GroupPage,
        responses={
            206: {
                "model": models.Page | models.GroupPage,
                "description": "The feed is being rebuilt after its owner was idle; "
                "ask again after `Retry-After` seconds for the fast path.",
                "headers": {
                    "Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}
                },
            }
        },
        tags=["feeds"],
        openapi_extra={"parameters": READ_PARAMETERS, "security": [{"HTTPBearer": []}]},
        route_class_override=_StarletteRoute,
    )
    app.router.routes.insert(0, app.router.routes.pop())

    # -- notification state -------------------------------------------------------

    def mark(group: str, key: str, body: models.MarkIn, who: Who, *, read: bool) -> Response:
        feed = feed_id(group, key)
        auth.check_owner(who, feed, f"mark groups {'read' if read else 'seen'} in")
        engine = feeds()
        marker = engine.mark_read if read else engine.mark_seen
        marker(feed, None if body.all else body.groups)
        unseen, unread = engine.notification_counts(feed)
        return _json({"unseen": unseen, "unread": unread})

    @app.post("/v1/feeds/{group}/{key}/seen", response_model=models.CountsOut, tags=["feeds"])
    def mark_seen(group: str, key: str, body: models.MarkIn, who: Who) -> Response:
        """Mark groups of a notification feed seen; returns the feed's counts after."""
        return mark(group, key, body, who, read=False)

    @app.post("/v1/feeds/{group}/{key}/read", response_model=models.CountsOut, tags=["feeds"])
    def mark_read(group: str, key: str, body: models.MarkIn, who: Who) -> Response:
        """Mark groups of a notification feed read (and so seen); returns the counts after."""
        return mark(group, key, body, who, read=True)

    # -- activities -----------------------------------------------------------

    @app.post(
        "/v1/feeds/{group}/{key}/activities",
        status_code=201,
        response_model=models.ActivityOut,
        responses={200: {"model": models.ActivityOut, "description": "foreign_id already used"}},
        tags=["activities"],
    )
    def add_activity(group: str, key: str, body: models.ActivityIn, who: Who) -> Response:
        """Publish an activity to a feed; 200 with the stored one when `foreign_id` repeats."""
        feed = feed_id(group, key)
        auth.check_publish(who, feed, body.actor)
        auth.check_to(who, body.to, feeds().groups)
        stored, created = feeds().publish(feed, body.model_dump())
        return _json(stored.to_dict(), 201 if created else 200)

    @app.post(
        "/v1/feeds/{group}/{key}/activities:batch",
        response_model=models.BatchOut,
        tags=["activities"],
    )
    def add_batch(group: str, key: str, body: models.BatchIn, who: Who) -> Response:
        """Publish up to 100 activities, with up to 1,000 `to` feeds in all; all are
        validated before any is written."""
        feed = feed_id(group, key)
        engine = feeds()
        addressed = sum(len(item.to) for item in body.activities)
        if addressed > MAX_BATCH_TO:
            raise ValidationError(
                f"{addressed:,} feeds named in to in all; the limit is {MAX_BATCH_TO:,} per batch",
                field="activities",
            )
        for item in body.activities:
            auth.check_publish(who, feed, item.actor)
            auth.check_to(who, item.to, engine.groups)
        data = [a.model_dump() for a in body.activities]
        for i, raw in enumerate(data):
            try:
                validate(raw, now=engine.clock(), check_feed=engine.check_feed)
            except ValidationError as exc:
                raise ValidationError(exc.detail, field=f"activities.{i}.{exc.field}") from None
        results = []
        for raw in data:
            stored, created = engine.publish(feed, raw)
            results.append({"created": created, "activity": stored.to_dict()})
        return _json({"results": results})

    @app.get(
        "/v1/feeds/{group}/{key}/activities",
        response_model=models.ActivityOut,
        tags=["activities"],
    )
    def get_by_foreign_id(
        group: str, key: str, who: Who, foreign_id: Annotated[str, Query(max_length=255)]
    ) -> Response:
        """The activity with `foreign_id` in this feed."""
        feed = feed_id(group, key)
        auth.check_read(who, feed, feeds().groups)
        return _json(feeds().get_activity((feed, foreign_id)).to_dict())

    @app.get("/v1/activities/{activity_id}", response_model=models.ActivityOut, tags=["activities"])
    def get_activity(activity_id: str, who: Who) -> Response:
        """One activity by id (user tokens: their own activities)."""
        activity = feeds().get_activity(activity_id)
        if not who.server and activity.actor != who.subject:
            raise auth.Forbidden(f"a token for {who.subject!r} may not read this activity")
        return _json(activity.to_dict())

    @app.patch(
        "/v1/activities/{activity_id}", response_model=models.ActivityOut, tags=["activities"]
    )
    def update_activity(activity_id: str, body: models.UpdateIn, who: Who) -> Response:
        """Set and unset keys of `extra`; visible at once in every feed holding it."""
        current = feeds().get_activity(activity_id)
        if not who.server and current.actor != who.subject:
            raise auth.Forbidden(f"a token for {who.subject!r} may not change this activity")
        updated = feeds().update_activity(activity_id, set=body.set, unset=body.unset)
        return _json(updated.to_dict())

    @app.delete(
        "/v1/feeds/{group}/{key}/activities/{activity_id}", status_code=204, tags=["activities"]
    )
    def remove_activity(group: str, key: str, activity_id: str, who: Who) -> Response:
        """Remove an activity added to this feed from every feed it reached; one that
        only reached this feed through `to`, from this feed alone."""
        feed = feed_id(group, key)
        auth.check_owner(who, feed, "remove from")
        feeds().remove_activity(feed, activity_id)
        return Response(status_code=204)

    @app.delete("/v1/feeds/{group}/{key}/activities", status_code=204, tags=["activities"])
    def remove_by_foreign_id(
        group: str,
        key: str,
        who: Who,
        foreign_id: Annotated[str, Query(min_length=1, max_length=255)],
    ) -> Response:
        """Remove the activity with `foreign_id` from this feed and every feed it reached."""
        feed = feed_id(group, key)
        auth.check_owner(who, feed, "remove from")
        feeds().remove_activity(feed, foreign_id=foreign_id)
        return Response(status_code=204)

    # -- follows ------------------------------------------------------------

    @app.post(
        "/v1/feeds/{group}/{key}/follows",
        status_code=201,
        response_model=models.FollowOut,
        responses={200: {"model": models.FollowOut, "description": "already following"}},
        tags=["follows"],
    )
    def follow(group: str, key: str, body: models.FollowIn, who: Who) -> Response:
        """This feed follows `source`, copying its newest `copy_limit` activities."""
        follower = feed_id(group, key)
        auth.check_follow(who, follower, body.source, feeds().groups)
        created = feeds().follow(follower, body.source, copy_limit=body.copy_limit)
        body_out = {"follower": follower, "source": body.source, "created": created}
        return _json(body_out, 201 if created else 200)

    @app.delete("/v1/feeds/{group}/{key}/follows/{source}", status_code=204, tags=["follows"])
    def unfollow(
        group: str, key: str, source: str, who: Who, keep_history: Flag = False
    ) -> Response:
        """Stop following `source`; unless `keep_history`, drop what came through it."""
        follower = feed_id(group, key)
        auth.check_owner(who, follower, "unfollow from")
        feeds().unfollow(follower, source, keep_history=keep_history)
        return Response(status_code=204)

    @app.post("/v1/follows:batch", response_model=models.FollowBatchOut, tags=["follows"])
    def follow_batch(body: models.FollowBatchIn, who: Who) -> Response:
        """Up to 1,000 follows in one transaction."""
        for pair in body.follows:
            auth.check_follow(who, pair.follower, pair.source, feeds().groups)
        pairs = [(p.follower, p.source) for p in body.follows]
        created = feeds().follow_many(pairs, copy_limit=body.copy_limit)
        return _json({"created": [{"follower": f, "source": s} for f, s in created]})

    def follow_page(
        kind: str, group: str, key: str, who: auth.Principal, limit: int, cursor: str | None
    ) -> Response:
        feed = feed_id(group, key)
        auth.check_read(who, feed, feeds().groups)
        lookup = feeds().followers if kind == "followers" else feeds().following
        page = lookup(feed, cursor=cursor, limit=limit)
        return _json({"results": [_follow(r) for r in page.results], "next": page.next})

    @app.get(
        "/v1/feeds/{group}/{key}/followers", response_model=models.FollowPage, tags=["follows"]
    )
    def followers(
        group: str, key: str, who: Who, limit: Limit = 25, cursor: Cursor = None
    ) -> Response:
        """Feeds following this one, in follower order."""
        return follow_page("followers", group, key, who, limit, cursor)

    @app.get(
        "/v1/feeds/{group}/{key}/following", response_model=models.FollowPage, tags=["follows"]
    )
    def following(
        group: str, key: str, who: Who, limit: Limit = 25, cursor: Cursor = None
    ) -> Response:
        """Feeds this one follows, in source order."""
        return follow_page("following", group, key, who, limit, cursor)

    # -- operations -----------------------------------------------------------

    @app.get("/healthz", response_model=models.Health, tags=["operations"])
    def healthz() -> Response:
        """Both stores answer: 200, else 503."""
        try:
            pending = feeds().health()
        except Exception as exc:
            return problem(503, f"a store does not answer: {type(exc).__name__}: {exc}")
        return _json({"status": "ok", "pending_deliveries": pending})

    @app.get(
        "/metrics",
        tags=["operations"],
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text"}},
    )
    def prometheus() -> Response:
        """Prometheus metrics: requests, latencies, deliveries done and pending, outbox lag."""
        engine = feeds()
        pending, oldest = engine.canonical.outbox_stats()
        lag = 0.0 if oldest is None else max(0.0, (engine.now_ms() - oldest) / 1000)
        text = metrics.render(
            delivered=engine.deliverer.completed, pending=pending, lag_seconds=lag
        )
        return Response(text, media_type="text/plain; version=0.0.4")

    @app.get("/v1/ping", include_in_schema=False)
    async def ping() -> Response:
        """A trivial JSON endpoint: the ceiling the benchmark compares feed reads with."""
        return _json({"pong": True})

    return app
