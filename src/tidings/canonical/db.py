"""SQL connections: SQLite (embedded default) or PostgreSQL, chosen by URL.

SQLite runs in WAL mode so readers never wait for the writer, and every
write transaction starts with ``BEGIN IMMEDIATE``: a deferred transaction
that later upgrades to a writer can fail with "database is locked" without
waiting, while an immediate one waits for the lock (see _begin_waiting).

Two other ways of waiting were measured and dropped: SQLite's busy handler
(it sleeps 1, 2, 5, 10 ms and more, and the lock sits idle meanwhile), and
a lock of the process's own in front of SQLite's (each writer woken the
moment the previous transaction ends: a deliverer then follows every
publish with a pass too small to be worth its commit).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, Table, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import IntegrityError, OperationalError

from tidings.canonical import migrations
from tidings.canonical.checkpoint import BACKSTOP_PAGES, Checkpointer
from tidings.core.clock import Deadline
from tidings.core.errors import ConfigurationError
from tidings.core.extras import needs
from tidings.settings import SqliteSynchronous

_SQLITE_OUTBOX_SEQ = "SELECT seq FROM sqlite_sequence WHERE name = 'tidings_outbox'"
# The outbox id's SERIAL sequence; read outside transactions (sequences are
# not transactional), it counts every id handed out, committed or not.
_PG_OUTBOX_SEQ = "SELECT last_value, is_called FROM tidings_outbox_id_seq"
_PG_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10}


def _sqlite_pragmas(synchronous: str, cache_mb: int) -> list[str]:
    try:
        mode = SqliteSynchronous(synchronous)
    except ValueError:
        allowed = " or ".join(SqliteSynchronous)
        raise ConfigurationError(
            f"sqlite_synchronous must be {allowed}, not {synchronous!r}"
        ) from None
    return [
        "PRAGMA journal_mode=WAL",
        f"PRAGMA synchronous={mode.upper()}",
        "PRAGMA busy_timeout=30000",
        # Negative: KiB. Per connection; pages are shared through the OS cache.
        f"PRAGMA cache_size=-{int(cache_mb) * 1024}",
        # A thread of the Database checkpoints (see checkpoint.py); a writer
        # only when that thread falls far behind.
        f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}",
    ]


#: Rows of a multi-row VALUES statement (run_values) at most, and its
#: parameters: under the 999 of SQLite builds before 3.32.
_VALUES_ROWS = 250
_VALUES_PARAMS = 999


def _power_of_two(n: int) -> int:
    """The largest power of two up to ``n`` (≥ 1)."""
    return 1 << (n.bit_length() - 1)


#: How a writer waits for SQLite's write lock (see _begin_waiting): the first
#: sleep, the longest, and how long in all before "database is locked".
_LOCK_SLEEP_FIRST = 0.0002
_LOCK_SLEEP_MOST = 0.002
LOCK_WAIT_SECONDS = 30.0


def _begin_waiting(driver: Any, begin: str) -> None:
    """``begin`` (a ``BEGIN IMMEDIATE``), waiting for the write lock in steps of
    0.2 ms doubling up to 2 ms. SQLite's own busy handler sleeps 1, 2, 5, 10
    ms and more, so a publish that found a 15 ms delivery transaction under
    way slept ~18 ms, and the lock sat idle for the difference: waiting in
    finer steps took the everyday workload on SQLite from 1,450-1,650 to
    1,750-2,050 activities/s end to end. The writer connections have no busy
    timeout of their own; in WAL mode only the start of a write transaction
    waits for another writer."""
    sleep, deadline = _LOCK_SLEEP_FIRST, None
    while True:
        try:
            driver.execute(begin)
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            if deadline is None:
                deadline = Deadline(LOCK_WAIT_SECONDS)  # (a real wait)
            elif deadline.passed:
                # As SQLAlchemy raises a driver's error (the CLI tells it apart).
                raise OperationalError(begin, (), exc) from exc
            time.sleep(sleep)
            sleep = min(sleep * 2, _LOCK_SLEEP_MOST)


class Database:
    def __init__(
        self,
        url: str,
        *,
        sqlite_synchronous: str = SqliteSynchronous.NORMAL,
        sqlite_cache_mb: int = 64,
        postgres_pool_size: int = 5,
        postgres_partitions: int = 0,
    ) -> None:
        self.url = url
        #: Partitions of activities and of follows in a new PostgreSQL database
        #: (0: plain tables).
        self.partitions = postgres_partitions
        #: The transaction this thread's writes join (see joining).
        self._joined = threading.local()
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            if parsed.database in (None, "", ":memory:"):
                raise ConfigurationError(
                    "in-memory SQLite cannot be shared between threads; use a file "
                    "(sqlite:///tidings.canonical.db) or the memory timeline store"
                )
            pragmas = _sqlite_pragmas(sqlite_synchronous, sqlite_cache_mb)
            # The writers wait for the write lock themselves (_begin_waiting).
            writing = [*pragmas, "PRAGMA busy_timeout=0"]
            self._writer = self._sqlite_engine(url, "BEGIN IMMEDIATE", writing)
            self._reader = self._sqlite_engine(url, None, pragmas)
            # The file as SQLAlchemy opens it (a relative path, a file: URI).
            args, kwargs = self._writer.dialect.create_connect_args(parsed)
            self._checkpoints: Checkpointer | None = Checkpointer(
                str(args[0]), pragmas, uri=bool(kwargs.get("uri"))
            )
        elif self.dialect == "postgresql":
            self._writer, self._reader = self._postgres_engines(url, postgres_pool_size)
            self._checkpoints = None
        else:
            raise ConfigurationError(
                f"unsupported database {self.dialect!r}: use sqlite:/// or postgresql+psycopg://"
            )

    def _postgres_engines(self, url: str, pool_size: int) -> tuple[Engine, Engine]:
        """The two pools: transactions, and statements that commit by
        themselves (reads, publishes, claims), whose connections stay in
        autocommit mode rather than being switched at every checkout (~40 µs
        of the caller's CPU each time).

        No pre-ping (a SELECT 1 per checkout, ~1 ms a delivery step): TCP
        keepalives find dead peers, connections are recycled hourly, and a
        disconnect error empties both pools (``_server_lost``), so a server
        restart costs a failed call or two a process (runners retry;
        requests are answered 503). The most recently used connection
        first: the few a steady load needs stay in use, their statements
        prepared (psycopg prepares one on its fifth run on a connection).
        """
        pool = {
            "pool_size": pool_size,
            "max_overflow": 2 * pool_size,
            "pool_use_lifo": True,
            "pool_recycle": 3600,
            "connect_args": _PG_KEEPALIVES,
        }
        with needs("postgres", "a PostgreSQL database_url"):
            writer = create_engine(url, **pool)
            reader = create_engine(url, isolation_level="AUTOCOMMIT", **pool)
        for engine in (writer, reader):
            event.listen(engine, "handle_error", self._on_error)
        return writer, reader

    @staticmethod
    def _sqlite_engine(url: str, begin: str | None, pragmas: Sequence[str]) -> Engine:
        # The pool hands each connection to one thread at a time.
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            for pragma in pragmas:
                cur.execute(pragma)
            cur.close()

        if begin is not None:

            @event.listens_for(engine, "begin")
            def _on_begin(conn: Connection) -> None:
                # On the driver's connection: SQLAlchemy's statement handling
                # took most of an empty transaction's time.
                _begin_waiting(conn.connection.driver_connection, begin)

        return engine

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed on success, rolled back on error;
        inside :meth:`joining` on this thread, that transaction instead."""
        joined: Connection | None = getattr(self._joined, "conn", None)
        if joined is not None:
            yield joined
            return
        with self._writer.begin() as conn:
            yield conn
        if self._checkpoints is not None:
            self._checkpoints.wrote()

    @contextmanager
    def single(self) -> Iterator[Connection]:
        """A connection for writes of one statement each, each committed by
        itself: on PostgreSQL no BEGIN and no COMMIT, two round trips fewer
        than :meth:`write`. On SQLite, and inside :meth:`joining`, :meth:`write`."""
        if self.dialect == "sqlite" or getattr(self._joined, "conn", None) is not None:
            with self.write() as conn:
                yield conn
            return
        with self._reader.connect() as conn:
            yield conn

    @contextmanager
    def joining(self, conn: Connection) -> Iterator[None]:
        """Writes of this thread inside the block go into the open transaction
        ``conn``: committed with it, or rolled back with it. A publish writes
        its own feed this way when the feeds are rows of this database, one
        commit instead of two. Blocks nest: the outer one's transaction is
        joined again when the inner one ends."""
        outer = getattr(self._joined, "conn", None)
        self._joined.conn = conn
        try:
            yield
        finally:
            self._joined.conn = outer

    @staticmethod
    def set_param(items: Sequence[Any]) -> str:
        """``items`` as one parameter that :meth:`in_set` reads: a JSON array
        (one statement whatever their number). On PostgreSQL too: psycopg
        adapts a list to an array element by element in Python, which cost
        more than the statement for a batch of 1,000 follows."""
        return orjson.dumps(list(items)).decode()

    def in_set(self, sql_type: str = "text") -> str:
        """A subquery of the elements of a :meth:`set_param` parameter (``{p}``),
        for ``column IN (…)``; ``sql_type`` is their PostgreSQL type."""
        if self.dialect == "sqlite":
            return "SELECT value FROM json_each({p})"
        return f"SELECT CAST(jsonb_array_elements_text(CAST({{p}} AS jsonb)) AS {sql_type})"

    @contextmanager
    def savepoint(self, conn: Connection, name: str) -> Iterator[None]:
        """A savepoint in ``conn``'s transaction around the block: released at
        its end, and on an error rolled back to and released, so a caller
        that goes on after the error commits nothing of the block."""
        self.run_raw(conn, f"SAVEPOINT {name}", ())
        try:
            yield
        except BaseException:
            self.run_raw(conn, f"ROLLBACK TO {name}", ())
            self.run_raw(conn, f"RELEASE {name}", ())
            raise
        self.run_raw(conn, f"RELEASE {name}", ())

    def undo_to(self, conn: Connection, name: str) -> None:
        """Take back what ``conn`` wrote since the savepoint ``name`` (still open)."""
        self.run_raw(conn, f"ROLLBACK TO {name}", ())

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._reader.connect() as conn:
            yield conn

    def migrate(self) -> int:
        with self.write() as conn:
            return migrations.upgrade(conn, partitions=self.partitions)

    def fetch_raw(
        self, conn: Connection, sql: str, params: tuple[Any, ...] | Mapping[str, Any]
    ) -> list[Any]:
        """Run ``sql`` (with ``{p}`` placeholders, or PostgreSQL's named
        ``%(name)s`` ones) on the driver's own cursor."""
        placeholder = "?" if self.dialect == "sqlite" else "%s"
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            with self._as_sqlalchemy(conn, sql, params):
                cursor.execute(sql.format(p=placeholder), params)
                rows: list[Any] = cursor.fetchall()
        finally:
            cursor.close()
        return rows

    def run_raw(
        self, conn: Connection, sql: str, params: tuple[Any, ...] | Mapping[str, Any]
    ) -> int:
        """:meth:`fetch_raw` for a statement that returns no rows; its row count."""
        placeholder = "?" if self.dialect == "sqlite" else "%s"
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            with self._as_sqlalchemy(conn, sql, params):
                cursor.execute(sql.format(p=placeholder), params)
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def lock_sources(self, conn: Connection, sources: Sequence[str], *, shared: bool) -> None:
        """Serialise follows of a source against its publishes, until the commit.

        Publishes take the lock shared (they do not wait for each other),
        follows exclusively: while a follow holds it, every delivery row of
        its sources is either committed with an id up to :meth:`outbox_mark`
        or yet to be given one above it. SQLite runs one write transaction at
        a time, which is the same guarantee: nothing to do.
        """
        if self.dialect == "sqlite" or not sources:
            return
        lock = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
        # Sorted: two follows taking several locks cannot deadlock. One
        # statement for them all; the subquery's ORDER BY keeps it from being
        # merged into the outer query, so the locks are taken in its order.
        self.run_raw(
            conn,
            f"SELECT count({lock}(hashtext(s))) FROM (SELECT s FROM "
            "jsonb_array_elements_text(CAST(%s AS jsonb)) WITH ORDINALITY AS l(s, n) "
            "ORDER BY n) AS sorted",
            (self.set_param(sorted(set(sources))),),
        )

    def outbox_mark(self, conn: Connection) -> int:
        """The highest outbox id handed out so far (0: none yet)."""
        if self.dialect == "sqlite":
            rows = self.fetch_raw(conn, _SQLITE_OUTBOX_SEQ, ())
            return int(rows[0][0]) if rows else 0
        last, called = self.fetch_raw(conn, _PG_OUTBOX_SEQ, ())[0]
        return int(last) if called else int(last) - 1

    def run_many(self, conn: Connection, sql: str, rows: Sequence[tuple[Any, ...]]) -> int:
        """:meth:`run_raw` once per row of parameters, on the driver's own
        cursor: the publish path, where SQLAlchemy's statement handling cost
        more than the inserts. Returns the rows changed in all (SQLite)."""
        if not rows:
            return 0
        placeholder = "?" if self.dialect == "sqlite" else "%s"
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            with self._as_sqlalchemy(conn, sql, rows):
                cursor.executemany(sql.format(p=placeholder), rows)
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def run_values(
        self, conn: Connection, head: str, rows: Sequence[tuple[Any, ...]], tail: str = ""
    ) -> int:
        """``{head} VALUES (…), (…), … {tail}`` for ``rows`` (all of one width),
        many rows a statement; returns the rows changed in all.

        SQLite inserts such a list twice as fast as :meth:`run_many` (one
        statement run per row).
        """
        changed = 0
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            for sql, params in self._values(head, rows, tail):
                with self._as_sqlalchemy(conn, head, params):
                    cursor.execute(sql, params)
                changed += int(cursor.rowcount)
        finally:
            cursor.close()
        return changed

    def fetch_values(
        self, conn: Connection, head: str, rows: Sequence[tuple[Any, ...]], tail: str
    ) -> list[Any]:
        """:meth:`run_values` for a statement that returns rows (``tail`` with
        RETURNING); the rows of every statement."""
        out: list[Any] = []
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            for sql, params in self._values(head, rows, tail):
                with self._as_sqlalchemy(conn, head, params):
                    cursor.execute(sql, params)
                    out += cursor.fetchall()
        finally:
            cursor.close()
        return out

    def _values(
        self, head: str, rows: Sequence[tuple[Any, ...]], tail: str
    ) -> Iterator[tuple[str, list[Any]]]:
        """The statements and parameters of a VALUES list of ``rows``: up to
        :data:`_VALUES_ROWS` rows and :data:`_VALUES_PARAMS` parameters a
        statement, the rest in power-of-two runs, so few distinct statements
        reach the driver's statement cache."""
        if not rows:
            return
        placeholder = "?" if self.dialect == "sqlite" else "%s"
        width = len(rows[0])
        full = max(1, min(_VALUES_ROWS, _VALUES_PARAMS // width))
        row = "(" + ", ".join([placeholder] * width) + ")"
        at = 0
        while at < len(rows):
            left = len(rows) - at
            n = full if left >= full else _power_of_two(left)
            yield (
                f"{head} VALUES {', '.join([row] * n)} {tail}",
                [v for r in rows[at : at + n] for v in r],
            )
            at += n

    @contextmanager
    def _as_sqlalchemy(self, conn: Connection, sql: str, params: Any) -> Iterator[None]:
        """The driver's integrity errors raised as SQLAlchemy's, which callers
        catch (a unique key lost to a concurrent transaction) whichever way the
        statement was sent; and a connection the driver's error left dead
        dropped from the pool, as SQLAlchemy drops one for its own statements."""
        dialect = self._writer.dialect
        try:
            yield
        except dialect.loaded_dbapi.IntegrityError as exc:
            raise IntegrityError(sql, params, exc) from exc
        except dialect.loaded_dbapi.Error as exc:
            # Sent on the driver's cursor, the statement's error never passed
            # through SQLAlchemy: a connection a server restart closed would go
            # back to the pool and fail the next caller too, for as long as
            # the pool kept it.
            if dialect.is_disconnect(exc, conn.connection.dbapi_connection, None):
                conn.invalidate(exc)
                if self.dialect == "postgresql":
                    self._server_lost()
            raise

    def _on_error(self, context: ExceptionContext) -> None:
        if context.is_disconnect:
            self._server_lost()

    def _server_lost(self) -> None:
        """A connection was found dead: the server restarted or went away, and
        took every connection of both pools with it. Their idle connections
        are closed now (those in use are discarded when returned), so no later
        caller meets one; SQLAlchemy would discard only the failing pool's,
        and only for its own statements."""
        self._writer.dispose()
        self._reader.dispose()

    def insert_ignore(self, table: Table) -> Any:
        """INSERT that skips rows whose primary or unique key exists."""
        if self.dialect == "sqlite":
            return sqlite.insert(table).on_conflict_do_nothing()
        return postgresql.insert(table).on_conflict_do_nothing()

    def dialect_insert(self, table: Table) -> Any:
        return sqlite.insert(table) if self.dialect == "sqlite" else postgresql.insert(table)

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
        self._writer.dispose()
        self._reader.dispose()
