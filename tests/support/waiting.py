"""Waiting for an engine's runner in tests."""

from __future__ import annotations

import time

from tidings import Tidings


def wait_delivered(engine: Tidings, timeout: float = 20.0) -> None:
    """Until nothing is pending (fails after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while engine.admin.pending():
        assert time.monotonic() < deadline, "deliveries still pending"
        time.sleep(0.01)
