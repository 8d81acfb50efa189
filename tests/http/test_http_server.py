"""``tidings serve`` as a process of its own: the connections it keeps open.

Idle sockets, half-sent request headers (all at once, or trickled a line at a
time) and finished keep-alive requests must all be closed by the server within
its configured timeouts; waits are bounded by a deadline, never assumed.
"""

from __future__ import annotations

import json
import re
import select
import selectors
import signal
import socket
import threading
import time
from contextlib import ExitStack, suppress
from http.client import HTTPConnection, HTTPResponse
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from http_server import ServeProcess, tidings_serve
from tidings.http.auth import mint
from tidings.settings import Settings

CONFIGURATION = Path(__file__).parents[2] / "docs" / "guides" / "operations.md"
HALF_A_HEADER = b"GET /healthz HTTP/1.1\r\nHost: tidings\r\nX-Slow: "
#: Far longer than the 1 s timeouts the tests configure, so a server that
#: closes nothing fails the test and a slow machine does not.
DEADLINE = 20.0


def _sockets(
    stack: ExitStack, address: tuple[str, int], count: int, first: bytes = b""
) -> list[socket.socket]:
    """``count`` connections to ``address``, closed with ``stack``, each having sent ``first``."""
    socks = [stack.enter_context(socket.create_connection(address)) for _ in range(count)]
    for sock in socks:
        sock.sendall(first)
    return socks


def _kept_alive(
    stack: ExitStack, address: tuple[str, int], count: int, then: bytes = b""
) -> list[socket.socket]:
    """``count`` connections, closed with ``stack``, that each completed a
    keep-alive request, then sent ``then``."""
    socks = []
    for _ in range(count):
        conn = HTTPConnection(*address, timeout=10)
        stack.callback(conn.close)
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        assert response.status == 200
        response.read()
        assert not response.will_close  # HTTP/1.1 keep-alive: the server may close it
        assert conn.sock is not None
        conn.sock.sendall(then)
        socks.append(conn.sock)
    return socks


def _server_token(served: ServeProcess) -> str:
    """The server token ``tidings serve --dev`` printed."""
    token = re.search(r"server token\s+(\S+)", served.stdout.read_text())
    assert token is not None, served.stdout.read_text()
    return token[1]


def _publish(served: ServeProcess) -> bytes:
    """A whole request that publishes an activity, with the server token."""
    body = b'{"actor": "alice", "verb": "post", "object": "photo:1"}'
    head = [
        "POST /v1/feeds/user/alice/activities HTTP/1.1",
        "Host: tidings",
        f"Authorization: Bearer {_server_token(served)}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    return "\r\n".join([*head, "", ""]).encode() + body


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except ConnectionError:  # reset
        return True


def _still_open(socks: list[socket.socket], trickle: dict[socket.socket, bytes]) -> list[int]:
    """Indexes of ``socks`` the server has not closed by the deadline; meanwhile
    each socket of ``trickle`` sends its bytes again every 0.2 s."""
    waiting = dict(enumerate(socks))
    with selectors.DefaultSelector() as selector:
        for index, sock in waiting.items():
            selector.register(sock, selectors.EVENT_READ, index)
        deadline = time.monotonic() + DEADLINE
        while waiting and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.2):
                if _closed(waiting[key.data]):
                    selector.unregister(waiting.pop(key.data))
            for index, sock in list(waiting.items()):
                if sock in trickle:
                    try:
                        sock.sendall(trickle[sock])
                    except ConnectionError:  # closed
                        selector.unregister(waiting.pop(index))
    return sorted(waiting)


def _status(address: tuple[str, int]) -> int:
    """The status of a ``GET /healthz`` on a connection of its own."""
    conn = HTTPConnection(*address, timeout=10)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.timeout(90)
def test_serve_closes_idle_and_half_sent_connections(tmp_path: Path) -> None:
    options = ["--workers", "2", "--keepalive", "1", "--header-timeout", "1"]
    with tidings_serve(tmp_path, *options) as served, ExitStack() as stack:
        address = served.address
        # First, so the deadline of every connection below ends after its own.
        slow_body = _sockets(stack, address, 1, _publish(served)[:-10])[0]
        kept = _kept_alive(stack, address, 10)
        kept_then_half = _kept_alive(stack, address, 10, then=HALF_A_HEADER)
        kept_then_newlines = _kept_alive(stack, address, 1)
        idle = _sockets(stack, address, 100)
        half = _sockets(stack, address, 100, HALF_A_HEADER)
        trickled = _sockets(stack, address, 1, b"GET /healthz HTTP/1.1\r\n")
        socks = kept + kept_then_half + kept_then_newlines + idle + half + trickled
        # A header that keeps coming, a line at a time, gets no more time
        # than one sent at once; nor do blank lines between requests.
        trickle = {trickled[0]: b"X-More: 1\r\n", kept_then_newlines[0]: b"\r\n"}
        assert _still_open(socks, trickle) == []

        # Its header was complete: no deadline while the body comes.
        assert select.select([slow_body], [], [], 0)[0] == [], "closed mid-request"
        slow_body.sendall(_publish(served)[-10:])
        response = HTTPResponse(slow_body, method="POST")
        response.begin()
        assert response.status == 201, response.read()
        response.close()
        assert _status(address) == 200, "the server still serves"


@pytest.mark.timeout(90)
def test_serve_answers_503_beyond_its_connection_limit(tmp_path: Path) -> None:
    options = ["--max-connections", "4", "--header-timeout", "600"]
    with tidings_serve(tmp_path, *options) as served, ExitStack() as stack:
        address = served.address
        _sockets(stack, address, 2)
        # The connections of the start-up check close as the server sees it.
        deadline = time.monotonic() + DEADLINE
        while (status := _status(address)) != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status == 200, "3 connections of 4"
        _sockets(stack, address, 1)
        assert _status(address) == 503, "4 connections of 4"


def _head(size: int) -> bytes:
    """A ``GET /healthz`` whose request line and headers are ``size`` bytes in all."""
    head = b"GET /healthz HTTP/1.1\r\nHost: tidings\r\nX-Pad: "
    end = b"\r\n\r\n"
    return head + b"x" * (size - len(head) - len(end)) + end


def _answer(address: tuple[str, int], request: bytes) -> tuple[HTTPResponse, bytes, bool]:
    """The response to ``request``, sent (by a thread: the server may answer
    before reading it all) on a connection of its own; its body; and whether
    the server closed the connection after it."""
    with socket.create_connection(address, timeout=DEADLINE) as sock:

        def send() -> None:
            with suppress(OSError):  # the server closed it: it has answered
                sock.sendall(request)

        sender = threading.Thread(target=send)
        sender.start()
        response = HTTPResponse(sock, method="GET")
        response.begin()
        body = response.read()
        closed = _closed(sock)
        sock.shutdown(socket.SHUT_RDWR)
        sender.join(DEADLINE)
        return response, body, closed


def _peak_memory(pid: int) -> int:
    """The most memory ``pid`` has had resident, in bytes (VmHWM)."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    assert found is not None, status
    return int(found[1]) * 1024


@pytest.mark.timeout(90)
def test_serve_answers_431_to_a_header_over_its_limit(tmp_path: Path) -> None:
    limit = Settings.load().http_max_header_bytes
    with tidings_serve(tmp_path) as served:
        response, body, closed = _answer(served.address, _head(limit))
        assert response.status == 200, "a header of the limit exactly"

        response, body, closed = _answer(served.address, _head(limit + 1))
        assert response.status == 431
        assert response.getheader("content-type") == "application/problem+json"
        problem = json.loads(body)
        assert (problem["status"], problem["title"]) == (431, "Request Header Fields Too Large")
        assert f"larger than {limit} bytes (http_max_header_bytes)" in problem["detail"]
        assert closed

        response, _, closed = _answer(served.address, _head(1 << 20))
        assert (response.status, closed) == (431, True)
        # A header of 32 MB is refused as its first bytes arrive, never held:
        # the server's memory does not grow by it (httptools would hold it
        # whole, grown by copies).
        before = _peak_memory(served.process.pid)
        response, _, closed = _answer(served.address, _head(32 << 20))
        assert (response.status, closed) == (431, True)
        assert _peak_memory(served.process.pid) - before < 8 << 20
        assert _status(served.address) == 200, "the server still serves"


@pytest.mark.timeout(90)
def test_serve_counts_websockets_within_its_connection_limit(tmp_path: Path) -> None:
    with tidings_serve(tmp_path, "--max-connections", "10") as served, ExitStack() as stack:
        url = "ws://{}:{}/v1/stream".format(*served.address)
        headers = {"authorization": f"Bearer {_server_token(served)}"}
        opened, refusal = 0, None
        for _ in range(30):
            try:
                stack.enter_context(ws_connect(url, additional_headers=headers))
            except InvalidStatus as exc:
                refusal = exc.response
                break
            opened += 1
        assert refusal is not None, f"{opened} WebSockets of 10 connections"
        assert refusal.status_code == 503
        assert "(http_max_connections)" in json.loads(refusal.body or b"{}")["detail"]
        assert opened < 10
        stack.close()
        # Closed WebSockets are counted no more (once the server sees them close).
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                with ws_connect(url, additional_headers=headers) as ws:
                    ws.send(json.dumps({"type": "subscribe", "feed": "timeline:alice"}))
                    assert json.loads(ws.recv(DEADLINE))["type"] == "subscribed"
                    break
            except InvalidStatus:
                assert time.monotonic() < deadline, "the closed WebSockets still count"
                time.sleep(0.1)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_ends_live_streams_then_the_server(
    tmp_path: Path, workers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Heartbeats every second: a stream the server keeps open keeps sending.
    monkeypatch.setenv("TIDINGS_SSE_HEARTBEAT_SECONDS", "1")
    with tidings_serve(tmp_path, "--workers", workers) as served:
        # A user token's: its streams filter what they show (blocks).
        secret = re.search(r"^secret\s+(\S+)", served.stdout.read_text(), re.MULTILINE)
        assert secret is not None, served.stdout.read_text()
        headers = {"authorization": f"Bearer {mint(secret[1], 'alice')}"}
        _sigterm_ends_streams(served, headers)


def _sigterm_ends_streams(served: ServeProcess, headers: dict[str, str]) -> None:
    """An SSE stream and a WebSocket, open when ``served`` gets SIGTERM, end
    cleanly (a last event; close 1001), then the server exits."""
    with (
        httpx.Client(headers=headers, timeout=DEADLINE) as client,
        client.stream("GET", f"{served.url}/v1/feeds/timeline/alice/events") as sse,
        ws_connect(
            served.url.replace("http://", "ws://") + "/v1/stream", additional_headers=headers
        ) as ws,
    ):
        lines = sse.iter_lines()
        assert next(lines) == ": connected"
        ws.send(json.dumps({"type": "subscribe", "feed": "timeline:alice"}))
        assert json.loads(ws.recv(DEADLINE))["type"] == "subscribed"

        served.process.send_signal(signal.SIGTERM)
        # The stream ends with a last event and the end of its chunked body
        # (httpx raises on a stream cut short).
        deadline = time.monotonic() + DEADLINE
        rest = []
        for line in lines:
            rest.append(line)
            assert time.monotonic() < deadline, f"the stream outlived the shutdown: {rest}"
        events = [line for line in rest if line and not line.startswith(":")]
        assert events == ["event: error", 'data: {"error":"server shutting down"}']
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(DEADLINE)
        assert closed.value.rcvd is not None
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1001, "server shutting down")
        # One worker re-raises SIGTERM as it exits; the supervisor of several exits 0.
        assert served.process.wait(DEADLINE) in (0, -signal.SIGTERM)


def _readme_defaults() -> dict[str, str]:
    """The configuration table of the docs (operations guide): setting name to its default."""
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", CONFIGURATION.read_text(), re.MULTILINE)
    return {name: default.strip() for name, default in rows}


@pytest.mark.parametrize(
    "setting",
    [
        "http_keepalive_seconds",
        "http_header_timeout_seconds",
        "http_max_connections",
        "http_max_header_bytes",
        "http_shutdown_timeout_seconds",
        "live_connections_per_user",
        "websocket_max_feeds",
        "websocket_max_firehoses",
    ],
)
def test_serve_defaults_are_the_documented_ones(setting: str) -> None:
    documented = _readme_defaults()[setting]
    assert float(documented.replace(",", "")) == getattr(Settings.load(), setting)
