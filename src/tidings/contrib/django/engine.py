"""One engine per process, built on first use from ``settings.TIDINGS``.

A forked child (gunicorn's pre-fork workers, Celery's prefork pool) never
uses its parent's engine: it builds its own on first use, because the
process id changed. The engine of the process that built it is closed at
interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any, cast

from django.conf import settings as django_settings

from tidings.engine import Tidings
from tidings.settings import Settings
from tidings.wiring import TaskRunnerChoice

_lock = threading.Lock()
_engine: Tidings | None = None
_pid: int | None = None
_atexit_registered = False


#: ``task_runner`` values the engine takes but the settings do not (they are no
#: service's choice): ``sync`` delivers before a publish returns (tests,
#: scripts), ``manual`` waits for ``feeds.admin.drain()``.
_ENGINE_ONLY_RUNNERS = ("sync", "manual")


def _config() -> tuple[dict[str, Any], TaskRunnerChoice | None]:
    config: dict[str, Any] = dict(getattr(django_settings, "TIDINGS", None) or {})
    runner = config.get("task_runner")
    if runner in _ENGINE_ONLY_RUNNERS:
        del config["task_runner"]
        return config, cast(TaskRunnerChoice, runner)
    return config, None


def tidings_settings() -> Settings:
    """``Settings(**settings.TIDINGS)``: the keys are those of :class:`tidings.Settings`
    (a key left out falls back, as everywhere, to its ``TIDINGS_*`` variable,
    ``tidings.toml`` and the default). ``task_runner`` may also be ``"sync"`` or
    ``"manual"``, which the engine takes (:class:`tidings.Tidings`)."""
    return Settings(**_config()[0])


def get_engine() -> Tidings:
    """This process's engine, built (and started) on the first call."""
    global _engine, _pid, _atexit_registered
    engine, pid = _engine, os.getpid()
    if engine is not None and _pid == pid:
        return engine
    with _lock:
        if _engine is not None and _pid == pid:
            return _engine
        # An engine inherited across fork is left alone: its threads stayed in
        # the parent, and closing it here would act on the parent's resources.
        config, runner = _config()
        _engine = Tidings(Settings(**config), task_runner=runner)
        _pid = pid
        if not _atexit_registered:
            atexit.register(close_engine)
            _atexit_registered = True
        return _engine


def close_engine() -> None:
    """Close this process's engine, if it built one; the next :func:`get_engine` builds anew."""
    global _engine, _pid
    with _lock:
        engine, pid = _engine, _pid
        _engine = _pid = None
    if engine is not None and pid == os.getpid():
        engine.close()


def _reset_lock_in_child() -> None:
    # A lock held by another thread at the fork stays held in the child forever.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_lock_in_child)
