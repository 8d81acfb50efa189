"""The delivery process's side of :mod:`tidings.task_runners.process`: run as
``python -m tidings.task_runners.child`` by a ``ProcessRunner``, it reads its
settings and then its wake-ups and direct writes on standard input, and
delivers with the thread runner's loop over an engine of its own.

A module of its own: it imports the engine, which imports the runners.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import sys
from collections.abc import Iterator, Sequence

import orjson

from tidings.engine import Tidings
from tidings.settings import Settings
from tidings.wiring import build

log = logging.getLogger("tidings.task_runner")

#: How often the child looks whether its parent is still there.
PARENT_LOOK_SECONDS = 1.0


class _JsonLines(logging.Handler):
    """Each record one JSON line on stderr, for the parent (``tidings.task_runners.process._relog``)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            line = {"name": record.name, "level": record.levelno, "message": message}
            sys.stderr.buffer.write(orjson.dumps(line) + b"\n")
            sys.stderr.buffer.flush()
        except Exception:
            self.handleError(record)


class _Input:
    """Standard input's lines as they come, until its end, SIGTERM, or the
    parent gone (``parent``: the pid it gave; this process is reparented when
    it dies, which a process forked from it, holding the input open, would
    otherwise hide).

    SIGTERM only sets a flag (and, through the wake-up fd, ends the wait for
    input): an exception raised from a handler could cut a transaction, a
    lock's hold or the final ``runner.stop()`` short.
    """

    def __init__(self, fd: int, parent: int) -> None:
        self.fd = fd
        self.parent = parent
        #: Set by SIGTERM's handler: a plain flag (an Event's lock, taken again
        #: by a second SIGTERM's handler inside the first, would deadlock).
        self.stopping = False
        self._wake, wake_w = os.pipe()
        os.set_blocking(self._wake, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGTERM, self._stop)

    def _stop(self, _signum: int, _frame: object) -> None:
        self.stopping = True

    def _ended(self) -> bool:
        return self.stopping or os.getppid() != self.parent

    def lines(self) -> Iterator[list[bytes]]:
        """Lists of lines, without their newlines (a partial one waits for its end)."""
        selector = selectors.DefaultSelector()
        selector.register(self.fd, selectors.EVENT_READ)
        selector.register(self._wake, selectors.EVENT_READ)
        rest = b""
        try:
            while not self._ended():
                ready = {key.fd for key, _ in selector.select(PARENT_LOOK_SECONDS)}
                if self._wake in ready:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self._wake, 512):
                            pass
                if self.fd not in ready or self._ended():
                    continue
                got = os.read(self.fd, 65536)
                if not got:
                    return
                *lines, rest = (rest + got).split(b"\n")
                yield lines
        finally:
            selector.close()


def child_main() -> None:
    """Deliver with the settings on standard input until it ends, SIGTERM, or
    the parent (its pid the first argument) is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    root = logging.getLogger()
    root.addHandler(_JsonLines())
    root.setLevel(logging.WARNING)
    # (A parent of an older tidings gives no pid: the one there now.)
    incoming = _Input(0, int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid())
    try:
        _deliver(incoming)
    except Exception:
        log.exception("the delivery process failed")
        raise SystemExit(1) from None


def _deliver(incoming: _Input) -> None:
    lines = incoming.lines()
    first: list[bytes] = []
    for got in lines:
        first += got
        if first:
            break
    if not first:
        return  # gone or stopped before its settings: nothing to do
    settings = Settings.model_validate_json(first[0])
    # The engine a thread-runner deployment would have, started once the
    # direct writes told so far are known.
    engine = Tidings.from_parts(build(settings, task_runner="thread"))
    try:
        # The feeds other processes watch, read before the first pass (the bus
        # reads them again every second): their deliveries' events are made.
        engine.bus.refresh_watched()
        direct, runner = engine.deliverer.direct, engine.task_runner

        def take(received: Sequence[bytes]) -> None:
            written = [line.decode() for line in received if line]
            if written:
                direct.add_many(written)
            runner.notify()

        take(first[1:])  # and rows committed before this child was there
        engine.start()
        for got in lines:
            take(got)
    finally:
        engine.close()  # the runner's pass under way finishes first


if __name__ == "__main__":
    child_main()
