"""The backends the store contracts run on: memory (the reference), SQL on
SQLite and PostgreSQL, and Redis on one server and on a cluster.

A backend is the timeline store, the aggregate store and the activity cache an
engine builds for that store setting, on one fresh database or Redis, plus
what the contracts need to know of it: where its stores find activity JSON
to return in passing, and whether its cache keeps anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import insert

from tidings.canonical.db import Database
from tidings.canonical.schema import activities
from tidings.stores.base import ActivityCache, AggregateStore, NoCache, TimelineStore
from tidings.stores.memory import MemoryAggregateStore, MemoryTimelineStore
from tidings.stores.redis import (
    RedisActivityCache,
    RedisAggregateStore,
    RedisTimelineStore,
    connect,
    disconnect,
)
from tidings.stores.sql import SqlAggregateStore, SqlTimelineStore

#: "cluster" is the Redis stores on the private 3-master Redis Cluster.
BACKENDS = ("memory", "sqlite", "postgres", "redis", "cluster")

#: (version, JSON) by activity id, as the engine hands them to a store or cache.
Docs = Mapping[str, tuple[int, bytes]]


def _no_docs(docs: Docs) -> None:
    return None


@dataclass
class Backend:
    name: str
    timeline: TimelineStore
    aggregates: AggregateStore
    cache: ActivityCache
    #: Stores activity JSON where this backend's page reads find it in passing
    #: (``page_docs``, ``page(docs=True)``): the activities table for SQL, the
    #: activity cache for Redis.
    store_docs: Callable[[Docs], None]
    #: Page reads return the stored JSON of every id they show (else none):
    #: SQL joins its activities table, one Redis server reads the cache in the
    #: page script; memory holds no activities, and on a cluster the cache's
    #: keys live on other nodes than the feed's.
    docs_in_passing: bool
    #: The cache keeps what is written (a miss is always allowed, NoCache
    #: misses always).
    caches: bool


@contextmanager
def open_backend(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The stores of ``kind`` on a fresh database or emptied Redis, closed after."""
    if kind == "memory":
        yield Backend(
            kind,
            MemoryTimelineStore(),
            MemoryAggregateStore(),
            NoCache(),
            store_docs=_no_docs,
            docs_in_passing=False,
            caches=False,
        )
    elif kind in ("redis", "cluster"):
        with _redis(kind, request) as backend:
            yield backend
    else:
        url = (
            f"sqlite:///{tmp_path / 'b.db'}"
            if kind == "sqlite"
            else request.getfixturevalue("postgres_url")
        )
        with _sql(kind, url) as backend:
            yield backend


@contextmanager
def _redis(kind: str, request: pytest.FixtureRequest) -> Iterator[Backend]:
    url: str = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    client = connect(url)
    timeline = RedisTimelineStore(client, "contract")
    aggregates = RedisAggregateStore(client, "contract")
    cache = RedisActivityCache(client, "contract")
    try:
        yield Backend(
            kind,
            timeline,
            aggregates,
            cache,
            store_docs=cache.put_many,
            docs_in_passing=kind == "redis",
            caches=True,
        )
    finally:
        timeline.close()
        aggregates.close()
        disconnect(client)


@contextmanager
def _sql(kind: str, url: str) -> Iterator[Backend]:
    db = Database(url)
    db.migrate()

    def store_docs(docs: Docs) -> None:
        rows = [
            {"id": a, "feed": "user:contract", "doc": doc, "version": version}
            for a, (version, doc) in docs.items()
        ]
        with db.write() as conn:
            conn.execute(insert(activities), rows)

    timeline, aggregates = SqlTimelineStore(db), SqlAggregateStore(db)
    try:
        yield Backend(
            kind,
            timeline,
            aggregates,
            NoCache(),
            store_docs=store_docs,
            docs_in_passing=True,
            caches=False,
        )
    finally:
        timeline.close()
        aggregates.close()
        db.close()
