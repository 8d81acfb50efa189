"""Shared fixtures: private Redis and PostgreSQL servers started by the suite."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from servers import PostgresServer, RedisServer

_db_counter = itertools.count(1)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One private redis-server for the whole session."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One private PostgreSQL cluster for the whole session."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """URL of the private Redis server, emptied (FLUSHALL) before the test."""
    if not redis_server.running:  # a previous test may have stopped it
        redis_server.restart()
    redis_server.flushall()
    return redis_server.url


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """SQLAlchemy URL of a fresh, empty database that is dropped after the test."""
    name = f"test_{next(_db_counter)}"
    url = postgres_server.new_database(name)
    yield url
    postgres_server.drop_database(name)
