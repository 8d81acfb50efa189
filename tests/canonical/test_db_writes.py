"""Database write helpers: rows inserted as lists of VALUES, and writes that
join a transaction already open on their thread."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from tidings.canonical import db as db_module
from tidings.canonical.db import Database


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, database_url: str) -> Iterator[Database]:
    url = database_url if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    database = Database(url)
    with database.write() as conn:
        conn.execute(text("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c TEXT)"))
    yield database
    database.close()


def rows_of(db: Database) -> list[tuple[int, str, str]]:
    with db.read() as conn:
        return [tuple(r) for r in conn.execute(text("SELECT a, b, c FROM t ORDER BY a"))]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 127, 249, 250, 251, 333, 1000])
def test_run_values_inserts_every_row_whatever_their_number(db: Database, n: int) -> None:
    # Three columns: 250 rows a statement at most, the rest in power-of-two runs.
    rows = [(i, f"b{i}", f"c{i}") for i in range(n)]
    with db.write() as conn:
        assert db.run_values(conn, "INSERT INTO t (a, b, c)", rows) == n
    assert rows_of(db) == rows


@pytest.mark.parametrize("width", [1, 2, 3, 7, 20])
def test_run_values_stays_under_999_parameters(database_url: str, width: int) -> None:
    # SQLite builds before 3.32 take at most 999 parameters a statement.
    db = Database(database_url)
    columns = [f"c{i}" for i in range(width)]
    rows = [tuple(f"{r}-{c}" for c in range(width)) for r in range(1000)]
    with db.write() as conn:
        driver = conn.connection.driver_connection
        driver.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)  # type: ignore[union-attr]
        conn.execute(text(f"CREATE TABLE w ({', '.join(columns)})"))
        assert db.run_values(conn, f"INSERT INTO w ({', '.join(columns)})", rows) == 1000
        got = db.fetch_values(conn, f"INSERT INTO w ({', '.join(columns)})", rows, "RETURNING c0")
        assert [r[0] for r in got] == [r[0] for r in rows]
    db.close()


def test_run_values_counts_only_the_rows_it_changed(db: Database) -> None:
    with db.write() as conn:
        db.run_values(conn, "INSERT INTO t (a, b, c)", [(i, "x", "y") for i in range(0, 10, 2)])
    again = [(i, "new", "new") for i in range(10)]
    with db.write() as conn:
        assert db.run_values(conn, "INSERT INTO t (a, b, c)", again, "ON CONFLICT DO NOTHING") == 5
    assert [r[1] for r in rows_of(db)] == ["x" if i % 2 == 0 else "new" for i in range(10)]


def test_a_joined_write_commits_with_the_transaction_it_joins(db: Database) -> None:
    with db.write() as outer, db.joining(outer):
        outer.execute(text("INSERT INTO t VALUES (1, 'outer', '')"))
        with db.write() as inner:
            assert inner is outer
            inner.execute(text("INSERT INTO t VALUES (2, 'inner', '')"))
        # Not committed yet: another connection does not see either.
        assert rows_of(db) == []
    assert [r[0] for r in rows_of(db)] == [1, 2]


def test_a_joined_write_rolls_back_with_the_transaction_it_joins(db: Database) -> None:
    def fails_after_a_joined_write() -> None:
        with db.write() as outer, db.joining(outer):
            with db.write() as inner:
                inner.execute(text("INSERT INTO t VALUES (2, 'inner', '')"))
            raise RuntimeError("the outer transaction fails after the inner write")

    with pytest.raises(RuntimeError):
        fails_after_a_joined_write()
    assert rows_of(db) == []


def test_joining_blocks_nest(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    # Were the outer block's transaction lost, a write would wait for the
    # lock its own transaction holds (on SQLite): fail fast then.
    monkeypatch.setattr(db_module, "LOCK_WAIT_SECONDS", 0.5)
    with db.write() as outer, db.joining(outer):
        with db.joining(outer), db.write() as inner:
            assert inner is outer
        # The outer block's transaction is still the one joined.
        with db.write() as again:
            assert again is outer
            again.execute(text("INSERT INTO t VALUES (1, 'after the inner block', '')"))
    assert [r[0] for r in rows_of(db)] == [1]


def test_an_error_in_a_joining_block_leaves_no_transaction_joined(db: Database) -> None:
    def fails() -> None:
        with db.write() as outer, db.joining(outer):
            raise RuntimeError("in the block")

    with pytest.raises(RuntimeError):
        fails()
    with db.write() as conn:  # a transaction of its own, not the one rolled back
        conn.execute(text("INSERT INTO t VALUES (1, 'own', '')"))
    assert [r[0] for r in rows_of(db)] == [1]


def test_an_error_in_an_inner_joining_block_leaves_the_outer_one_joined(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_module, "LOCK_WAIT_SECONDS", 0.5)

    def inner_fails(outer: Connection) -> None:
        with db.joining(outer):
            raise RuntimeError("in the inner block")

    with db.write() as outer, db.joining(outer):
        with pytest.raises(RuntimeError):
            inner_fails(outer)
        with db.write() as again:
            assert again is outer
            again.execute(text("INSERT INTO t VALUES (1, 'outer', '')"))
    assert [r[0] for r in rows_of(db)] == [1]


def test_a_savepoint_takes_its_block_back_on_an_error(db: Database) -> None:
    def fails_inside(conn: Connection) -> None:
        with db.savepoint(conn, "t_block"):
            conn.execute(text("INSERT INTO t VALUES (2, 'in the block', '')"))
            raise RuntimeError("after a write")

    with db.write() as conn:
        conn.execute(text("INSERT INTO t VALUES (1, 'before', '')"))
        with pytest.raises(RuntimeError):
            fails_inside(conn)  # caught: the transaction goes on
        with db.savepoint(conn, "t_block"):
            conn.execute(text("INSERT INTO t VALUES (3, 'in a block', '')"))
            db.undo_to(conn, "t_block")
            conn.execute(text("INSERT INTO t VALUES (4, 'after undo_to', '')"))
    assert [r[0] for r in rows_of(db)] == [1, 4]


def test_joining_is_for_its_own_thread_and_block_only(db: Database) -> None:
    seen: list[bool] = []

    def elsewhere(outer: object) -> None:
        # A transaction of its own (on SQLite, once the block's has committed).
        with db.write() as conn:
            seen.append(conn is outer)
            conn.execute(text("INSERT INTO t VALUES (2, 'elsewhere', '')"))

    with db.write() as outer, db.joining(outer):
        outer.execute(text("INSERT INTO t VALUES (1, 'outer', '')"))
        thread = threading.Thread(target=elsewhere, args=(outer,))
        thread.start()
    thread.join()
    assert seen == [False]
    # After the block, a write is a transaction of its own again.
    with db.write() as conn:
        assert conn is not outer
        conn.execute(text("INSERT INTO t VALUES (3, 'own', '')"))
    assert [r[0] for r in rows_of(db)] == [1, 2, 3]


def test_a_writer_waits_for_the_write_lock_another_connection_holds(database_url: str) -> None:
    db = Database(database_url)
    db.migrate()
    path = database_url.removeprefix("sqlite:///")
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.2, other.execute, args=("COMMIT",))
    # (Read before the timer starts: read after, the wait can be under 0.2 s.)
    started = time.monotonic()
    released.start()
    with db.write() as conn:
        conn.execute(text("CREATE TABLE waited (a INTEGER)"))
    # It waited for the other transaction (and not for the 30 s bound).
    assert 0.2 <= time.monotonic() - started < 5.0
    released.join()
    other.close()
    db.close()


def test_a_writer_gives_up_after_the_lock_wait_bound(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_module, "LOCK_WAIT_SECONDS", 0.1)
    db = Database(database_url)
    db.migrate()
    other = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(OperationalError, match="locked"), db.write():
        pass
    other.execute("ROLLBACK")
    other.close()
    with db.write() as conn:  # usable again
        conn.execute(text("CREATE TABLE after (a INTEGER)"))
    db.close()
