"""SQL connections: SQLite (embedded default) or PostgreSQL, chosen by URL.

SQLite runs in WAL mode so readers never wait for the writer, and every
write transaction starts with ``BEGIN IMMEDIATE``: a deferred transaction
that later upgrades to a writer can fail with "database is locked" without
waiting, while an immediate one queues on ``busy_timeout``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

from tidings.canonical import migrations
from tidings.core.errors import ConfigurationError


class Database:
    def __init__(self, url: str) -> None:
        self.url = url
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            if parsed.database in (None, "", ":memory:"):
                raise ConfigurationError(
                    "in-memory SQLite cannot be shared between threads; use a file "
                    "(sqlite:///tidings.canonical.db) or the memory timeline store"
                )
            self._writer = self._sqlite_engine(url, "BEGIN IMMEDIATE")
            self._reader = self._sqlite_engine(url, None)
        elif self.dialect == "postgresql":
            try:
                engine = create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)
            except ModuleNotFoundError as exc:
                raise ConfigurationError(
                    f"PostgreSQL needs a driver: pip install 'tidings[postgres]' ({exc})"
                ) from None
            self._writer = engine
            self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        else:
            raise ConfigurationError(
                f"unsupported database {self.dialect!r}: use sqlite:/// or postgresql+psycopg://"
            )

    @staticmethod
    def _sqlite_engine(url: str, begin: str | None) -> Engine:
        # The pool hands each connection to one thread at a time.
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        if begin is not None:

            @event.listens_for(engine, "begin")
            def _on_begin(conn: Connection) -> None:
                conn.exec_driver_sql(begin)

        return engine

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed on success, rolled back on error."""
        with self._writer.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._reader.connect() as conn:
            yield conn

    def migrate(self) -> int:
        with self.write() as conn:
            return migrations.upgrade(conn)

    def fetch_raw(self, conn: Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Run ``sql`` (with ``{p}`` placeholders) on the driver's own cursor."""
        placeholder = "?" if self.dialect == "sqlite" else "%s"
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(sql.format(p=placeholder), params)
            rows: list[Any] = cursor.fetchall()
        finally:
            cursor.close()
        return rows

    def run_raw(self, conn: Connection, sql: str, params: tuple[Any, ...]) -> int:
        """:meth:`fetch_raw` for a statement that returns no rows; its row count."""
        placeholder = "?" if self.dialect == "sqlite" else "%s"
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(sql.format(p=placeholder), params)
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def insert_ignore(self, table: Table) -> Any:
        """INSERT that skips rows whose primary or unique key exists."""
        if self.dialect == "sqlite":
            return sqlite.insert(table).on_conflict_do_nothing()
        return postgresql.insert(table).on_conflict_do_nothing()

    def dialect_insert(self, table: Table) -> Any:
        return sqlite.insert(table) if self.dialect == "sqlite" else postgresql.insert(table)

    def close(self) -> None:
        self._writer.dispose()
        self._reader.dispose()
