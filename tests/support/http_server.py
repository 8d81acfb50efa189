"""Run the HTTP service for real on a loopback port: uvicorn in a background
thread, or ``tidings serve`` as a process of its own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import uvicorn

from tidings import Settings, StoreName, Tidings
from tidings.engine import TaskRunnerChoice
from tidings.http import create_app
from tidings.http.auth import mint

__all__ = ["SECRET", "LiveApi", "ServeProcess", "free_port", "live_api", "serve", "tidings_serve"]

#: 40 bytes: longer than the HS256 hash, so PyJWT does not warn about the key.
SECRET = "x" * 40


@contextmanager
def serve(app: Any, *, startup_timeout: float = 10.0) -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn on a free loopback port; yields its base URL.

    The listening socket is bound here (port 0) and handed to uvicorn, so no
    other process can take the port between choosing and binding it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
        )
        thread.start()
        try:
            deadline = time.monotonic() + startup_timeout
            while not server.started:
                if not thread.is_alive():
                    raise RuntimeError("uvicorn exited before it started")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"uvicorn did not start within {startup_timeout:.0f}s")
                time.sleep(0.01)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout=15)
            if thread.is_alive():
                server.force_exit = True
                thread.join(timeout=5)
            assert not thread.is_alive(), "uvicorn did not stop"
    finally:
        sock.close()


@dataclass(frozen=True)
class LiveApi:
    """A running service: its base URL, the engine behind it, and a server token."""

    url: str
    engine: Tidings
    server_token: str

    def token(self, subject: str) -> str:
        """A user token for ``subject``, signed with the service's secret and
        issued at the engine's time (a test may have moved its clock)."""
        return mint(SECRET, subject, now=self.engine.clock.timestamp)

    def headers(self, subject: str | None = None) -> dict[str, str]:
        """``Authorization`` for ``subject``, or for the server when None."""
        if subject is None:
            token = mint(SECRET, "*", server=True, now=self.engine.clock.timestamp)
        else:
            token = self.token(subject)
        return {"Authorization": f"Bearer {token}"}


@contextmanager
def live_api(
    store: Literal["sql", "redis"],
    database_url: str,
    redis_url: str | None = None,
    task_runner: TaskRunnerChoice = "sync",
    **settings: Any,
) -> Iterator[LiveApi]:
    """An engine on ``store`` (``sql`` or ``redis``), by default with synchronous
    delivery, served over HTTP."""
    config = Settings(
        database_url=database_url,
        redis_url=redis_url if store == "redis" else None,
        timeline_store=StoreName(store),
        secret=SECRET,
        **settings,
    )
    with Tidings(config, task_runner=task_runner) as engine, serve(create_app(engine)) as url:
        yield LiveApi(url, engine, mint(SECRET, "*", server=True))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class ServeProcess:
    """A running ``tidings serve``: where it listens and where its output goes."""

    address: tuple[str, int]
    stdout: Path
    stderr: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return "http://{}:{}".format(*self.address)


@contextmanager
def tidings_serve(
    tmp_path: Path,
    *options: str,
    secret: str | None = None,
    env: dict[str, str] | None = None,
    startup_seconds: float = 30,
    database_url: str | None = None,
) -> Iterator[ServeProcess]:
    """``tidings serve --dev`` with ``options``, a process of its own on a free
    loopback port and a fresh SQLite file, once ``/healthz`` answers (within
    ``startup_seconds``); it must exit 0 on Ctrl-C (SIGINT) after, unless the
    test has stopped it. With ``secret``, tokens are signed with it (else
    ``--dev`` makes one up); with ``env``, these variables are added to its
    environment; with ``database_url``, that database instead of the SQLite
    file."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    database = database_url or f"sqlite:///{tmp_path / 'x.db'}"
    argv = [sys.executable, "-m", "tidings.cli", "--database-url", database]
    argv += ["serve", "--dev", "--port", str(port), *options]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if secret is not None:
        environment["TIDINGS_SECRET"] = secret
    with stdout.open("wb") as out, stderr.open("wb") as errors:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=errors, stdin=subprocess.DEVNULL, env=environment
        )
    try:
        deadline = time.monotonic() + startup_seconds
        while proc.poll() is None and not answers(url):
            assert time.monotonic() < deadline, (
                f"no answer in {startup_seconds:.0f} s:\n{stderr.read_text()}"
            )
            time.sleep(0.1)
        assert proc.poll() is None, f"exited with {proc.returncode}:\n{stderr.read_text()}"
        yield ServeProcess(("127.0.0.1", port), stdout, stderr, proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    # uvicorn ends by raising again the signal that stopped it: a SIGTERM the
    # test sent is the exit status.
    assert code in (0, -signal.SIGTERM), stderr.read_text()


def answers(url: str) -> bool:
    """Whether the service at ``url`` answers ``/healthz`` with 200 now."""
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False
