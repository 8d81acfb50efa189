"""Writes sent behind: the sender goes on at once, a thread reads the replies
and tells ``done``; every other use of the client waits for the writes sent
before it, so what was written is what is read."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tidings.stores.redis.behind import IDLE_CHECK_SECONDS, BehindPool, WriteBehind
from tidings.stores.redis.transport import ServerScripts, connect, disconnect

pytestmark = pytest.mark.redis

COUNT = "return redis.call('INCR', KEYS[1])"


class Told:
    """What ``done`` was told, and on which thread."""

    def __init__(self) -> None:
        self.errors: list[BaseException | None] = []
        self.threads: list[str] = []
        self.event = threading.Event()

    def __call__(self, error: BaseException | None) -> None:
        self.errors.append(error)
        self.threads.append(threading.current_thread().name)
        self.event.set()


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    made = connect(redis_url)
    yield made
    disconnect(made)


def behind_of(client: Any) -> WriteBehind:
    pool = client.connection_pool
    assert isinstance(pool, BehindPool)
    return pool.behind


def test_what_was_sent_behind_is_read_back_at_once(client: Any) -> None:
    scripts, behind = ServerScripts(client), behind_of(client)
    told = Told()
    for i in range(300):
        behind.submit([scripts.command("SET", f"k{i}", str(i))], told)
        # Another connection of the pool: it waits for the write first.
        assert client.get(f"k{i}") == str(i).encode()
    behind.settle()
    assert told.errors == [None] * 300
    assert set(told.threads) == {"tidings-write-behind"}


def test_several_writers_each_read_their_own(client: Any) -> None:
    scripts, behind = ServerScripts(client), behind_of(client)
    count = scripts.load(COUNT)
    wrong: list[str] = []

    def write(n: int) -> None:
        for i in range(100):
            behind.submit([scripts.command("SET", f"w{n}:{i}", "x")], lambda _e: None)
            if client.get(f"w{n}:{i}") != b"x":
                wrong.append(f"w{n}:{i}")
            behind.submit([scripts.prepare(count, ["n"], [])], lambda _e: None)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert client.get("n") == b"400"


def test_calls_of_no_server_run_after_the_writes_and_only_if_they_succeed(client: Any) -> None:
    scripts, behind = ServerScripts(client), behind_of(client)
    seen: list[bytes | None] = []
    client.set("text", "not a number")
    ok, failed = Told(), Told()
    behind.submit([scripts.command("SET", "a", "1"), lambda: seen.append(client.get("a"))], ok)
    behind.submit([scripts.command("INCR", "text"), lambda: seen.append(b"ran")], failed)
    behind.settle()
    assert seen == [b"1"]  # read on the reading thread, which does not wait for itself
    assert ok.errors == [None]
    assert isinstance(failed.errors[0], redis.ResponseError)
    # The connection stayed in step: the next write and its reply match.
    after = Told()
    behind.submit([scripts.command("SET", "b", "2")], after)
    behind.settle()
    assert after.errors == [None]
    assert client.get("b") == b"2"


def test_a_script_the_server_lost_is_loaded_and_run(client: Any) -> None:
    scripts, behind = ServerScripts(client), behind_of(client)
    count = scripts.load(COUNT)
    for _ in range(2):
        client.script_flush()
        told = Told()
        behind.submit([scripts.prepare(count, ["c"], []), scripts.command("SET", "d", "1")], told)
        behind.settle()
        assert told.errors == [None]
    assert client.get("c") == b"2"


def test_a_connection_the_server_closed_while_idle_is_made_anew(client: Any) -> None:
    scripts, behind = ServerScripts(client), behind_of(client)
    first = Told()
    behind.submit([scripts.command("SET", "x", "1")], first)
    behind.settle()
    client.client_kill_filter(skipme=True, _type="normal")  # the writers' connection too
    now = time.monotonic()
    # Idle past IDLE_CHECK_SECONDS (by its clock): checked before use.
    behind.monotonic = lambda: now + IDLE_CHECK_SECONDS + 0.1
    again = Told()
    behind.submit([scripts.command("SET", "x", "2")], again)
    behind.settle()
    assert again.errors == [None]
    assert client.get("x") == b"2"


def test_health_checks_do_not_take_the_readers_replies(redis_url: str) -> None:
    client = connect(redis_url)
    # A health check due at every use: redis-py reads its own clock, and an
    # interval of a nanosecond has passed by the next send (the URL takes
    # whole seconds only).
    client.connection_pool.connection_kwargs["health_check_interval"] = 1e-9
    try:
        scripts, behind = ServerScripts(client), behind_of(client)
        told = Told()
        for i in range(3):
            behind.submit([scripts.command("SET", "h", str(i))], told)
            assert client.get("h") == str(i).encode()  # (checked, on the pool's side too)
        behind.settle()
        assert told.errors == [None] * 3
        assert client.get("h") == b"2"
    finally:
        disconnect(client)


def test_the_writers_connection_is_not_one_of_the_pools(redis_url: str) -> None:
    client = connect(f"{redis_url}?max_connections=1")
    try:
        scripts, behind = ServerScripts(client), behind_of(client)
        told = Told()
        for i in range(5):
            behind.submit([scripts.command("SET", "m", str(i))], told)
            assert client.get("m") == str(i).encode()  # the pool's one connection
        behind.settle()
        assert told.errors == [None] * 5
    finally:
        disconnect(client)


def test_after_close_calls_are_made_at_once(redis_url: str) -> None:
    client = connect(redis_url)
    scripts, behind = ServerScripts(client), behind_of(client)
    behind.close()
    told = Told()
    behind.submit([scripts.command("SET", "late", "1")], told)
    assert told.threads == [threading.current_thread().name]
    assert told.errors == [None]
    assert not behind.pending()
    disconnect(client)


def test_calls_to_another_client_are_made_at_once(client: Any, redis_url: str) -> None:
    other = redis.Redis.from_url(redis_url)  # a plain pool: nothing behind
    behind = behind_of(client)
    told = Told()
    behind.submit([ServerScripts(other).command("SET", "o", "1")], told)
    assert told.errors == [None]  # before submit returned
    assert told.threads == [threading.current_thread().name]
    assert other.get("o") == b"1"


def test_close_waits_for_the_writes_sent(redis_url: str) -> None:
    client = connect(redis_url)
    scripts, behind = ServerScripts(client), behind_of(client)
    told = Told()
    for i in range(50):
        behind.submit([scripts.command("SET", f"c{i}", "1")], told)
    disconnect(client)
    assert told.errors == [None] * 50
    thread = behind._thread
    assert thread is None or not thread.is_alive()
    check = redis.Redis.from_url(redis_url)
    assert check.get("c49") == b"1"


def test_a_forked_child_writes_behind_on_its_own(client: Any) -> None:
    scripts, behind = ServerScripts(client), behind_of(client)
    behind.submit([scripts.command("SET", "parent", "1")], lambda _e: None)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            told = Told()
            behind.submit([scripts.command("SET", "child", "1")], told)
            ok = client.get("child") == b"1"
            behind.settle()
            code = 0 if ok and told.errors == [None] else 2
        finally:
            os._exit(code)
    wait_for_child(pid)


def wait_for_child(pid: int, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid, "the child hung"
    assert os.waitstatus_to_exitcode(done[1]) == 0
