"""Prepared Redis calls sent together: one round trip per server, replies in
order, scripts the server lost loaded again, errors raised without poisoning
the connection; other calls made one by one, in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import redis
from redis.exceptions import ResponseError

from tidings.stores.base import send_together
from tidings.stores.redis.transport import ServerScripts

pytestmark = pytest.mark.redis


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
        ([("a", "x"), ("b", ""), ("c", "x")], ["b", "x:a,c"]),
        ([("a", "x"), ("b", "y"), ("c", "x"), ("d", "")], ["d", "x:a,c", "y:b"]),
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


ECHO = "return ARGV[1]"
COUNT = "return redis.call('INCR', KEYS[1])"


def test_one_round_trip_gives_every_reply_in_order(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    scripts = ServerScripts(client)
    echo, count = scripts.load(ECHO), scripts.load(COUNT)
    client.script_flush()  # neither is cached on the server: both loaded, in order
    calls = [
        scripts.prepare(echo, [], ["one"]),
        scripts.prepare(count, ["n"], []),
        scripts.command("SET", "k", "v"),
        scripts.prepare(count, ["n"], []),
        scripts.command("DEL", "k"),
    ]
    assert scripts.send(calls) == [b"one", 1, b"OK", 2, 1]
    assert scripts.send(calls[:2]) == [b"one", 3]  # cached now
    assert calls[1]() == 4  # alone


def test_an_error_reply_is_raised_and_the_connection_stays_usable(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    scripts = ServerScripts(client)
    client.set("text", "not a number")
    calls = [scripts.command("INCR", "text"), scripts.command("SET", "after", "1")]
    with pytest.raises(ResponseError):
        scripts.send(calls)
    # The SET was sent all the same (writes sent together are idempotent), and
    # the connection's unread reply was dropped with it.
    assert scripts.send([scripts.command("GET", "after")]) == [b"1"]
    assert client.ping()
