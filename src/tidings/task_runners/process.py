"""Delivery in a process of its own, beside the one that publishes.

The thread runner shares the interpreter's lock with the threads that
publish. On the everyday workload (SQLite canonical, Redis feeds) a publish
cost ~450 µs of one thread alone and ~700 µs beside a delivering thread, so
one core did both jobs while the other sat half idle. ``ProcessRunner``
starts a child interpreter that delivers (the thread runner's loop over an
engine of its own), and the publishing process only tells it there is work.

The child (:mod:`tidings.task_runners.child`) builds its engine from the same
settings and nothing else, so the
runner is chosen from settings (``task_runner = "process"``) and refuses
parts handed to the engine. It needs stores and live events two processes
share: the feeds in SQL or Redis, and ``redis_url`` set, so that what the
child delivers reaches the parent's live streams through Redis.

The child's standard input is the channel, one line a message: the
settings as JSON first, then an empty line for each wake-up, or the id of
an activity whose direct targets (own feed, ``to``) the publish wrote, so
the child does not write and announce them again (a pass that claims the
row first, on its once-a-second look, writes them a second time:
idempotent, with a second event for their watchers). SIGTERM (``stop``),
the end of its input, or its parent gone (it looks every second: a process
forked from the parent may hold the input open) stop the child once the
pass under way is done; the rows of a killed child are taken again once
their leases lapse, like any crashed runner's. What the child logs is
logged again here, under its own logger names. A child that exits on its
own is replaced, after a pause that grows while it keeps failing.

Make the engine after forking (in each worker of a pre-forking server): the
copy of a runner a fork inherits neither wakes nor stops its parent's
child, so that copy's publishes wait for the child's once-a-second look.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

import orjson

from tidings.core.clock import real_monotonic
from tidings.core.errors import ConfigurationError
from tidings.delivery.batch import DirectWrites
from tidings.settings import Settings, StoreName

log = logging.getLogger("tidings.task_runner")

#: How often the parent looks whether its child is still there.
WATCH_SECONDS = 0.5
#: The pause before a child that exited is replaced: doubled while the
#: children keep exiting within ``HEALTHY_SECONDS`` of their start.
FIRST_RESTART_SECONDS = 0.5
MOST_RESTART_SECONDS = 30.0
HEALTHY_SECONDS = 30.0
#: How long a stopping child may finish its pass before it is killed.
STOP_SECONDS = 30.0
#: Activity ids a write to the pipe, at most: a write of up to 4,096 bytes to
#: a pipe is whole or nothing.
IDS_PER_WRITE = 100


def check_settings(settings: Settings) -> bytes:
    """The settings as the child reads them; raises unless a delivering child
    can share this engine's feeds and live events and read them back whole."""
    if settings.store == StoreName.MEMORY:
        raise ConfigurationError(
            "the process task runner needs feeds both processes reach: the memory store "
            "is one process's (use the sql or redis timeline store)"
        )
    if not settings.redis_url:
        raise ConfigurationError(
            "the process task runner needs TIDINGS_REDIS_URL: live events of the deliveries "
            "reach this process's streams through Redis"
        )
    if not sys.executable or getattr(sys, "frozen", False):
        raise ConfigurationError(
            "the process task runner starts this Python interpreter again: it needs "
            "sys.executable to be a Python interpreter (not a frozen application's)"
        )
    fields = set(Settings.model_fields)
    payload = settings.model_dump_json(include=fields).encode()
    again = Settings.model_validate_json(payload).model_dump()
    wanted = settings.model_dump(include=fields)
    differ = sorted(name for name in fields if again[name] != wanted[name])
    if differ:
        raise ConfigurationError(
            f"the process task runner cannot hand these settings to its child as JSON: "
            f"{', '.join(differ)}"
        )
    return payload


class ProcessRunner:
    """Deliveries carried out by a child process built from ``settings``;
    ``direct`` is the publishing side's record of direct writes, forwarded."""

    def __init__(
        self,
        settings: Settings,
        direct: DirectWrites | None = None,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        #: How long a child lived (the engine's clock): a healthy one resets the pause.
        self.monotonic = monotonic
        self._payload = check_settings(settings)
        # Where a relative SQLite path means what it meant when this was made.
        self._cwd = os.getcwd()
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self._readers: list[threading.Thread] = []
        #: The process whose child this is: a process forked from it (a
        #: pre-forking server) holds a copy of this runner that must neither
        #: write to the child nor stop it.
        self._owner = os.getpid()
        if direct is not None:
            direct.forward = self._forward

    @property
    def pid(self) -> int | None:
        """The delivering child's process id (None before start, after stop,
        and while a child that exited waits to be replaced)."""
        child = self._child
        return None if child is None else child.pid

    def start(self) -> None:
        with self._lock:
            if self._child is not None or self._watcher is not None:
                return
            self._stopping.clear()
            self._owner = os.getpid()
            self._child = self._spawn()
        self._watcher = threading.Thread(target=self._watch, name="tidings-process-watch")
        self._watcher.daemon = True
        self._watcher.start()

    def notify(self) -> None:
        self._send(b"\n")

    def stop(self) -> None:
        if os.getpid() != self._owner:
            return  # a copy in a forked process: the child is the parent's
        self._stopping.set()
        with self._lock:
            child, self._child = self._child, None
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        if child is not None:
            _end(child)
        for reader in self._readers:
            reader.join(STOP_SECONDS)
        self._readers.clear()

    def _forward(self, activity_ids: Sequence[str]) -> None:
        for at in range(0, len(activity_ids), IDS_PER_WRITE):
            self._send(b"".join(a.encode() + b"\n" for a in activity_ids[at : at + IDS_PER_WRITE]))

    def _send(self, data: bytes) -> None:
        # Called after a commit: never raises. Under the lock, so never a
        # write to a pipe closed (and its number reused) meanwhile; but not in
        # a forked copy, where the lock may have been held at the fork.
        if os.getpid() != self._owner:
            return
        with self._lock:
            child = self._child
            if child is None or child.stdin is None or child.stdin.closed:
                return
            # A full pipe holds wake-ups enough (and a lost id costs a
            # harmless second write); a broken one is a child gone, which the
            # watcher replaces (the new one looks at once).
            with contextlib.suppress(OSError):
                os.write(child.stdin.fileno(), data)

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        # The child imports what this process imports, from where it found it
        # (-P: not from the working directory first).
        env["PYTHONPATH"] = _python_path(self._cwd)
        child = subprocess.Popen(
            [sys.executable, "-P", "-m", "tidings.task_runners.child", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self._cwd,
            close_fds=True,
            # Its own process group: Ctrl-C at a terminal is the parent's to act on.
            process_group=0,
        )
        stdin: IO[bytes] = child.stdin  # type: ignore[assignment]
        try:
            # Before the pipe stops blocking: 2 KB fit in any pipe's buffer.
            stdin.write(self._payload + b"\n")
            stdin.flush()
            os.set_blocking(stdin.fileno(), False)
        except OSError:
            _close(child)
            child.kill()
            child.wait()
            if child.stderr is not None:
                child.stderr.close()
            raise
        reader = threading.Thread(
            target=_relog, args=(child,), name=f"tidings-process-log-{child.pid}", daemon=True
        )
        reader.start()
        self._readers = [r for r in self._readers if r.is_alive()] + [reader]
        self._started_at = self.monotonic()
        return child

    def _watch(self) -> None:
        pause = FIRST_RESTART_SECONDS
        while not self._stopping.wait(WATCH_SECONDS):
            with self._lock:
                child = self._child
            if child is None or child.poll() is None:
                continue
            lived = self.monotonic() - self._started_at
            if lived >= HEALTHY_SECONDS:
                pause = FIRST_RESTART_SECONDS
            log.error(
                "the delivery process %d exited with %s after %.1f s; another starts in %.1f s",
                child.pid,
                child.returncode,
                lived,
                pause,
            )
            with self._lock:
                if self._child is child:
                    self._child = None
                    _close(child)
            while not self._stopping.wait(pause):
                pause = min(pause * 2, MOST_RESTART_SECONDS)
                try:
                    new = self._spawn()
                except Exception:
                    log.exception("the delivery process could not start; again in %.1f s", pause)
                    continue
                with self._lock:
                    if self._stopping.is_set():
                        stale: subprocess.Popen[bytes] | None = new
                    else:
                        self._child, stale = new, None
                if stale is not None:
                    _end(stale)
                break


def _python_path(cwd: str) -> str:
    """This process's import path as ``PYTHONPATH`` (entries it cannot carry
    left out: not text, or holding the separator)."""
    out: list[str] = []
    for entry in sys.path:
        if not isinstance(entry, str | bytes):
            continue
        text = os.fsdecode(entry) or cwd
        if os.pathsep in text:
            log.warning("%r is left off the delivery process's import path", text)
            continue
        out.append(text)
    return os.pathsep.join(out)


def _close(child: subprocess.Popen[bytes]) -> None:
    if child.stdin is not None:
        # A child gone with wake-ups unread: nothing to flush.
        with contextlib.suppress(OSError):
            child.stdin.close()


def _end(child: subprocess.Popen[bytes]) -> None:
    """Ask the child to stop (it finishes its pass and exits); kill it if it does not."""
    _close(child)
    with contextlib.suppress(OSError):
        child.terminate()
    try:
        child.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        log.error("the delivery process %d did not stop in %.0f s; killed", child.pid, STOP_SECONDS)
        child.kill()
        child.wait()


def _relog(child: subprocess.Popen[bytes]) -> None:
    """Log again here what the child logs (one JSON record a line on its
    stderr), so that it reaches this application's handlers; other lines (an
    interpreter's own last words) as errors."""
    assert child.stderr is not None
    with child.stderr:
        for line in child.stderr:
            try:
                _relog_line(child.pid, line)
            except Exception:
                # Never stop reading: a child writing to a full pipe would stall.
                log.exception("a line of the delivery process %d was not logged", child.pid)


def _relog_line(pid: int, line: bytes) -> None:
    try:
        record: dict[str, Any] = orjson.loads(line)
        name, level = str(record["name"]), int(record["level"])
        message = str(record["message"])
    except (ValueError, KeyError, TypeError, OverflowError):
        name, level, message = "tidings.task_runner", logging.ERROR, line.decode(errors="replace")
    logging.getLogger(name).log(level, "%s (delivery process %d)", message.rstrip(), pid)
