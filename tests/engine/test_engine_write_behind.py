"""A publish with the thread runner and the Redis store: its writes after the
commit go behind (not waited for), and still every read here sees them, the
runner writes the own feed once, and nothing accepted is lost when Redis
refuses the writes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import redis

from tidings import Settings, StoreName, Tidings
from tidings.core.events import EventType
from tidings.delivery.commit import GroupCommit
from tidings.stores.redis.behind import WriteBehind
from waiting import wait_delivered, wait_until

pytestmark = pytest.mark.redis

DEADLINE_S = 30


@pytest.fixture
def engine(tmp_path: Path, redis_url: str) -> Iterator[Tidings]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/canonical.db",
        timeline_store=StoreName.REDIS,
        redis_url=redis_url,
    )
    with Tidings(settings, task_runner="thread") as engine:
        yield engine


def post(engine: Tidings, n: int) -> str:
    activity = {"actor": "bob", "verb": "post", "object": f"photo:{n}"}
    return engine.add_activity("user:bob", activity).id


def test_the_thread_runner_on_redis_writes_behind(engine: Tidings) -> None:
    assert isinstance(engine.parts.sender, WriteBehind)


def test_each_publish_is_read_back_at_once(engine: Tidings) -> None:
    engine.follow_many([(f"timeline:u{i}", "user:bob") for i in range(10)])
    made = []
    for n in range(100):
        made.append(post(engine, n))
        # (Among the newest: ids within one millisecond sort in any order.)
        assert made[-1] in {a.id for a in engine.read("user:bob", limit=5).results}
        assert engine.get_activity(made[-1]).object == f"photo:{n}"
    wait_delivered(engine, DEADLINE_S)
    for i in range(10):
        held = [a.id for a in engine.read(f"timeline:u{i}", limit=100).results]
        assert sorted(held) == sorted(made)


def test_the_runner_writes_and_announces_the_own_feed_once(engine: Tidings) -> None:
    engine.follow("timeline:alice", "user:bob")
    with engine.live.subscribe("user:bob") as own:
        made = [post(engine, n) for n in range(100)]
        wait_delivered(engine, DEADLINE_S)
        # A last publish, announced after every pass that could repeat one of
        # the others: once its event is in, any repeat would be too.
        last = post(engine, 100)
        seen: Counter[str] = Counter()
        deadline = time.monotonic() + DEADLINE_S
        while not seen[last]:
            assert time.monotonic() < deadline, "the last publish was never announced"
            event = own.get(timeout=0.1)
            if event is not None and event.type == EventType.ACTIVITY_ADDED:
                seen[str(event.data.get("id"))] += 1
    assert seen == dict.fromkeys([*made, last], 1)


def test_a_read_on_the_event_loop_waits_for_the_writes_too(engine: Tidings) -> None:
    async def publish_and_read() -> list[str]:
        missing = []
        for n in range(50):
            made = post(engine, n)
            page = await engine.reads.json_async("user:bob", limit=5)
            if not any(made.encode() in doc for doc in page.results):
                missing.append(made)
        return missing

    assert asyncio.run(publish_and_read()) == []


def test_writes_redis_refuses_are_left_to_the_runner(
    engine: Tidings, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine.follow("timeline:alice", "user:bob")
    admin = redis.Redis.from_url(redis_url)
    admin.config_set("maxmemory", "1")  # every write refused: OOM
    try:
        made = post(engine, 0)  # accepted: committed with its outbox row
        # Its writes sent behind the publish are refused (and logged so).
        wait_until(
            lambda: any("failed" in r.getMessage() for r in caplog.records),
            DEADLINE_S,
            "for Redis to refuse the publish's writes",
        )
    finally:
        admin.config_set("maxmemory", "0")
    wait_delivered(engine, DEADLINE_S)
    assert [a.id for a in engine.read("user:bob").results] == [made]
    assert [a.id for a in engine.read("timeline:alice").results] == [made]


def test_publishers_on_many_threads_each_read_their_own(engine: Tidings) -> None:
    wrong: list[str] = []

    def publish(t: int) -> None:
        for n in range(50):
            activity = {"actor": f"p{t}", "verb": "post", "object": f"o:{n}"}
            made = engine.add_activity(f"user:p{t}", activity).id
            if made not in {a.id for a in engine.read(f"user:p{t}", limit=5).results}:
                wrong.append(made)

    threads = [threading.Thread(target=publish, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_a_coroutine_gets_its_result_once_the_writes_are_settled() -> None:
    order: list[str] = []
    settled = threading.Event()

    def write(items: Sequence[int]) -> list[int]:
        order.append("written")
        return [i * 2 for i in items]

    def settle() -> None:
        time.sleep(0.05)
        order.append("settled")
        settled.set()

    commits: GroupCommit[int, int] = GroupCommit(write, settle=settle)
    try:
        assert asyncio.run(commits.submit_async(21)) == 42
        assert order == ["written", "settled"]
        # A publishing thread does not wait for it.
        order.clear()
        assert commits.submit(1) == 2
        assert order == ["written"]
    finally:
        commits.close()
