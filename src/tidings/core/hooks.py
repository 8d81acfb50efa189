"""Hooks: how a lower layer tells a higher one something without importing it.

A part that has news to give (the planner: "these feeds were written")
declares a callback type for it and takes a :class:`Hook` of that type at
construction. Wiring connects the higher layer's listener before the engine
starts. A hook exists because the parts form a cycle at construction (the
live events need the reads, the reads need the task runner, the task runner
needs the deliverer that tells the live events): the hook is built first,
handed down, and connected once its listener exists. Nothing sets attributes
on another object after construction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, ParamSpec

P = ParamSpec("P")


class Hook(Generic[P]):
    """A named point a lower layer calls; the listeners wiring connected run
    in the order they were connected, in the caller's thread. With none
    connected, a call does nothing."""

    __slots__ = ("_listeners", "name")

    def __init__(self, name: str) -> None:
        #: What the hook tells, for logs and reprs ("deliveries written").
        self.name = name
        self._listeners: tuple[Callable[P, object], ...] = ()

    def connect(self, listener: Callable[P, object]) -> None:
        """Call ``listener`` on every call from now on."""
        self._listeners = (*self._listeners, listener)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for listener in self._listeners:
            listener(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Hook({self.name!r}, {len(self._listeners)} listener(s))"
