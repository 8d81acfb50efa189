"""Which store an exception came from: what ``tidings_store_errors_total``
counts by.

A store's failure reaches tidings as its driver's exception (sqlite3,
psycopg, redis-py), often wrapped: SQLAlchemy puts the driver's in
``.orig``, and tidings' own code may raise another from it. The driver is
told by the module that defines the exception's class, so nothing here
imports a driver (the package-only install has none of the optional ones).
"""

from __future__ import annotations

from collections.abc import Iterator

#: Module of an exception's class (its first part) -> the store it names.
DRIVERS = {
    "sqlite3": "sqlite",
    "psycopg": "postgresql",
    "psycopg_pool": "postgresql",
    "psycopg2": "postgresql",
    "redis": "redis",
    "sqlalchemy": "sql",
}
#: How far down a chain of causes to look (chains are short; a cycle is not followed).
MAX_DEPTH = 8


def store_error(exc: BaseException) -> tuple[str, str] | None:
    """``(store, kind)`` of the first driver exception in ``exc``'s chain
    (``exc`` itself, then what it wraps), or None if none is a driver's.

    ``store`` is ``sqlite``, ``postgresql``, ``redis``, or ``sql`` for
    SQLAlchemy's own errors (a pool timeout); ``kind`` is the class name
    (``OperationalError``, ``ConnectionError``). A SQLAlchemy error that
    wraps a driver's is told by the driver's.
    """
    found = _driver_exception(exc)
    if found is None:
        return None
    store, driver = found
    return store, type(driver).__name__


def _driver_exception(exc: BaseException) -> tuple[str, BaseException] | None:
    """The store and the exception :func:`store_error` tells it by."""
    sql: tuple[str, BaseException] | None = None
    for current in _chain(exc):
        store = DRIVERS.get(type(current).__module__.partition(".")[0])
        if store is not None and store != "sql":
            return store, current
        if store == "sql" and sql is None:
            sql = store, current
    return sql


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what it wraps, and so on (a cycle is not followed)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < MAX_DEPTH:
        seen.add(id(current))
        yield current
        wrapped = getattr(current, "orig", None)  # (SQLAlchemy's, when not also the cause)
        current = (
            current.__cause__
            or (wrapped if isinstance(wrapped, BaseException) else None)
            or current.__context__
        )


#: Exception classes (by name, anywhere in a driver exception's class
#: hierarchy) that say a store cannot be reached or cannot take this now, as
#: opposed to a mistake in what was sent: a server down, restarting, shutting
#: down (psycopg's AdminShutdown is an OperationalError), a connection or
#: pool exhausted, a Redis Cluster slot without its master while a replica
#: takes over, or a Redis at its memory limit.
UNAVAILABLE = {
    "postgresql": frozenset({"OperationalError"}),
    "redis": frozenset(
        {
            "ConnectionError",
            "TimeoutError",
            "ClusterError",  # (ClusterDownError, MasterDownError; "TTL exhausted")
            "TryAgainError",
            "ReadOnlyError",  # a demoted master still taking a write
            "OutOfMemoryError",
            "SlotNotCoveredError",
        }
    ),
    # SQLAlchemy's own: its pool gave up waiting for a connection.
    "sql": frozenset({"TimeoutError", "DisconnectionError"}),
}
#: Wrong credentials also fail to connect, but no retry mends them.
NEVER_UNAVAILABLE = frozenset({"AuthenticationError", "AuthorizationError"})
#: SQLite's OperationalError also says "no such table": only these are transient.
SQLITE_TRANSIENT = ("database is locked", "database table is locked", "unable to open database")


def unavailable(exc: BaseException) -> tuple[str, str] | None:
    """``(store, kind)`` as :func:`store_error` tells them when ``exc`` says
    the store cannot be reached or cannot take the request now, so that asking
    again later may succeed (HTTP 503); None for any other exception,
    including a driver's that says the request itself was wrong."""
    found = _driver_exception(exc)
    if found is None:
        return None
    store, driver = found
    names = {c.__name__ for c in type(driver).__mro__}
    if names & NEVER_UNAVAILABLE:
        return None
    if store == "sqlite":
        if not str(driver).startswith(SQLITE_TRANSIENT):
            return None
    elif not names & UNAVAILABLE.get(store, frozenset()):
        return None
    return store, type(driver).__name__
