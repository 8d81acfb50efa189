"""Objects with threads or locks of their own, made right again in a forked
child (a Celery prefork worker, an app server's workers).

A fork copies only the thread that called it, and copies every lock as it
was: a lock another thread held stays held in the child, for ever. Objects
registered here are told around each fork (methods they may define):
``_before_fork`` in the parent (to hold what must not be mid-use),
``_after_fork_in_parent`` and ``_after_fork_in_child`` (to start anew).
"""

from __future__ import annotations

import os
import weakref
from typing import Any

_live: weakref.WeakSet[Any] = weakref.WeakSet()
#: What the fork under way told ``_before_fork``, told again after it.
_told: list[Any] = []


def register(obj: Any) -> None:
    """Tell ``obj`` of every fork while it lives."""
    _live.add(obj)


def _call(objects: list[Any], hook: str) -> None:
    for obj in objects:
        method = getattr(obj, hook, None)
        if method is not None:
            method()


def _snapshot() -> list[Any]:
    # (Another thread registering meanwhile makes a WeakSet's iteration fail.)
    for _ in range(100):
        try:
            return list(_live)
        except RuntimeError:
            continue
    return list(_live)


def _before() -> None:
    _told[:] = _snapshot()
    _call(_told, "_before_fork")


def _after_in_parent() -> None:
    _call(_told, "_after_fork_in_parent")
    _told.clear()


def _after_in_child() -> None:
    # Every live object, not only those told before: the child has one thread.
    _told.clear()
    _call(list(_live), "_after_fork_in_child")


os.register_at_fork(
    before=_before, after_in_parent=_after_in_parent, after_in_child=_after_in_child
)
