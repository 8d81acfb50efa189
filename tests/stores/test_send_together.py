"""send_together: the calls prepared for one server in one round trip when
they come one after another, every other call made in order after them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tidings.stores.base import send_together


class Server:
    """A stand-in for a server's ``send`` (the grouping is what is tested)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def send(self, calls: Sequence[Any]) -> list[Any]:
        self.log.append(f"{self.name}:{','.join(c.label for c in calls)}")
        return [None] * len(calls)


class Call:
    def __init__(self, label: str, log: list[str], server: Server | None = None) -> None:
        self.label, self.log = label, log
        if server is not None:
            self.server = server

    def __call__(self) -> None:
        self.log.append(self.label)


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        # (label, server or "" for a call made alone)
        ([("a", ""), ("b", "")], ["a", "b"]),
        ([("a", "x"), ("b", "x"), ("c", "x")], ["x:a,b,c"]),
        # a call without a server waits for those before it to be sent
        ([("a", "x"), ("b", ""), ("c", "x")], ["x:a", "b", "x:c"]),
        ([("a", "x"), ("b", "y"), ("c", "x"), ("d", "")], ["x:a,c", "y:b", "d"]),
        ([("a", ""), ("b", "x"), ("c", "x")], ["a", "x:b,c"]),
        ([], []),
    ],
)
def test_calls_are_grouped_by_server(calls: list[tuple[str, str]], expected: list[str]) -> None:
    log: list[str] = []
    servers = {name: Server(name, log) for name in ("x", "y")}
    made: list[Callable[[], Any]] = [
        Call(label, log, servers[s] if s else None) for label, s in calls
    ]
    send_together(made)
    assert log == expected
