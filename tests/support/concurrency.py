"""Running test code in several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence


def at_once(
    calls: Sequence[Callable[[], object]], *, expected: tuple[type[BaseException], ...] = ()
) -> list[BaseException]:
    """Run ``calls`` in threads released together; returns what they raised
    beyond the ``expected`` exceptions (a race's loser may raise those)."""
    start = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        start.wait()
        try:
            call()
        except expected:
            pass
        except BaseException as exc:  # returned to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
