"""``tidings serve`` with getstream's v2 protocol on, for the tests that drive
Stream's own clients: on SQLite, or on PostgreSQL with Redis (timelines, the
live bus), the two deployments the protocol must behave alike on.

A test module makes its server fixture module-scoped and parametrized over
:data:`DEPLOYMENTS` and opens it with :func:`stream_serve`; the tests that do
not touch the store (auth, refusals of bad input, error shapes) take
:data:`ON_SQLITE` so they run once.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from http_server import SECRET, tidings_serve
from servers import PostgresServer, RedisServer

__all__ = ["DEPLOYMENTS", "ON_SQLITE", "stream_serve"]

#: A test module's server runs once on each of these.
DEPLOYMENTS = ["sqlite", "postgres+redis"]

#: For a test whose outcome does not depend on the store: run on SQLite only
#: (the module's ``base_url`` fixture, given one of :data:`DEPLOYMENTS`).
ON_SQLITE = pytest.mark.parametrize("base_url", ["sqlite"], indirect=True)

_databases = itertools.count(1)


@contextmanager
def stream_serve(
    request: pytest.FixtureRequest, tmp_path: Path, keys: list[dict[str, Any]]
) -> Iterator[str]:
    """``tidings serve`` on ``request.param`` (one of :data:`DEPLOYMENTS`) with
    these ``stream_keys``; yields its base URL as the clients must be given it.

    On PostgreSQL + Redis it uses the session's private servers: a database
    of its own (dropped after) and a Redis namespace of its own, so it shares
    no data with any other test."""
    env = {"TIDINGS_STREAM_KEYS": json.dumps(keys)}
    with ExitStack() as stack:
        database_url = None
        if request.param == "postgres+redis":
            postgres: PostgresServer = request.getfixturevalue("postgres_server")
            redis: RedisServer = request.getfixturevalue("redis_server")
            if not redis.running:  # a previous test may have stopped it
                redis.restart()
            name = f"getstream_{os.getpid()}_{next(_databases)}"
            database_url = postgres.new_database(name)
            stack.callback(postgres.drop_database, name)
            env |= {"TIDINGS_REDIS_URL": redis.url, "TIDINGS_NAMESPACE": name}
        elif request.param != "sqlite":
            raise ValueError(f"unknown deployment {request.param!r}: one of {DEPLOYMENTS}")
        served = stack.enter_context(
            tidings_serve(tmp_path, secret=SECRET, env=env, database_url=database_url)
        )
        # The Python client calls api.<host> for any host but localhost.
        yield served.url.replace("127.0.0.1", "localhost")
