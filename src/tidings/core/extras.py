"""The optional drivers, and what a missing one says.

``pip install tidings`` alone runs the embedded default (SQLite, threads,
in-process events). Redis, PostgreSQL and Celery come with extras; their
modules are imported only on the path that chose them, inside
:func:`needs`, so a package-only install that asks for one is told which
extra to install instead of meeting a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from tidings.core.errors import ConfigurationError

#: The top-level modules each extra installs.
EXTRAS: dict[str, frozenset[str]] = {
    "redis": frozenset({"redis", "hiredis"}),
    "postgres": frozenset({"psycopg", "psycopg_binary", "psycopg_pool"}),
    "celery": frozenset({"celery", "kombu", "billiard", "vine", "amqp"}),
}


@contextmanager
def needs(extra: str, purpose: str) -> Iterator[None]:
    """Turn the absence of ``extra``'s driver, met inside the block, into a
    :class:`ConfigurationError` naming the extra to install. Any other missing
    module is a fault of its own and passes through unchanged."""
    try:
        yield
    except ModuleNotFoundError as exc:
        name = missing(exc)
        if name.partition(".")[0] not in EXTRAS[extra]:
            raise
        raise ConfigurationError(
            f"{purpose} needs the {extra} extra: pip install 'tidings[{extra}]' "
            f"(no module named {name!r})"
        ) from None


def missing(exc: ModuleNotFoundError) -> str:
    """The module ``exc`` found missing: its ``name``, or (raised by an import
    hook that gave only a message) the name its message quotes."""
    if exc.name:
        return exc.name
    found = re.search(r"No module named '([^']+)'", str(exc))
    return found.group(1) if found else ""
