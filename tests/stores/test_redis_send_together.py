"""Prepared Redis calls sent together: one round trip per client (whichever
store prepared them), replies in order, scripts the server lost loaded again,
errors raised without poisoning the connection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import redis
from redis.exceptions import ResponseError

from tidings.stores.base import send_together
from tidings.stores.redis.transport import ServerScripts

pytestmark = pytest.mark.redis


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


def test_stores_sharing_a_client_share_the_round_trip(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    one, two = ServerScripts(client), ServerScripts(client)  # as two stores make them
    sent: list[int] = []
    send = ServerScripts.send

    def counted(self: ServerScripts, calls: Sequence[Any]) -> list[Any]:
        sent.append(len(calls))
        return send(self, calls)

    ServerScripts.send = counted  # type: ignore[method-assign]
    try:
        send_together([one.command("SET", "a", "1"), two.command("SET", "b", "2")])
    finally:
        ServerScripts.send = send  # type: ignore[method-assign]
    assert sent == [2]
    assert client.mget("a", "b") == [b"1", b"2"]
