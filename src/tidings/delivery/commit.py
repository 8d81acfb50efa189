"""Group commit: publishes from many threads share transactions.

A publish is a write transaction (the activity and its outbox row). Threads
publishing at once would each wait for the write lock (SQLite takes one
writer at a time, and its busy handler sleeps in steps of milliseconds) and
each pay a commit. Instead each publish joins a queue; one of the waiting
threads, the leader, writes everything queued in one transaction and hands
each thread its result. While the leader writes, the queue fills again, so
the busier the publishers, the larger the groups: the cost of a commit is
shared, never multiplied.

The leader writes one group, including its own publish, then hands the lead
to the oldest thread still queued, so no thread serves others for long.
A group that fails is written again one publish at a time, so an error
reaches only the publish that caused it.

Coroutines (the HTTP service's publish route) submit with
:meth:`GroupCommit.submit_async` instead: a thread of the group commit's own
writes their groups and hands each result back to its event loop, so a
publish costs the event loop no thread of its own and never blocks it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

log = logging.getLogger("tidings.delivery.commit")

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(eq=False)
class _Waiter(Generic[Item, Result]):
    item: Item
    woken: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    done: bool = False
    result: Result | None = None
    error: BaseException | None = None


class GroupCommit(Generic[Item, Result]):
    """Runs ``write`` over groups of the items submitted from many threads;
    ``write`` returns one result per item, in order."""

    def __init__(
        self,
        write: Callable[[Sequence[Item]], list[Result]],
        *,
        settle: Callable[[], None] | None = None,
    ) -> None:
        self._write = write
        #: Waited for before coroutines get their results: writes that
        #: ``write`` left to finish on another thread (stores.redis.behind).
        self._settle = settle
        self._lock = threading.Lock()
        self._queue: list[_Waiter[Item, Result]] = []
        self._leading = False
        # Coroutines' items, written by a thread of their own (started on first use).
        self._pending: list[tuple[Item, asyncio.AbstractEventLoop, asyncio.Future[Result]]] = []
        self._ready = threading.Condition()
        self._writer: threading.Thread | None = None
        self._closed = False

    async def submit_async(self, item: Item) -> Result:
        """:meth:`submit` for a coroutine: written by the group commit's thread,
        in a group with the items submitted meanwhile; the event loop goes on."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the group commit is closed")
            self._pending.append((item, loop, future))
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_pending, name="tidings-group-commit", daemon=True
                )
                self._writer.start()
            self._ready.notify()
        return await future

    def close(self) -> None:
        """Stop the writer thread once it has written what was submitted."""
        with self._ready:
            self._closed = True
            self._ready.notify()
            writer = self._writer
        if writer is not None:
            writer.join()

    def _write_pending(self) -> None:
        while True:
            with self._ready:
                while not self._pending and not self._closed:
                    self._ready.wait()
                if not self._pending:
                    return  # closed, and nothing left to write
                group, self._pending = self._pending, []
            waiters: list[_Waiter[Item, Result]] = [_Waiter(item) for item, _, _ in group]
            self._run(waiters)
            if self._settle is not None:
                try:
                    self._settle()
                except Exception:
                    # Stored all the same (their runner makes what is missing):
                    # an error here would have a client publish them again.
                    log.exception("waiting for the writes of %d publishes failed", len(group))
            for waiter, (_, loop, future) in zip(waiters, group, strict=True):
                loop.call_soon_threadsafe(_settle, future, waiter.result, waiter.error)

    def submit(self, item: Item) -> Result:
        """``write([item])``'s result, written in a group with the items other
        threads submit meanwhile."""
        me: _Waiter[Item, Result] = _Waiter(item)
        with self._lock:
            self._queue.append(me)
            if not self._leading:
                self._leading = me.lead = True
        while not me.done:
            if me.lead:
                self._lead()
            else:
                me.woken.wait()
                me.woken.clear()
        if me.error is not None:
            raise me.error
        return me.result  # type: ignore[return-value]

    def _lead(self) -> None:
        with self._lock:
            group, self._queue = self._queue, []
        try:
            self._run(group)
        finally:
            # Even when interrupted: nobody may wait for a leader that is gone.
            with self._lock:
                if self._queue:
                    # The oldest waiter leads the next group.
                    self._queue[0].lead = True
                    self._queue[0].woken.set()
                else:
                    self._leading = False
            for waiter in group:
                if waiter.result is None and waiter.error is None:
                    waiter.error = RuntimeError("the group commit was interrupted")
                waiter.done = True
                waiter.woken.set()

    def _run(self, group: Sequence[_Waiter[Item, Result]]) -> None:
        try:
            results = self._write([w.item for w in group])
        except Exception as exc:
            if len(group) == 1:
                group[0].error = exc
                return
            for waiter in group:  # alone, so the error finds its publish
                self._run([waiter])
            return
        for waiter, result in zip(group, results, strict=True):
            waiter.result = result


def _settle(
    future: asyncio.Future[Result], result: Result | None, error: BaseException | None
) -> None:
    if future.done():  # its request was cancelled meanwhile; the write stands
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]
