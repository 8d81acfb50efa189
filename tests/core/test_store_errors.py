"""store_error: which store an exception came from, told by its driver's
module; each exception here is raised for real by its driver."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
import redis
import sqlalchemy
from redis.backoff import NoBackoff
from redis.retry import Retry

from http_server import free_port
from tidings.core.errors import TidingsError
from tidings.core.store_errors import store_error, unavailable


def raised(call: object) -> BaseException:
    assert callable(call)
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any driver's
        call()
    return caught.value


def sqlite_error() -> BaseException:
    return raised(lambda: sqlite3.connect(":memory:").execute("SELECT * FROM missing"))


def test_a_drivers_own_exception_names_its_store_and_class() -> None:
    assert store_error(sqlite_error()) == ("sqlite", "OperationalError")
    port = free_port()  # nothing listens there
    refused = raised(lambda: redis.Redis(port=port, retry=Retry(NoBackoff(), 0)).ping())
    assert store_error(refused) == ("redis", "ConnectionError")
    down = raised(lambda: psycopg.connect(f"host=127.0.0.1 port={port} connect_timeout=2"))
    assert store_error(down) == ("postgresql", "OperationalError")


def test_sqlalchemy_wrapping_a_driver_is_told_by_the_driver() -> None:
    engine = sqlalchemy.create_engine("sqlite://")
    with engine.connect() as conn:
        wrapped = raised(lambda: conn.execute(sqlalchemy.text("SELECT * FROM missing")))
    assert type(wrapped).__module__ == "sqlalchemy.exc"
    assert store_error(wrapped) == ("sqlite", "OperationalError")
    # SQLAlchemy's own, with no driver's under it
    assert store_error(raised(lambda: sqlalchemy.create_engine("nosuch://"))) == (
        "sql",
        "NoSuchModuleError",
    )


def test_a_drivers_exception_under_another_is_found() -> None:
    def reraise(*, chained: bool) -> None:
        try:
            sqlite3.connect(":memory:").execute("SELECT * FROM missing")
        except sqlite3.Error as exc:
            if chained:
                raise TidingsError("the store failed") from exc
            raise TidingsError("the store failed")  # noqa: B904 - its __context__

    for chained in (True, False):
        assert store_error(raised(lambda c=chained: reraise(chained=c))) == (
            "sqlite",
            "OperationalError",
        )


def test_other_exceptions_are_no_stores() -> None:
    assert store_error(ValueError("no")) is None
    assert store_error(TimeoutError("a builtin, raised by anyone")) is None
    # a cycle of contexts ends
    one, two = KeyError("one"), KeyError("two")
    one.__context__, two.__context__ = two, one
    assert store_error(one) is None


def test_unavailable_tells_a_store_out_of_reach_from_a_bad_request() -> None:
    port = free_port()  # nothing listens there
    refused = raised(lambda: redis.Redis(port=port, retry=Retry(NoBackoff(), 0)).ping())
    assert unavailable(refused) == ("redis", "ConnectionError")
    down = raised(lambda: psycopg.connect(f"host=127.0.0.1 port={port} connect_timeout=2"))
    assert unavailable(down) == ("postgresql", "OperationalError")
    # wrapped by SQLAlchemy, as the canonical store meets it
    engine = sqlalchemy.create_engine(f"postgresql+psycopg://u@127.0.0.1:{port}/db")
    wrapped = raised(engine.connect)
    assert unavailable(wrapped) == ("postgresql", "OperationalError")
    # a mistake in the request is no outage: it stays a 500
    assert unavailable(sqlite_error()) is None  # no such table
    assert store_error(sqlite_error()) is not None
    assert unavailable(ValueError("no")) is None


def test_a_locked_sqlite_database_is_unavailable_for_now(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        other = sqlite3.connect(path, timeout=0)
        locked = raised(lambda: other.execute("CREATE TABLE t (n int)"))
        other.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert unavailable(locked) == ("sqlite", "OperationalError")
