"""``tidings serve`` as a process of its own: the connections it keeps open.

Idle sockets, half-sent request headers (all at once, or trickled a line at a
time) and finished keep-alive requests must all be closed by the server within
its configured timeouts; waits are bounded by a deadline, never assumed.
"""

from __future__ import annotations

import re
import select
import selectors
import socket
import time
from contextlib import ExitStack
from http.client import HTTPConnection, HTTPResponse
from pathlib import Path

import pytest

from http_server import ServeProcess, tidings_serve
from tidings.settings import Settings

README = Path(__file__).parents[2] / "README.md"
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


def _publish(served: ServeProcess) -> bytes:
    """A whole request that publishes an activity, with the server token."""
    token = re.search(r"server token\s+(\S+)", served.stdout.read_text())
    assert token is not None, served.stdout.read_text()
    body = b'{"actor": "alice", "verb": "post", "object": "photo:1"}'
    head = [
        "POST /v1/feeds/user/alice/activities HTTP/1.1",
        "Host: tidings",
        f"Authorization: Bearer {token[1]}",
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


def _readme_defaults() -> dict[str, str]:
    """The configuration table of the README: setting name to its default."""
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", README.read_text(), re.MULTILINE)
    return {name: default.strip() for name, default in rows}


@pytest.mark.parametrize(
    "setting", ["http_keepalive_seconds", "http_header_timeout_seconds", "http_max_connections"]
)
def test_serve_defaults_are_the_documented_ones(setting: str) -> None:
    documented = _readme_defaults()[setting]
    assert float(documented.replace(",", "")) == getattr(Settings.load(), setting)
