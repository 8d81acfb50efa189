"""Metrics shared by the worker processes of one ``tidings serve``.

prometheus_client keeps each metric in memory, unless ``PROMETHEUS_MULTIPROC_DIR``
names a directory when it is imported: then each process writes its values
to files of its own there (named by its pid), and a collector reading all
the files reports the sum of every process. ``tidings serve --workers N``
makes such a directory, private to it, before its workers start (they
inherit the variable), and removes it when it stops: a scrape of any worker
then reports the whole server, and a new server never adds up the counts of
an old one. With the ``metrics_dir`` setting, the server uses that directory
instead, shared with the host's Celery workers, and leaves it in place.

A counter's file outlives its worker (a worker that dies, and is replaced,
leaves its counts in the totals, so they never go down). A gauge of a
``live*`` mode (open connections) must not: a scrape drops the files of
processes that no longer run (:func:`forget_dead`), wherever they died.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import values
from prometheus_client.multiprocess import mark_process_dead

from tidings.task_runners.metrics import ENV

#: Files of gauges whose value is that of running processes only.
_LIVE_GAUGE = re.compile(r"gauge_live[a-z]+_(\d+)\.db")


def shared_dir() -> str | None:
    """The directory this process's metrics are kept in, or None when they
    are kept in memory (prometheus_client was imported without ``ENV``)."""
    if values.ValueClass is values.MutexValue:
        return None
    return os.environ.get(ENV)


@contextmanager
def shared_metrics() -> Iterator[str]:
    """A new private directory for the metrics of the processes started
    within (``ENV`` names it for them), removed with every file on leaving."""
    path = tempfile.mkdtemp(prefix="tidings-metrics-")
    before = os.environ.get(ENV)
    os.environ[ENV] = path
    try:
        yield path
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before
        shutil.rmtree(path, ignore_errors=True)


def forget_dead(path: str) -> list[int]:
    """Drop the live gauges' files of processes that no longer run (a worker
    killed, or one that stopped without saying so); returns their pids."""
    dead = set()
    for entry in Path(path).iterdir():
        found = _LIVE_GAUGE.fullmatch(entry.name)
        if found is not None and not _running(int(found[1])):
            dead.add(int(found[1]))
    for pid in sorted(dead):
        mark_process_dead(pid, path)
    return sorted(dead)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # (someone else's: a pid taken again since)
        return True
    return True
