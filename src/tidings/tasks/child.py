"""The delivery process's side of :mod:`tidings.tasks.process`: run as
``python -m tidings.tasks.child`` by a ``ProcessRunner``, it reads its
settings and then its wake-ups and direct writes on standard input, and
delivers with the thread runner's loop over an engine of its own.

A module of its own: it imports the engine, which imports the runners.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence

import orjson

from tidings.engine import Tidings
from tidings.settings import Settings
from tidings.tasks.inline import ThreadRunner

log = logging.getLogger("tidings.runner")

#: How often the child looks whether its parent is still there.
PARENT_LOOK_SECONDS = 1.0


class _JsonLines(logging.Handler):
    """Each record one JSON line on stderr, for the parent (``tidings.tasks.process._relog``)."""

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


def _lines(fd: int) -> Iterator[list[bytes]]:
    """The lines of ``fd`` as they come, without their newlines, until its end."""
    rest = b""
    while True:
        got = os.read(fd, 65536)
        if not got:
            return
        *lines, rest = (rest + got).split(b"\n")
        yield lines


class _Stop(Exception):
    """SIGTERM: stop once the pass under way is done."""


def _stop(_signum: int, _frame: object) -> None:
    raise _Stop


def _watch_parent(parent: int) -> None:
    """SIGTERM to this process once its parent is gone (it was reparented)."""
    while os.getppid() == parent:
        time.sleep(PARENT_LOOK_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)


def child_main() -> None:
    """Deliver with the settings on standard input until it ends, SIGTERM, or
    the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)
    root = logging.getLogger()
    root.addHandler(_JsonLines())
    root.setLevel(logging.WARNING)
    parent = os.getppid()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    try:
        _deliver()
    except _Stop:
        pass
    except Exception:
        log.exception("the delivery process failed")
        raise SystemExit(1) from None


def _deliver() -> None:
    incoming = _lines(0)
    first: list[bytes] = []
    for lines in incoming:
        first += lines
        if first:
            break
    if not first:
        raise SystemExit("the delivery process's parent went away before its settings")
    settings = Settings.model_validate_json(first[0])
    engine = Tidings(settings, delivery="manual")
    # The feeds other processes watch, read before the first pass (the bus
    # reads them again every second): their deliveries' events are made for
    # them, and big deliveries write them first.
    engine.bus.refresh_watched()
    engine.deliverer.watched = engine.bus.watching
    linger_ms = settings.delivery_linger_ms
    runner = ThreadRunner(
        engine.deliverer,
        threads=settings.delivery_threads,
        max_linger_seconds=None if linger_ms is None else linger_ms / 1000,
    )
    direct = engine.deliverer.direct

    def take(lines: Sequence[bytes]) -> None:
        written = [line.decode() for line in lines if line]
        if written:
            direct.add_many(written)
        runner.notify()

    try:
        take(first[1:])  # and rows committed before this child was there
        runner.start()
        for lines in incoming:
            take(lines)
    finally:
        # Not interrupted again: the pass under way finishes, then the engine closes.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        runner.stop()
        engine.close()


if __name__ == "__main__":
    child_main()
