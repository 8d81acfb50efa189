"""Stream's realtime endpoint: Bayeux, the protocol of Faye, which Stream's JS
client speaks (``feed.subscribe(callback)``), over tidings' live events.

A client shakes hands (``/meta/handshake``) and gets a client id, then keeps
one ``/meta/connect`` waiting at a time: it is answered when events come (or
after :data:`POLL_SECONDS`), carrying them. ``/meta/subscribe`` names a
feed's channel and carries, in ``ext``, the ``api_key`` and the feed's token
(``signature``), checked as a REST call's; each client holds one
subscription of the bus (:meth:`tidings.services.live.LiveService.stream`)
to which its feeds are added.

Transports: ``websocket`` (the one Faye clients pick first: each text frame
a JSON array of messages, each answered on the socket as soon as its replies
are ready, so a connect waiting for events holds up no subscribe),
``long-polling`` (a JSON POST), ``cross-origin-long-polling`` (a POST of
``message=<json>`` from another origin, answered with CORS headers; no
cookie is read, the tokens are in the messages) and ``callback-polling``
(JSONP, a GET). A client that cannot open the socket falls back to
long-polling.

Clients are kept in the memory of the process that shook hands with them:
behind several processes, a client's requests must reach the same one
(sticky sessions); one reaching another is told to shake hands again, and
its client does, subscribing again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tidings.bus.subscription import Subscription
from tidings.core.events import Event, EventType
from tidings.engine import Tidings
from tidings.http import auth
from tidings.http.getstream import realtime
from tidings.http.getstream.auth import GrantCache
from tidings.http.getstream.errors import StreamError, translate
from tidings.http.streams import closing_of

#: How long a ``/meta/connect`` waits for events before it is answered empty.
POLL_SECONDS = 25.0
#: A client not heard from for this long (no connect waiting) is forgotten.
IDLE_SECONDS = 2 * POLL_SECONDS + 30
MAX_BODY = 64 * 1024
MAX_MESSAGES = 50
#: Clients one process keeps: each holds a subscription of the bus.
MAX_CLIENTS = 10_000
#: Events one answer to ``/meta/connect`` carries; the rest wait for the next.
EVENTS_PER_POLL = 100
CONNECTION_TYPES = ["websocket", "long-polling", "cross-origin-long-polling", "callback-polling"]
_JSONP = re.compile(r"[A-Za-z_$][\w$.]{0,63}")


class BayeuxError(Exception):
    """A message refused: ``code`` as Bayeux numbers errors (400, 401, 403, 405)."""

    def __init__(self, code: int, args: str, detail: str) -> None:
        super().__init__(detail)
        self.error = f"{code}:{args}:{detail}"
        self.handshake = code == 401  # an unknown client: shake hands again


@dataclass(eq=False)
class _Client:
    id: str
    live: Subscription
    seen: float
    #: Each channel subscribed: the app id it names and its feed.
    channels: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Set to answer the connect waiting now (another came, or the client left).
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: bool = False


class Clients:
    """The Bayeux clients of one process."""

    def __init__(self, engine: Tidings) -> None:
        self.engine = engine
        self._clients: dict[str, _Client] = {}

    def get(self, client_id: object) -> _Client:
        client = self._clients.get(client_id) if isinstance(client_id, str) else None
        if client is None:
            raise BayeuxError(401, str(client_id)[:64], "unknown client: shake hands again")
        client.seen = self.engine.clock.monotonic()
        return client

    async def open(self) -> _Client:
        await self._sweep()
        if len(self._clients) >= MAX_CLIENTS:
            raise BayeuxError(
                503, "", f"this process has {MAX_CLIENTS:,} realtime clients, its limit"
            )
        live = await run_in_threadpool(self.engine.live.stream)
        client = _Client(secrets.token_hex(16), live, self.engine.clock.monotonic())
        self._clients[client.id] = client
        return client

    async def close(self, client: _Client) -> None:
        self._clients.pop(client.id, None)
        client.wake.set()
        await run_in_threadpool(client.live.close)

    async def _sweep(self) -> None:
        """Forget the clients gone quiet (a closed tab sends no disconnect)."""
        now = self.engine.clock.monotonic()
        for client in list(self._clients.values()):
            if not client.waiting and now - client.seen > IDLE_SECONDS:
                await self.close(client)


async def bayeux(request: Request) -> Response:
    """Messages in, replies out, in whichever transport the client chose."""
    headers = _cors(request)
    if request.method == "OPTIONS":
        return Response(status_code=204, headers=headers)
    callback = request.query_params.get("jsonp")
    try:
        messages = await _messages(request)
    except BayeuxError as exc:
        reply = [{"channel": "/meta/unknown", "successful": False, "error": exc.error}]
        return Response(orjson.dumps(reply), 400, headers, "application/json")
    replies = await _process(request, messages)
    body = orjson.dumps(replies)
    if callback is not None and request.method == "GET":
        if not _JSONP.fullmatch(callback):
            return Response(b"jsonp: not a callback name", 400, headers, "text/plain")
        script = b"/**/" + callback.encode() + b"(" + body + b");"
        return Response(script, 200, headers, "text/javascript")
    return Response(body, 200, headers, "application/json")


async def bayeux_socket(websocket: WebSocket) -> None:
    """The ``websocket`` transport: each frame's messages are processed as
    they come, concurrently (a connect waits for events while a subscribe
    sent after it is answered), each batch's replies sent when ready."""
    await websocket.accept()
    sending = asyncio.Lock()
    running: set[asyncio.Task[None]] = set()

    async def send(replies: list[dict[str, Any]]) -> None:
        async with sending:  # (one frame at a time on the socket)
            await websocket.send_text(orjson.dumps(replies).decode())

    async def answer(messages: list[dict[str, Any]]) -> None:
        replies = await _process(websocket, messages)
        # (Starlette's RuntimeError: the socket closed while they were made)
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            await send(replies)

    try:
        while True:
            frame = await websocket.receive()
            if frame["type"] == "websocket.disconnect":
                break
            raw = frame.get("bytes") or (frame.get("text") or "").encode()
            if raw.strip() == b"[]":
                continue  # (a ping some clients send: nothing to answer)
            try:
                messages = _parsed(raw)
            except BayeuxError as exc:
                await send([{"channel": "/meta/unknown", "successful": False, "error": exc.error}])
                continue
            task = asyncio.ensure_future(answer(messages))
            running.add(task)
            task.add_done_callback(running.discard)
    except WebSocketDisconnect:
        pass
    finally:
        for task in list(running):
            task.cancel()


def _cors(request: Request) -> dict[str, str]:
    origin = request.headers.get("origin")
    if origin is None:
        return {"cache-control": "no-cache"}
    return {
        "cache-control": "no-cache",
        "access-control-allow-origin": origin,
        "access-control-allow-credentials": "true",
        "access-control-allow-methods": "GET, POST, OPTIONS",
        "access-control-allow-headers": "Content-Type, Pragma, X-Requested-With",
        "vary": "Origin",
    }


async def _messages(request: Request) -> list[dict[str, Any]]:
    """The messages a request carries: a JSON body, a form's or the query's ``message``."""
    if request.method == "GET":
        raw = request.query_params.get("message", "").encode()
    else:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise BayeuxError(400, "", f"the body is over {MAX_BODY:,} bytes")
        if raw.startswith(b"message="):
            raw = parse_qs(raw.decode(errors="replace")).get("message", [""])[0].encode()
    return _parsed(raw)


def _parsed(raw: bytes) -> list[dict[str, Any]]:
    """The messages of a body, a form's value or a frame: a JSON array (or one object)."""
    if len(raw) > MAX_BODY:
        raise BayeuxError(400, "", f"the messages are over {MAX_BODY:,} bytes")
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BayeuxError(400, "", "the messages are not JSON") from None
    batch = parsed if isinstance(parsed, list) else [parsed]
    if not batch or len(batch) > MAX_MESSAGES:
        raise BayeuxError(400, "", f"send 1 to {MAX_MESSAGES} messages at a time")
    if not all(isinstance(m, dict) for m in batch):
        raise BayeuxError(400, "", "each message is a JSON object")
    return batch


def _clients(request: HTTPConnection) -> Clients:
    state = request.app.state
    clients: Clients | None = getattr(state, "bayeux_clients", None)
    if clients is None:
        engine: Tidings | None = getattr(state.parent.state, "engine", None)
        if engine is None:
            raise RuntimeError("the Stream protocol is served before the engine started")
        clients = state.bayeux_clients = Clients(engine)
    return clients


async def _process(request: HTTPConnection, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message's reply; a connect's last, and waiting only when it came alone."""
    clients = _clients(request)
    replies: list[dict[str, Any]] = []
    connects = [m for m in messages if m.get("channel") == "/meta/connect"]
    for message in [m for m in messages if m.get("channel") != "/meta/connect"]:
        replies.extend(await _reply(request, clients, message, wait=False))
    for i, message in enumerate(connects):
        wait = len(messages) == 1 and i == 0
        replies.extend(await _reply(request, clients, message, wait=wait))
    return replies


async def _reply(
    request: HTTPConnection, clients: Clients, message: dict[str, Any], wait: bool
) -> list[dict[str, Any]]:
    channel = message.get("channel")
    reply: dict[str, Any] = {"channel": channel, "successful": True}
    if "id" in message:
        reply["id"] = message["id"]
    out = [reply]
    try:
        if channel == "/meta/handshake":
            reply.update(_handshake(message), clientId=(await clients.open()).id)
        elif channel == "/meta/connect":
            client = clients.get(message.get("clientId"))
            reply["clientId"] = client.id
            reply["advice"] = {"reconnect": "retry", "interval": 0, "timeout": _ms(POLL_SECONDS)}
            out.extend(await _connect(request, clients, client, wait))
        elif channel in ("/meta/subscribe", "/meta/unsubscribe"):
            client = clients.get(message.get("clientId"))
            reply.update(clientId=client.id, subscription=message.get("subscription"))
            if channel == "/meta/subscribe":
                await _subscribe(request, clients.engine, client, message)
            else:
                await _unsubscribe(client, message.get("subscription"))
        elif channel == "/meta/disconnect":
            client = clients.get(message.get("clientId"))
            reply["clientId"] = client.id
            await clients.close(client)
        else:
            raise BayeuxError(403, str(channel)[:80], "only the /meta channels are served here")
    except BayeuxError as exc:
        reply.update(successful=False, error=exc.error)
        if exc.handshake:
            reply["advice"] = {"reconnect": "handshake", "interval": 0}
    return out


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _handshake(message: dict[str, Any]) -> dict[str, Any]:
    offered = message.get("supportedConnectionTypes")
    if not isinstance(offered, list) or not set(offered) & set(CONNECTION_TYPES):
        raise BayeuxError(301, ",".join(CONNECTION_TYPES), "connection types not supported")
    return {
        "version": "1.0",
        "supportedConnectionTypes": CONNECTION_TYPES,
        "advice": {"reconnect": "retry", "interval": 0, "timeout": _ms(POLL_SECONDS)},
    }


async def _subscribe(
    request: HTTPConnection, engine: Tidings, client: _Client, message: dict[str, Any]
) -> None:
    """Add the channel's feed to the client's subscription, if its token may read it."""
    channel = message.get("subscription")
    shown = str(channel)[:80]
    ext = message.get("ext")
    given = ext if isinstance(ext, dict) else {}
    api_key, signature = given.get("api_key"), given.get("signature")
    query = {"api_key": api_key} if isinstance(api_key, str) else {}
    headers = {"authorization": signature} if isinstance(signature, str) else {}
    try:
        grants: GrantCache = request.app.state.grants
        grant = grants.authenticate(query, headers, engine.clock.timestamp)
        user = None if grant.server else grant.user_id
        app_id, feed = realtime.parse_channel(channel, grant.key.groups, user)
        slug, _, key = feed.partition(":")
        grant.check("feed", "read", slug, key)
        engine.check_feed(feed)
        await run_in_threadpool(auth.check_read, grant.principal(), feed, engine.access)
    except realtime.ChannelError as exc:
        raise BayeuxError(405, shown, str(exc)) from None
    except Exception as exc:
        error: StreamError | None = translate(exc)
        if error is None:
            raise
        raise BayeuxError(403, shown, f"{error.kind.exception}: {error.detail}") from None
    assert isinstance(channel, str)  # (parse_channel refuses the rest)
    most = engine.settings.websocket_max_feeds
    if channel not in client.channels and len(client.channels) >= most:
        raise BayeuxError(
            403, shown, f"a client may subscribe to {most} channels (websocket_max_feeds)"
        )
    await run_in_threadpool(client.live.add, feed)
    client.channels[channel] = (app_id, feed)


async def _unsubscribe(client: _Client, channel: object) -> None:
    if not isinstance(channel, str) or channel not in client.channels:
        raise BayeuxError(405, str(channel)[:80], "not subscribed to this channel")
    _, feed = client.channels.pop(channel)
    if all(other != feed for _, other in client.channels.values()):
        await run_in_threadpool(client.live.remove, feed)


async def _connect(
    request: HTTPConnection, clients: Clients, client: _Client, wait: bool
) -> list[dict[str, Any]]:
    """The data messages of the events the client has, waiting for some if ``wait``."""
    client.wake.set()  # the connect waiting before this one is answered now
    wake = client.wake = asyncio.Event()
    closing = closing_of(request.scope)
    if closing is not None:  # the server shuts down: answer at once
        closing.on_close(wake.set)
    client.waiting = True
    try:
        first = client.live.get(0)
        if first is None and wait:
            first = await _next(client.live, wake)
    finally:
        client.waiting = False
        client.seen = clients.engine.clock.monotonic()
    events = [] if first is None else [first]
    while len(events) < EVENTS_PER_POLL and (more := client.live.get(0)) is not None:
        events.append(more)
    if any(e.type == EventType.ERROR for e in events):
        # Fell too far behind: this client is dropped, and its next connect told
        # to shake hands again (which subscribes again).
        await clients.close(client)
        return []
    wanted = realtime.new_ids(events)
    engine = clients.engine
    sources = await run_in_threadpool(engine.activities.sources, wanted) if wanted else {}
    return _data(client, events, engine.clock.now(), sources)


async def _next(live: Subscription, wake: asyncio.Event) -> Event | None:
    getter = asyncio.ensure_future(live.aget(POLL_SECONDS))
    woken = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({getter, woken}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # (this request cancelled too: no getter left to take an event)
        woken.cancel()
        taken = getter.done()
        if not taken:
            getter.cancel()
    return getter.result() if taken else None


def _data(
    client: _Client, events: list[Event], now: datetime, sources: Mapping[str, str]
) -> list[dict[str, Any]]:
    # (A change written twice, by its own write and its outbox row's, is one
    # event: the bus tells repeats, for aggregated feeds as for flat ones.)
    out: list[dict[str, Any]] = []
    for event in events:
        for channel, (app_id, feed) in client.channels.items():
            if feed != event.feed:
                continue
            data = realtime.message(event, app_id, now, sources)
            if data is None:
                continue
            if not any(data.get(k) for k in ("new", "deleted", "mark_seen", "mark_read")):
                continue
            out.append({"channel": channel, "data": data})
    return out


ROUTES = [
    Route("/faye", bayeux, methods=["GET", "POST", "OPTIONS"]),
    WebSocketRoute("/faye", bayeux_socket),
]
