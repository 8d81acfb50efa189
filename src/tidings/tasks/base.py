"""What the engine asks of a task runner.

The engine only says "there is work" (``notify``); a runner decides where and
when the work runs. The unit of work is an outbox row carried out by
:class:`tidings.delivery.Deliverer`, which a distributed runner can split by
follower range because progress is recorded per chunk.
"""

from __future__ import annotations

from typing import Protocol

#: The queue of a distributed runner's parts, by delivery tier. Names carry
#: the prefix so that tidings can share a broker with other apps.
QUEUES = {"high": "tidings.high", "low": "tidings.low", "all": "tidings.low"}
#: What a worker consumes by default, most urgent first ("tidings": tasks
#: sent by versions before the tiers).
WORKER_QUEUES = ("tidings.high", "tidings.low", "tidings")


class Runner(Protocol):
    def start(self) -> None: ...

    def notify(self) -> None:
        """New outbox rows were committed."""

    def stop(self) -> None: ...
