"""What the engine asks of a task runner.

The engine only says "there is work" (``notify``); a runner decides where and
when the work runs. The unit of work is an outbox row carried out by
:class:`tidings.delivery.Deliverer`, which a distributed runner can split by
follower range because progress is recorded per chunk.
"""

from __future__ import annotations

from typing import Protocol


class Runner(Protocol):
    def start(self) -> None: ...

    def notify(self) -> None:
        """New outbox rows were committed."""

    def stop(self) -> None: ...
