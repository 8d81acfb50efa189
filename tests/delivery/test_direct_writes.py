"""DirectWrites: what a publish wrote itself, so its runner does not write it
(and announce it) again, including while the publish's writes are under way."""

from __future__ import annotations

import threading
import time

import pytest

from tidings.delivery import batch
from tidings.delivery.batch import DirectWrites


def taken_while(direct: DirectWrites, activity_id: str, then: str) -> tuple[bool, float]:
    """``take`` on another thread while the flight ends as ``then`` says,
    once ``take`` waits for it; what it returned and how long it waited."""
    out: list[tuple[bool, float]] = []
    waiting = threading.Event()

    class Watched(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            waiting.set()
            return super().wait(timeout)

    direct._landed = Watched(direct._lock)

    def take() -> None:
        start = time.monotonic()
        out.append((direct.take(activity_id), time.monotonic() - start))

    taker = threading.Thread(target=take)
    taker.start()
    assert waiting.wait(5), "take did not wait for the flight"
    assert not out  # still waiting
    if then == "written":
        direct.add_many([activity_id])
    else:
        direct.drop([activity_id])
    taker.join(5)
    return out[0]


@pytest.mark.parametrize(
    ("then", "taken"),
    [("written", True), ("failed", False)],
)
def test_a_runner_waits_for_writes_under_way(then: str, taken: bool) -> None:
    direct = DirectWrites()
    direct.begin(["a"])
    got, _ = taken_while(direct, "a", then)
    assert got is taken


def test_writes_not_under_way_are_answered_at_once() -> None:
    direct = DirectWrites()
    direct.begin(["a"])
    direct.add_many(["b"])
    assert direct.take("b") is True
    assert direct.take("b") is False  # taken: forgotten
    assert direct.take("c") is False


def test_a_flight_that_never_ends_is_waited_for_a_while_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batch, "FLIGHT_WAIT_SECONDS", 0.05)
    direct = DirectWrites()
    direct.begin(["a"])
    start = time.monotonic()
    assert direct.take("a") is False  # made again by the runner: idempotent
    assert 0.04 <= time.monotonic() - start < 2


def test_forwarded_writes_end_their_flight() -> None:
    direct = DirectWrites()
    sent: list[list[str]] = []
    direct.forward = lambda ids: sent.append(list(ids))
    direct.begin(["a"])
    direct.add_many(["a"])
    assert sent == [["a"]]
    start = time.monotonic()
    assert direct.take("a") is False  # kept by the other process, not here
    assert time.monotonic() - start < 1
