"""Shared fixtures: private Redis and PostgreSQL servers started by the suite."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backends import BACKENDS, Backend, open_backend
from servers import PostgresServer, RedisCluster, RedisServer
from tidings import Settings, Tidings
from tidings.engine import TaskRunnerChoice
from workers import Worker

# The Python client's services (tidings serve processes, a relay, a flaky receiver).
pytest_plugins = ["client_services"]

_db_counter = itertools.count(1)


#: A test that declares a timeout of at least this many seconds is a long one.
LONG_TIMEOUT = 180


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the long tests first. pytest-xdist hands tests out in collection
    order, so a two-minute test collected last runs alone at the end while the
    other worker idles; first, the short ones fill in around it. A test says
    it is long by the timeout it declares (the suite's default is 120 s)."""

    def long(item: pytest.Item) -> bool:
        marker = item.get_closest_marker("timeout")
        return bool(marker and marker.args and marker.args[0] >= LONG_TIMEOUT)

    items.sort(key=lambda item: not long(item))  # (stable: the order otherwise kept)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One private redis-server for the whole session."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """One private 3-master Redis Cluster for the whole session."""
    with RedisCluster() as cluster:
        yield cluster


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisCluster) -> str:
    """``redis+cluster://`` URL of the private cluster, emptied before the test."""
    redis_cluster.flushall()
    return redis_cluster.url


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


# -- schemas made once ---------------------------------------------------------
# Most tests build an engine on a new database, and its migrations cost more
# than many a test (~0.17 s on PostgreSQL, ~0.04 s on SQLite, hundreds of times
# a run): an engine's database starts as a copy of one migrated once per
# session instead. Migrating itself is tested on empty ones (postgres_url,
# database_url), and the engine still checks the copy's version on start.


def _migrate(database_url: str) -> None:
    with pytest.MonkeyPatch.context() as mp:  # (session-wide: _isolated_settings's work)
        for name in list(os.environ):
            if name.startswith("TIDINGS_"):
                mp.delenv(name)
        settings: dict[str, Any] = {"database_url": database_url, "timeline_store": "sql"}
        Tidings(Settings(**settings), task_runner="sync").close()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the current schema, to copy."""
    path = tmp_path_factory.mktemp("migrated") / "tidings.canonical.db"
    _migrate(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def migrated_postgres(postgres_server: PostgresServer) -> str:
    """The name of a PostgreSQL database at the current schema, to copy."""
    name = "tidings_migrated"
    _migrate(postgres_server.new_database(name))
    return name


@pytest.fixture
def migrated_postgres_url(postgres_server: PostgresServer, migrated_postgres: str) -> Iterator[str]:
    """As ``postgres_url``, but a copy of ``migrated_postgres``."""
    name = f"test_{next(_db_counter)}"
    yield postgres_server.new_database(name, template=migrated_postgres)
    postgres_server.drop_database(name)


# -- the store contracts' backends -------------------------------------------


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A timeline store, an aggregate store and an activity cache, fresh: each test
    using this runs once per backend (``backends.BACKENDS``)."""
    with open_backend(request.param, request, tmp_path) as made:
        yield made


# -- engines over every store ------------------------------------------------

#: "cluster" is the Redis store on a private 3-master Redis Cluster.
STORES = ["memory", "sql", "redis", "postgres", "cluster"]


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite file at the current schema (a copy of ``migrated_sqlite``); empty
    (not there yet) for a test marked ``empty_database``."""
    path = tmp_path / "tidings.canonical.db"
    if request.node.get_closest_marker("empty_database") is None:
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), path)
    return f"sqlite:///{path}"


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> str:
    """Each test using this runs once per timeline store."""
    name: str = request.param
    return name


EngineFactory = Callable[..., Tidings]


@pytest.fixture
def make_engine(
    request: pytest.FixtureRequest, store: str, database_url: str
) -> Iterator[EngineFactory]:
    """Build engines on ``store``; keyword arguments override settings.

    ``task_runner`` defaults to "sync" so tests are deterministic. The memory and
    Redis stores keep their canonical data in SQLite; "postgres" is the SQL
    store on PostgreSQL.
    """
    made: list[Tidings] = []
    base: dict[str, Any] = {"database_url": database_url, "timeline_store": store}
    if store == "redis":
        base["redis_url"] = request.getfixturevalue("redis_url")
    if store == "cluster":
        base["redis_url"] = request.getfixturevalue("redis_cluster_url")
        base["timeline_store"] = "redis"
    if store == "postgres":
        base["database_url"] = request.getfixturevalue("migrated_postgres_url")
        base["timeline_store"] = "sql"

    def factory(task_runner: TaskRunnerChoice = "sync", **overrides: Any) -> Tidings:
        engine = Tidings(Settings(**{**base, **overrides}), task_runner=task_runner)
        made.append(engine)
        return engine

    yield factory
    for engine in made:
        engine.close()


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's TIDINGS_* variables or a tidings.toml."""

    for name in list(os.environ):
        if name.startswith("TIDINGS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TIDINGS_CONFIG", str(tmp_path / "absent.toml"))


@pytest.fixture
def start_worker(settings: dict[str, Any], tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Start ``tidings worker`` processes on the requesting module's ``settings``
    (its broker); all are stopped after the test."""
    started: list[Worker] = []

    def start(queues: str | None = None) -> Worker:
        started.append(Worker(settings, tmp_path / "worker.log", queues=queues))
        return started[-1]

    yield start
    for worker in started:
        worker.stop()
