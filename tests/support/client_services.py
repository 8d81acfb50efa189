"""Real services for the Python client's tests (tests/clients/python), a
pytest plugin of the suite's conftest: ``tidings serve`` processes
(restartable on the same port, so a client's URL stays valid), a TCP relay
whose connections a test can cut, and a tiny HTTP receiver that fails a
given number of times. Nothing is mocked: every request crosses a socket."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from http_server import SECRET, answers, free_port
from tidings.http.auth import mint

SERVER_TOKEN = mint(SECRET, "*", server=True)


def user_token(subject: str, **options: object) -> str:
    return mint(SECRET, subject, **options)  # type: ignore[arg-type]


class Service:
    """``tidings serve`` on ``database_url`` (and Redis when given), on a port
    chosen once and kept across :meth:`restart`."""

    def __init__(self, tmp: Path, database_url: str, redis_url: str | None = None) -> None:
        self.tmp, self.database_url, self.redis_url = tmp, database_url, redis_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> Service:
        argv = [sys.executable, "-m", "tidings.cli", "--database-url", self.database_url]
        if self.redis_url is not None:
            argv += ["--redis-url", self.redis_url]
        argv += ["serve", "--port", str(self.port)]
        env = {**os.environ, "TIDINGS_SECRET": SECRET, "PYTHONUNBUFFERED": "1"}
        self.starts += 1
        log = self.tmp / f"serve-{self.port}-{self.starts}.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env
            )
        deadline = time.monotonic() + 30
        while not answers(self.url):
            assert self.proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        return self

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Stop the process: SIGKILL (a crash) unless told otherwise."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self, sig: int = signal.SIGKILL) -> None:
        self.stop(sig)
        self.start()


@pytest.fixture(scope="module")
def tidings_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One ``tidings serve`` on SQLite for a module's tests (each uses feeds of its own)."""
    tmp = tmp_path_factory.mktemp("serve")
    made = Service(tmp, f"sqlite:///{tmp / 'tidings.db'}").start()
    yield made
    made.stop(signal.SIGINT)


@pytest.fixture
def pg_redis_service(tmp_path: Path, postgres_url: str, redis_url: str) -> Iterator[Service]:
    """``tidings serve`` on PostgreSQL and Redis, fresh for the test."""
    made = Service(tmp_path, postgres_url, redis_url).start()
    yield made
    made.stop()


class Relay:
    """A TCP relay from a free loopback port to ``port``: a test calls
    :meth:`cut` to drop every connection through it, as a network would."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._open: list[socket.socket] = []
        #: Connections accepted so far.
        self.accepted = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                self._open += [client, upstream]
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def cut(self) -> None:
        """Drop every open connection (both sides see it end)."""
        with self._lock:
            dropped, self._open = self._open, []
        for sock in dropped:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass


@pytest.fixture
def relay(tidings_service: Service) -> Iterator[Relay]:
    """A relay to the module's service, closed after the test."""
    made = Relay(tidings_service.port)
    yield made
    made.close()


class Flaky:
    """An HTTP receiver that answers ``status`` to the first ``failures``
    requests, then 200 with ``body``; it counts the requests by method."""

    def __init__(self, failures: int, status: int = 503, body: bytes = b"{}") -> None:
        self.failures, self.status, self.body = failures, status, body
        self.seen: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                outer.seen.append(self.command)
                failing = len(outer.seen) <= outer.failures
                status = outer.status if failing else 200
                content = (
                    b'{"title":"x","status":%d,"detail":"try later"}' if failing else outer.body
                )
                content = content.replace(b"%d", str(status).encode())
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
