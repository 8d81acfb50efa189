"""What the engine asks of a task runner.

The engine only says "there is work" (``notify``); a runner decides where and
when the work runs. The unit of work is an outbox row carried out by
:class:`tidings.delivery.Deliverer`, which a distributed runner can split by
follower range because progress is recorded per chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from tidings.core.readers import PartTier

if TYPE_CHECKING:
    from tidings.core.fanout import Strategy
    from tidings.delivery.deliverer import Deliverer

#: The queue of a distributed runner's parts, by delivery tier. Names carry
#: the prefix so that tidings can share a broker with other apps.
QUEUES = {
    PartTier.HIGH: "tidings.high",
    PartTier.LOW: "tidings.low",
    PartTier.ALL: "tidings.low",
}
#: What a worker consumes by default, most urgent first ("tidings": tasks
#: sent by versions before the tiers).
WORKER_QUEUES = ("tidings.high", "tidings.low", "tidings")


class TaskRunner(Protocol):
    def start(self) -> None: ...

    def notify(self) -> None:
        """New outbox rows were committed."""

    def stop(self) -> None: ...


class WorkerAdmin(Protocol):
    """The upkeep a worker runs on a schedule (``feeds.admin``)."""

    def sweep_readers(self) -> list[str]: ...

    def reclassify(self) -> list[tuple[str, Strategy, Strategy]]: ...


class WorkerEngine(Protocol):
    """What a worker process asks of the engine it runs tasks with.

    The Celery module takes a factory of these rather than importing the
    engine, which would import the runners back (an import cycle) and tie
    the worker's set-up to one way of building an engine.
    """

    @property
    def deliverer(self) -> Deliverer: ...

    @property
    def admin(self) -> WorkerAdmin: ...

    def close(self) -> None: ...


#: Builds the engine a worker process delivers with (one per process, made on
#: first use, so prefork children never share their parent's connections).
EngineFactory = Callable[[], WorkerEngine]
