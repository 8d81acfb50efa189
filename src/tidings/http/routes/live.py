"""Live events: a feed's events over SSE, the firehose over SSE, and many feeds
over one WebSocket.

Each connection is a :class:`tidings.bus.Subscription`; the routes only turn
its events into SSE frames or WebSocket messages, and close it when the
client goes (so the bus forgets it).
"""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from enum import StrEnum
from functools import partial
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header, Query, Request, WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from tidings.bus.subscription import Subscription
from tidings.core.errors import TidingsError, ValidationError
from tidings.core.events import Event, EventType
from tidings.engine import Tidings
from tidings.http import auth
from tidings.http.access import check_readable
from tidings.http.deps import Engine, Flag, Who, feed_id
from tidings.http.metrics import Metrics
from tidings.http.problems import ERRORS, problem
from tidings.http.streams import LiveConnections, closing_of

router = APIRouter(tags=["live"])

SSE_MEDIA_TYPE = "text/event-stream"
_SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {SSE_MEDIA_TYPE: {"schema": {"type": "string"}}},
        "description": "Server-sent events: `event:` the type, `id:` the event id, "
        "`data:` the JSON; a comment line as heartbeat.",
    },
    429: {**ERRORS[400], "description": "Too many live connections of this user"},
}
#: The ``error`` that ends a stream when the server shuts down.
SHUTTING_DOWN = "server shutting down"
#: Events whose id is not a position in a feed: no ``id:`` line, so the
#: browser's Last-Event-ID stays the last real one.
_NO_ID = {EventType.RESYNC, EventType.LIMIT, EventType.ERROR}


def sse_frame(event: Event) -> bytes:
    head = b"" if event.type in _NO_ID else b"id: " + event.id.encode() + b"\n"
    return (
        head + b"event: " + event.type.encode() + b"\ndata: " + orjson.dumps(event.data) + b"\n\n"
    )


#: Events whose data is an activity (or holds activities) ``?enrich=true`` enriches.
_ENRICHED = {
    EventType.ACTIVITY_ADDED,
    EventType.ACTIVITY_UPDATED,
    EventType.AGGREGATE_UPDATED,
}
#: Enriches an event's data (in a thread: a store lookup).
Enrich = Callable[[Event], Awaitable[Event]]
#: Whether an event is not for this connection (may look up rules in a thread).
Hidden = Callable[[Event], Awaitable[bool]]


def enricher(engine: Tidings, fields: str | None) -> Enrich:
    """What ``?enrich=true`` does to events: their activities as reads enrich them."""

    def enrich(event: Event) -> Event:
        data = dict(event.data)
        if "activities" in data:  # an aggregate
            data["activities"] = [dict(a) for a in data["activities"]]
            engine.reads.enrich(data["activities"], fields)
        elif "actor" in data:
            engine.reads.enrich([data], fields)
        return Event(event.feed, event.id, event.type, data)

    async def run(event: Event) -> Event:
        if event.type not in _ENRICHED:
            return event
        return await run_in_threadpool(enrich, event)

    return run


async def _frames(
    subscription: Subscription,
    heartbeat: float,
    expires_at: float,
    now: auth.Now,
    enrich: Enrich | None = None,
    hidden: Hidden | None = None,
) -> AsyncIterator[bytes]:
    try:
        # Sent at once, so clients (and proxies) see the stream is open.
        yield b": connected\n\n"
        while True:
            left = expires_at - now()
            if left <= 0:  # the token the stream was opened with has expired
                yield sse_frame(Event("", "0-0", EventType.ERROR, {"error": "token expired"}))
                return
            event = await subscription.aget(timeout=min(heartbeat, left))
            if event is None:
                if subscription.finished:
                    return
                yield b": heartbeat\n\n"
                continue
            if hidden is not None and await hidden(event):
                continue
            yield sse_frame(event if enrich is None else await enrich(event))
            if event.type == EventType.ERROR:
                return
    finally:
        # Closing may be a Redis round trip: not on the event loop (when one runs).
        try:
            asyncio.get_running_loop().run_in_executor(None, subscription.close)
        except RuntimeError:
            subscription.close()


class _LiveResponse(StreamingResponse):
    """A stream whose ``on_end`` runs however it ends: even a client gone
    before the first byte, whose frames never start, ends it."""

    def __init__(self, frames: AsyncIterator[bytes], on_end: Callable[[], None]) -> None:
        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        super().__init__(frames, media_type=SSE_MEDIA_TYPE, headers=headers)
        self.on_end = on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_end()


async def _stream(
    request: Request,
    engine: Tidings,
    subscription: Subscription,
    who: auth.Principal,
    enrich: Enrich | None = None,
    hidden: Hidden | None = None,
) -> Response:
    live: LiveConnections = request.app.state.live_connections
    if not live.open(who):
        await run_in_threadpool(subscription.close)
        return problem(429, live.refusal(who))
    closing = closing_of(request.scope)
    if closing is not None:  # the server shuts down: a last event, then the end
        closing.on_close(partial(subscription.end, SHUTTING_DOWN))
    heartbeat = engine.settings.sse_heartbeat_seconds
    frames = _frames(
        subscription, heartbeat, who.expires_at, engine.clock.timestamp, enrich, hidden
    )
    metrics: Metrics = request.app.state.metrics
    metrics.opened("sse")

    def ended() -> None:
        live.close(who)
        metrics.closed("sse")

    return _LiveResponse(frames, on_end=ended)


@router.get(
    "/v1/feeds/{group}/{key}/events", response_class=StreamingResponse, responses=_SSE_RESPONSE
)
async def feed_events(
    request: Request,
    group: str,
    key: str,
    who: Who,
    engine: Engine,
    last_event_id_header: Annotated[str | None, Header(alias="last-event-id")] = None,
    last_event_id: Annotated[str | None, Query(max_length=40)] = None,
    enrich: Flag = False,
    fields: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response:
    """A feed's live events. ``Last-Event-ID`` (or ``?last_event_id=``) replays
    every event after it first; one no longer kept gets a ``resync`` event.
    ``enrich`` (and ``fields``) as for reads."""
    feed = feed_id(engine, group, key)
    await check_readable(engine, who, feed)
    after = last_event_id_header or last_event_id
    subscription = await run_in_threadpool(engine.live.subscribe, feed, after)
    enrich_events = enricher(engine, fields) if enrich else None
    return await _stream(request, engine, subscription, who, enrich_events, _closed_to(engine, who))


@router.get("/v1/firehose", response_class=StreamingResponse, responses=_SSE_RESPONSE)
async def firehose(
    request: Request,
    who: Who,
    engine: Engine,
    track: Annotated[str | None, Query()] = None,
    follow: Annotated[str | None, Query()] = None,
    locations: Annotated[str | None, Query()] = None,
    sample: Annotated[str | None, Query()] = None,
) -> Response:
    """Every activity published from now on that passes the filters (ORed; none:
    all). Needs a server token or one with scope ``firehose``; a user token's
    firehose carries only activities published in feeds it may read."""
    if not who.firehose:
        raise auth.Forbidden("the firehose needs a server token or one with scope 'firehose'")
    try:
        subscription = await run_in_threadpool(
            engine.live.firehose, track, follow, locations, sample
        )
    except ValidationError as exc:
        # 400, as Twitter's statuses/filter answers filters beyond its limits.
        return problem(400, exc.detail, field=exc.field)
    return await _stream(request, engine, subscription, who, hidden=_firehose_rules(engine, who))


def _firehose_rules(engine: Tidings, who: auth.Principal) -> Hidden | None:
    """What a user token's firehose leaves out: activities published in a feed
    the token may not read (the feed routes' rule: its own feeds, and those of
    public groups whose owner does not block it), those of actors who block
    it, and those its own mutes, blocks and firehose filters hide (a server
    token's firehose is unfiltered)."""
    if who.server:
        return None

    async def hidden(event: Event) -> bool:
        if event.type not in (EventType.ACTIVITY_ADDED, EventType.DELETE):
            return False
        source = event.data.get("feed")
        if not isinstance(source, str):
            return True  # where it was published is unknown: not shown
        try:
            await check_readable(engine, who, source)
        except (auth.Forbidden, ValidationError):
            return True
        await engine.access.load_rules(who.subject)
        actor = event.data.get("actor")
        if (
            isinstance(actor, str)
            and actor != who.subject
            and await engine.access.blocks_reader_async(actor, who.subject)
        ):
            return True
        return engine.access.hides(who.subject, event.data, "firehose")

    return hidden


def _closed_to(engine: Tidings, who: auth.Principal) -> Hidden | None:
    """Events of feeds whose owner blocks the user token reading them: a
    stream opened on someone's public feed before they blocked the reader
    shows nothing more (a new one is refused, 403)."""
    if who.server:
        return None

    async def hidden(event: Event) -> bool:
        owner = event.feed.partition(":")[2]
        if owner == who.subject:
            return False
        return await engine.access.blocks_reader_async(owner, who.subject)

    return hidden


# -- one WebSocket, many feeds -----------------------------------------------------------------


class Command(StrEnum):
    """The ``type`` of a message a WebSocket client sends."""

    SUBSCRIBE = "subscribe"
    UNSUBSCRIBE = "unsubscribe"


class Reply(StrEnum):
    """The ``type`` of the server's answer to a client's message."""

    SUBSCRIBED = "subscribed"
    UNSUBSCRIBED = "unsubscribed"
    #: The message was refused (``error``: why); the socket stays open.
    ERROR = "error"


@router.websocket("/v1/stream")
async def stream(socket: WebSocket) -> None:
    """Messages ``{"type": "subscribe", "feed": "timeline:alice", "last_event_id": …,
    "enrich": true, "fields": …}``,
    ``unsubscribe``, and (with the right token) ``{"type": "subscribe", "firehose":
    {"track": …}}``; every event comes as ``{"type", "feed", "id", "data"}``."""
    engine: Tidings = socket.app.state.engine
    tokens: auth.TokenCache = socket.app.state.tokens
    offered = [p.strip() for p in socket.headers.get("sec-websocket-protocol", "").split(",")]
    authorization = socket.headers.get("authorization")
    protocol = None
    if authorization is None and offered and offered[-1]:
        # Browsers cannot set headers on a WebSocket: the token comes as a subprotocol.
        authorization, protocol = f"Bearer {offered[-1]}", offered[-1]
    try:
        who = tokens.verify(authorization)
    except auth.Unauthenticated as exc:
        await _refuse(socket, str(exc))
        return
    live: LiveConnections = socket.app.state.live_connections
    if not live.open(who):
        await socket.send_denial_response(problem(429, live.refusal(who)))
        return
    metrics: Metrics = socket.app.state.metrics
    metrics.opened("websocket")
    try:
        await _session(socket, engine, who, protocol)
    finally:
        live.close(who)
        metrics.closed("websocket")


async def _session(
    socket: WebSocket, engine: Tidings, who: auth.Principal, protocol: str | None
) -> None:
    """One WebSocket's subscriptions, from its handshake to its end."""
    await socket.accept(subprotocol=protocol)
    subscription = engine.live.stream()
    firehoses: list[Subscription] = []
    #: The feeds subscribed, each with how its events are enriched (None: not).
    feeds: dict[str, Enrich | None] = {}
    pump = asyncio.create_task(_pump(socket, subscription, feeds, _closed_to(engine, who)))
    expiry = asyncio.create_task(_expire(socket, who.expires_at, engine))
    try:
        while True:
            message = await socket.receive_text()
            reply = await _command(engine, who, subscription, firehoses, socket, message, feeds)
            if reply is not None:
                await socket.send_bytes(orjson.dumps(reply))
    except WebSocketDisconnect:
        pass
    finally:
        pump.cancel()
        expiry.cancel()
        for done in (subscription, *firehoses):
            await run_in_threadpool(done.close)


async def _refuse(socket: WebSocket, detail: str) -> None:
    """No usable token: a 401 problem at the handshake, as SSE answers (closing
    before accepting would make the server answer 403). A server without the
    ASGI denial-response extension gets the socket accepted, then closed 4401,
    as when a token expires mid-stream."""
    if "websocket.http.response" in socket.scope.get("extensions", {}):
        await socket.send_denial_response(problem(401, detail, **{"WWW-Authenticate": "Bearer"}))
        return
    await socket.accept()
    await socket.close(code=4401, reason=detail[:120])


async def _expire(socket: WebSocket, expires_at: float, engine: Tidings) -> None:
    """Close the socket when the token it was opened with expires by the
    engine's clock (looked at again every heartbeat, as a stream does)."""
    if expires_at == float("inf"):
        return
    heartbeat = engine.settings.sse_heartbeat_seconds
    while (left := expires_at - engine.clock.timestamp()) > 0:
        await asyncio.sleep(min(left, heartbeat))
    error = Event("", "0-0", EventType.ERROR, {"error": "token expired"})
    await socket.send_bytes(error.to_json())
    await socket.close(code=4401, reason="token expired")


async def _pump(
    socket: WebSocket,
    subscription: Subscription,
    feeds: dict[str, Enrich | None],
    hidden: Hidden | None = None,
) -> None:
    async for event in subscription:
        if hidden is not None and await hidden(event):
            continue
        enrich = feeds.get(event.feed)
        await socket.send_bytes((event if enrich is None else await enrich(event)).to_json())
        if event.type == EventType.ERROR:
            await socket.close(code=1013, reason="slow consumer")
            return


async def _command(
    engine: Tidings,
    who: auth.Principal,
    subscription: Subscription,
    firehoses: list[Subscription],
    socket: WebSocket,
    message: str,
    feeds: dict[str, Enrich | None],
) -> dict[str, Any] | None:
    try:
        body = orjson.loads(message)
        if not isinstance(body, dict):
            raise ValidationError("a message is a JSON object")
        kind = body.get("type")
        if kind not in (Command.SUBSCRIBE, Command.UNSUBSCRIBE):
            raise ValidationError(f"type must be {' or '.join(Command)}, not {kind!r}")
        if "firehose" in body and kind == Command.SUBSCRIBE:
            return await _open_firehose(engine, who, body["firehose"], firehoses, socket)
        feed = body.get("feed")
        if not isinstance(feed, str):
            raise ValidationError("feed must be a feed id such as timeline:alice")
        engine.check_feed(feed)
        if kind == Command.UNSUBSCRIBE:
            await run_in_threadpool(subscription.remove, feed)
            feeds.pop(feed, None)
            return {"type": Reply.UNSUBSCRIBED, "feed": feed}
        await check_readable(engine, who, feed)
        enrich = body.get("enrich", False)
        if not isinstance(enrich, bool):
            raise ValidationError("enrich must be true or false")
        fields = body.get("fields")
        if fields is not None and not isinstance(fields, str):
            raise ValidationError("fields must be a string of comma-separated keys")
        if enrich:
            engine.reads.enrich([], fields)  # checked now, not at the first event
        enrich_events = enricher(engine, fields) if enrich else None
        last_event_id, most = body.get("last_event_id"), engine.settings.websocket_max_feeds
        await _add_feed(subscription, feeds, feed, last_event_id, enrich_events, most)
        return {"type": Reply.SUBSCRIBED, "feed": feed}
    except orjson.JSONDecodeError:
        return {"type": Reply.ERROR, "error": "not JSON"}
    except (TidingsError, auth.Forbidden) as exc:
        return {"type": Reply.ERROR, "error": str(exc)}


async def _add_feed(
    subscription: Subscription,
    feeds: dict[str, Enrich | None],
    feed: str,
    last_event_id: Any,
    enrich: Enrich | None,
    most: int,
) -> None:
    """Subscribe to ``feed`` (again: its enrichment may change), within the socket's limit."""
    known = feed in feeds
    if not known and len(feeds) >= most:
        raise ValidationError(
            f"a WebSocket may be subscribed to at most {most} feeds (websocket_max_feeds): "
            "unsubscribe from one first"
        )
    before = feeds.get(feed)
    feeds[feed] = enrich  # before the replay is read: its events are enriched too
    try:
        await run_in_threadpool(subscription.add, feed, last_event_id)
    except BaseException:
        if known:
            feeds[feed] = before
        else:
            del feeds[feed]
        raise


async def _open_firehose(
    engine: Tidings,
    who: auth.Principal,
    filters: Any,
    firehoses: list[Subscription],
    socket: WebSocket,
) -> dict[str, Any]:
    if not who.firehose:
        raise auth.Forbidden("the firehose needs a server token or one with scope 'firehose'")
    most = engine.settings.websocket_max_firehoses
    if len(firehoses) >= most:
        raise ValidationError(
            f"a WebSocket may have at most {most} firehose(s) open (websocket_max_firehoses)"
        )
    if not isinstance(filters, dict):
        raise ValidationError("firehose must be an object of filters")
    given = {name: filters.get(name) for name in ("track", "follow", "locations", "sample")}
    for name, value in given.items():
        if isinstance(value, list):  # ["a b", "c"] is "a b,c"
            given[name] = ",".join(str(v) for v in value)
    # Filter.parse refuses the rest that is not text (or, for sample, a number).
    hose = await run_in_threadpool(engine.live.firehose, **given)
    firehoses.append(hose)
    pump = _pump(socket, hose, {}, _firehose_rules(engine, who))
    asyncio.get_running_loop().create_task(pump)
    return {"type": Reply.SUBSCRIBED, "feed": "$firehose"}


__all__ = ["router", "sse_frame"]
