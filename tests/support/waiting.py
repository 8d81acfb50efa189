"""Waiting in tests: for an engine's runner, or for any condition, always
with a bound (a test never sleeps a fixed time and hopes)."""

from __future__ import annotations

import time
from collections.abc import Callable

from tidings import Tidings


def wait_until(condition: Callable[[], object], seconds: float = 10.0, what: str = "") -> None:
    """Until ``condition()`` is true (fails after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting {what or 'for the condition'}"
        time.sleep(0.01)


def wait_delivered(engine: Tidings, timeout: float = 20.0) -> None:
    """Until nothing is pending (fails after ``timeout`` seconds)."""
    wait_until(lambda: not engine.admin.pending(), timeout, "for deliveries still pending")
