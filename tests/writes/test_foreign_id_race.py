"""Two processes publishing the same ``foreign_id`` at once (two engines on one
PostgreSQL database): both get the one stored activity, never an error."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tidings import Settings, StoreName, Tidings

ROUNDS = 40


@pytest.mark.postgres
def test_racing_publishes_of_one_foreign_id_get_the_same_activity(postgres_url: str) -> None:
    settings = Settings(database_url=postgres_url, timeline_store=StoreName.SQL)
    with (
        Tidings(settings, task_runner="manual") as one,
        Tidings(settings, task_runner="manual") as two,
    ):
        barrier = threading.Barrier(2)

        def publish(engine: Tidings, n: int) -> str:
            barrier.wait()
            data = {"actor": "bob", "verb": "post", "object": f"p:{n}", "foreign_id": f"f{n}"}
            return engine.add_activity("user:bob", data).id

        with ThreadPoolExecutor(2) as pool:
            for n in range(ROUNDS):
                a, b = pool.submit(publish, one, n), pool.submit(publish, two, n)
                assert a.result() == b.result()
        page = one.read("user:bob", limit=100)
        assert len(page.results) == ROUNDS
