"""Page reads awaited on the event loop (Redis), against the blocking reads."""

from __future__ import annotations

import asyncio
import socket

import orjson
import pytest

from conftest import EngineFactory
from servers import RedisServer
from tidings import Tidings
from tidings.core import ids
from tidings.core.errors import TidingsError
from tidings.core.results import Page
from tidings.stores.redis import RedisTimelineStore
from tidings.stores.redis.aio import AsyncScripts, async_options

pytestmark = pytest.mark.redis


@pytest.fixture
def store() -> str:
    """Only the Redis store has an async page read (the others read blocking)."""
    return "redis"


def post(feeds: Tidings, feed: str, n: int) -> str:
    actor = feed.split(":")[1]
    return feeds.add_activity(feed, {"actor": actor, "verb": "post", "object": f"p:{n}"}).id


def both(feeds: Tidings, feed: str, limit: int, cursor: str | None) -> Page[bytes]:
    """The async read's page, after checking it is the blocking read's."""
    awaited = asyncio.run(feeds.reads.json_async(feed, limit, cursor))
    blocking = feeds.reads.json(feed, limit, cursor)
    assert awaited == blocking
    return awaited


def ids_of_json(doc: bytes) -> str:
    found: str = orjson.loads(doc)["id"]
    return found


def scripts_of(feeds: Tidings) -> AsyncScripts:
    timeline = feeds.timeline
    assert isinstance(timeline, RedisTimelineStore)
    assert timeline._async is not None
    return timeline._async


def test_pages_match_the_blocking_read(make_engine: EngineFactory) -> None:
    # Given a feed of 12 activities
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    made = [post(feeds, "user:bob", n) for n in range(12)]
    # When it is paged through 5 at a time, both ways
    seen: list[bytes] = []
    cursor = None
    while True:
        page = both(feeds, "timeline:alice", 5, cursor)
        seen += page.results
        if page.next is None:
            break
        cursor = page.next
    # Then both gave the same pages: every activity, newest first
    assert [feeds.read("timeline:alice", 100).results[i].to_json() for i in range(12)] == seen
    assert len(seen) == len(made)
    assert both(feeds, "timeline:nobody", 25, None) == Page([], None)


def test_missing_and_removed_activities_as_the_blocking_read(make_engine: EngineFactory) -> None:
    # Given a feed where one activity is missing from the cache and one id has no activity
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    made = [post(feeds, "user:bob", n) for n in range(6)]
    feeds.cache.delete([made[2]])
    ghost = ids.new_id(ids.id_ms(made[4]))
    feeds.timeline.add(["timeline:alice"], [ghost], feeds.deliverer.cap("timeline"))
    # When it is read asynchronously
    page = asyncio.run(feeds.reads.json_async("timeline:alice", 3))
    # Then the page skips the ghost, hydrates the uncached one and cleans up lazily
    assert [ids_of_json(d) for d in page.results] == made[::-1][:3]
    assert ghost not in feeds.timeline.page(
        "timeline:alice", limit=10, before=None, cap=feeds.deliverer.cap("timeline")
    )
    assert page == feeds.reads.json("timeline:alice", 3)
    second = both(feeds, "timeline:alice", 3, page.next)
    assert [ids_of_json(d) for d in second.results] == made[::-1][3:]


def test_errors_as_the_blocking_read(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    for feed, limit, cursor in [
        ("nope", 25, None),
        ("timeline:a", 0, None),
        ("timeline:a", 5, "x"),
    ]:
        with pytest.raises(TidingsError) as blocking:
            feeds.reads.json(feed, limit, cursor)
        with pytest.raises(type(blocking.value)) as awaited:
            asyncio.run(feeds.reads.json_async(feed, limit, cursor))
        assert str(awaited.value) == str(blocking.value)


def test_a_script_flush_is_recovered(make_engine: EngineFactory) -> None:
    # Given a warm connection pool
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    a = post(feeds, "user:bob", 1)

    async def read_twice_across_a_flush() -> list[str]:
        first = await feeds.reads.json_async("timeline:alice")
        # When the server loses its scripts (as after a restart)
        feeds.timeline.client.script_flush()  # type: ignore[attr-defined]
        second = await feeds.reads.json_async("timeline:alice")
        return [ids_of_json(d) for d in first.results + second.results]

    # Then the script is loaded again and the read answers
    assert asyncio.run(read_twice_across_a_flush()) == [a, a]
    assert scripts_of(feeds).opened == 1


def test_a_dropped_connection_is_replaced(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    a = post(feeds, "user:bob", 1)
    client = feeds.timeline.client  # type: ignore[attr-defined]

    async def read_across_a_kill() -> list[str]:
        first = await feeds.reads.json_async("timeline:alice")
        # When the server closes the idle connection
        client.client_kill_filter(_type="normal", skipme=True)
        second = await feeds.reads.json_async("timeline:alice")
        return [ids_of_json(d) for d in first.results + second.results]

    # Then the next read opens another one and answers
    assert asyncio.run(read_across_a_kill()) == [a, a]
    assert scripts_of(feeds).opened == 2


def test_a_cancelled_call_leaves_no_half_read_connection(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    scripts = scripts_of(feeds)
    client = feeds.timeline.client  # type: ignore[attr-defined]
    # A script that keeps Redis busy long enough to be cancelled while awaited.
    slow = client.register_script("local i = 0 while i < 3000000 do i = i + 1 end return 'slow'")
    fast = client.register_script("return ARGV[1]")

    async def cancel_then_call() -> bytes:
        # Given a call waiting for its reply on a warm connection, the script loaded
        assert await scripts.call(fast, [], ["warm"]) == b"warm"
        slow.sha = client.script_load(slow.script)
        task = asyncio.create_task(scripts.call(slow, [], []))
        for _ in range(10):
            await asyncio.sleep(0)
        # When it is cancelled
        assert task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Then its connection, which the late reply would arrive on, is not reused
        reply: bytes = await scripts.call(fast, [], ["fast"])
        return reply

    assert asyncio.run(cancel_then_call()) == b"fast"
    assert scripts.opened == 2


def test_each_event_loop_gets_its_own_connections(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    for _ in range(3):  # a loop per run; the last's connections closed with the engine
        assert asyncio.run(feeds.reads.json_async("timeline:alice")) == Page([], None)
    assert scripts_of(feeds).opened == 3


def test_a_server_that_is_down_fails_the_read(redis_server: RedisServer) -> None:
    import redis

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    scripts = AsyncScripts({"host": "127.0.0.1", "port": port})

    class Script:
        sha, script = "0" * 40, "return 1"

    with pytest.raises(redis.ConnectionError):
        asyncio.run(scripts.call(Script(), [], []))
    scripts.close()


def test_the_blocking_clients_server_and_options(make_engine: EngineFactory) -> None:
    import redis

    unix = async_options(redis.Redis.from_url("unix:///tmp/r.sock?db=2"))
    assert unix is not None
    assert (unix["unix_socket_path"], unix["db"]) == ("/tmp/r.sock", 2)
    tls = async_options(redis.Redis.from_url("rediss://u:p@example.com:1?ssl_cert_reqs=none"))
    assert tls is not None
    assert (tls["host"], tls["port"], tls["ssl"], tls["ssl_cert_reqs"]) == (
        "example.com",
        1,
        True,
        "none",
    )
    assert (tls["username"], tls["password"]) == ("u", "p")
    # What only the blocking client can do, or speak to, reads blocking.
    assert async_options(redis.Redis(ssl=True, ssl_validate_ocsp=True)) is None
    assert async_options(object()) is None
    feeds = make_engine()
    store = RedisTimelineStore(feeds.timeline.client, cluster=True)  # type: ignore[attr-defined]
    assert store._async is None
