"""Which store an exception came from: what ``tidings_store_errors_total``
counts by.

A store's failure reaches tidings as its driver's exception (sqlite3,
psycopg, redis-py), often wrapped: SQLAlchemy puts the driver's in
``.orig``, and tidings' own code may raise another from it. The driver is
told by the module that defines the exception's class, so nothing here
imports a driver (the package-only install has none of the optional ones).
"""

from __future__ import annotations

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
    seen: set[int] = set()
    current: BaseException | None = exc
    found: tuple[str, str] | None = None
    while current is not None and id(current) not in seen and len(seen) < MAX_DEPTH:
        seen.add(id(current))
        store = DRIVERS.get(type(current).__module__.partition(".")[0])
        if store is not None and store != "sql":
            return store, type(current).__name__
        if store == "sql" and found is None:
            found = store, type(current).__name__
        wrapped = getattr(current, "orig", None)  # (SQLAlchemy's, when not also the cause)
        current = (
            current.__cause__
            or (wrapped if isinstance(wrapped, BaseException) else None)
            or current.__context__
        )
    return found
