"""No route holds up the event loop: blocking engine calls run in threads.

A worker serves many connections on one event loop; a route that calls a
blocking method on it (a SQL query, a Redis round trip, a write transaction
waiting for a lock) stalls every other request of that worker meanwhile. The
test holds the SQLite write lock in another thread while an aggregated read with
``mark_seen`` (a write) waits for it, and watches the loop keep ticking.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from pathlib import Path

import httpx

from http_server import SECRET
from tidings import Settings, StoreName, Tidings
from tidings.http import create_app
from tidings.http.auth import mint

#: How long the other thread holds the write lock.
HOLD_SECONDS = 0.4
#: The longest the loop may go without running a ready task: scheduling
#: noise on a busy machine, far below the hold.
MAX_STALL_SECONDS = 0.1


async def longest_stall(done: asyncio.Event) -> float:
    """The longest gap between ticks of a 1 ms sleep loop until ``done``."""
    worst, last = 0.0, time.perf_counter()
    while not done.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        worst, last = max(worst, now - last), now
    return worst


def hold_write_lock(engine: Tidings, locked: threading.Event) -> None:
    with engine.db.write() as conn:
        # A write takes SQLite's lock; hold it until the request has waited.
        conn.exec_driver_sql("UPDATE tidings_feed_stats SET followers = followers WHERE 0")
        locked.set()
        time.sleep(HOLD_SECONDS)


def test_aggregated_read_with_mark_seen_does_not_block_the_loop(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'loop.db'}",
        timeline_store=StoreName.SQL,
        secret=SECRET,
    )
    with Tidings(settings, task_runner="sync") as engine:
        engine.add_activity(
            "user:bob",
            {"actor": "bob", "verb": "like", "object": "photo:1", "to": ["notification:carol"]},
        )
        app = create_app(engine)
        headers = {"authorization": f"Bearer {mint(SECRET, 'carol')}"}

        async def scenario() -> tuple[float, httpx.Response]:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                locked = threading.Event()
                holder = threading.Thread(target=hold_write_lock, args=(engine, locked))
                holder.start()
                await asyncio.to_thread(locked.wait)
                done = asyncio.Event()
                ticker = asyncio.create_task(longest_stall(done))
                await asyncio.sleep(0.01)
                response = await client.get(
                    "/v1/feeds/notification/carol", params={"mark_seen": "true"}, headers=headers
                )
                done.set()
                stall = await ticker
                await asyncio.to_thread(holder.join)
                return stall, response

        # A collection of what earlier tests left (under pytest-xdist, on a
        # busy machine) can pause the loop by itself; that is not a blocking
        # route, so it is kept out of the measurement.
        gc.collect()
        gc.disable()
        try:
            stall, response = asyncio.run(scenario())
        finally:
            gc.enable()
    assert response.status_code == 200
    assert response.json()["unseen"] == 0
    assert stall < MAX_STALL_SECONDS, f"the event loop stalled {stall * 1000:.0f} ms"
