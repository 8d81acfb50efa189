"""What every private server of the test suite shares: a directory, a log,
a child process in a session of its own, and an atexit safety net; and
:class:`CommandServer`, any command run as a server.

The servers themselves are in :mod:`servers` (Redis), :mod:`postgres_server`
and :mod:`rabbitmq_server`; tests import them all from :mod:`servers`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

__all__ = [
    "BIND_ERRORS",
    "CommandServer",
    "RunAs",
    "Server",
    "ServerError",
    "free_port",
    "stop_process",
    "tail",
]

BIND_ERRORS = ("Address already in use", "could not bind", "could not create any TCP/IP sockets")


class ServerError(RuntimeError):
    """A test server could not be found, started or stopped."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "<no log>"
    return "\n".join(text.splitlines()[-lines:])


def stop_process(proc: subprocess.Popen[bytes], sig: int, timeout: float) -> None:
    """Send ``sig`` to ``proc`` and wait; SIGKILL it if it does not exit in time."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class RunAs:
    """Environment and (when root) the unprivileged identity for a child process."""

    env: dict[str, str] | None = None
    user: int | None = None
    group: int | None = None
    extra_groups: list[int] | None = None


class Server:
    """Shared plumbing: temp dir, log file, child process, atexit safety net."""

    name = "server"

    def __init__(self, home: Path | None = None) -> None:
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._tmp: Path | None = None
        #: Where the server's files go instead of a new temporary directory.
        self._home = home
        #: The process after :meth:`detach`: no longer this object's to stop.
        self._detached: subprocess.Popen[bytes] | None = None

    def _workdir(self, prefix: str) -> Path:
        """``home`` (made if missing), else a new temporary directory."""
        if self._home is None:
            return Path(tempfile.mkdtemp(prefix=prefix))
        self._home.mkdir(parents=True, exist_ok=True)
        return self._home

    @property
    def pid(self) -> int:
        """The server's process id (its process group's too: a session of its own)."""
        proc = self._proc or self._detached
        if proc is None:
            raise ServerError(f"{self.name} is not started")
        return proc.pid

    def detach(self) -> int:
        """Leave the server running after this process exits, its files in place.

        Nothing stops it at exit any more and :meth:`stop` leaves it alone:
        whoever stops it does so by the pid returned (the leader of a process
        group of its own), and removes its directory.
        """
        if not self.running:
            raise ServerError(f"{self.name} is not running")
        self._detached, self._proc = self._proc, None
        if self._log is not None:
            self._log.close()  # the child holds its own descriptor
            self._log = None
        self._tmp = None
        atexit.unregister(self.stop)
        return self.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def tmpdir(self) -> Path:
        if self._tmp is None:
            raise ServerError(f"{self.name} is not started")
        return self._tmp

    @property
    def log_path(self) -> Path:
        return self.tmpdir / f"{self.name}.log"

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _spawn(self, argv: list[str], run_as: RunAs | None = None) -> None:
        run_as = run_as or RunAs()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap()
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.tmpdir,
            start_new_session=True,  # keep Ctrl-C in the terminal away from the server
            env=run_as.env,
            user=run_as.user,
            group=run_as.group,
            extra_groups=run_as.extra_groups,
        )
        atexit.register(self.stop)

    def _reap(self, sig: int, timeout: float) -> None:
        if self._proc is not None:
            stop_process(self._proc, sig, timeout)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        atexit.unregister(self.stop)

    def _check_alive(self, what: str) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            self._reap(signal.SIGKILL, 5)
            raise ServerError(
                f"{what} exited with status {code} during startup; log {self.log_path}:\n"
                f"{tail(self.log_path)}"
            )


class CommandServer(Server):
    """Any command run as a server (``tidings serve``, ``tidings worker``).

    It runs in ``home`` (its log there too; removed when it stops), in a
    session of its own, and is started once ``ready(self)`` says so; stopping
    it signals its whole process group, so the workers a server forks stop
    with it.
    """

    startup_timeout = 60.0
    stop_timeout = 30.0

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        home: Path,
        ready: Callable[[CommandServer], bool],
        env: dict[str, str] | None = None,
        port: int = 0,
    ) -> None:
        super().__init__(home)
        self.name = name
        self.argv = list(argv)
        self.env = env
        self.port = port
        self._ready = ready

    def start(self) -> Self:
        if self.running:
            raise ServerError(f"{self.name} is already running")
        self._tmp = self._workdir(f"tidings-{self.name}-")
        self.log_path.write_bytes(b"")
        self._spawn(self.argv, RunAs(env=self.env))
        deadline = time.monotonic() + self.startup_timeout
        while not self._ready(self):
            self._check_alive(self.name)
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(
                    f"{self.name} was not ready within {self.startup_timeout:.0f}s; "
                    f"log {self.log_path}:\n{tail(self.log_path)}"
                )
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=self.stop_timeout)
            if self._proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
        self._reap(signal.SIGKILL, 5)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
