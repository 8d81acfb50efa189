"""Iterating in a background thread, a few items ahead.

A delivery past its first chunk prepares the next chunk (reading followers
from the canonical store, planning the writes) while the timeline store
writes the current one, rather than the two waiting on each other in turn.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class _End:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class ReadAhead(Generic[T]):
    """Iterate ``items`` in a background thread, up to ``depth`` items ahead.

    The thread starts on entering the ``with`` block, so it works while the
    caller is still busy with something else; leaving the block (also early)
    stops it. Errors of the thread are raised to the consumer.
    """

    def __init__(self, items: Iterator[T], depth: int) -> None:
        self._items = items
        self._buffer: queue.Queue[T | _End] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._produce, name="tidings-read-ahead", daemon=True
        )

    def _put(self, item: T | _End) -> bool:
        while not self._stop.is_set():
            try:
                self._buffer.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._items:
                if not self._put(item):
                    return
            self._put(_End())
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(_End(exc))

    def __enter__(self) -> ReadAhead[T]:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def __iter__(self) -> Iterator[T]:
        while True:
            got = self._buffer.get()
            if isinstance(got, _End):
                if got.error is not None:
                    raise got.error
                return
            yield got
