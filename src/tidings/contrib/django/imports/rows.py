"""Reading a table in batches by key (keyset pagination): each batch one
query, ``WHERE key > last ORDER BY key LIMIT n``, never the whole table, and
never an ``OFFSET`` that gets slower as it goes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from django.db.models import Q


def batches(
    model: Any, fields: Sequence[str], size: int, *, after: Sequence[str] = ("pk",)
) -> Iterator[list[dict[str, Any]]]:
    """The rows of ``model`` as ``values(*fields)``, ``size`` at a time, in the
    order of the columns ``after`` (the last of which is unique)."""
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    query = model._default_manager.order_by(*after).values(*fields, *after)
    last: tuple[Any, ...] | None = None
    while True:
        rows = list((query if last is None else query.filter(_after(after, last)))[:size])
        if not rows:
            return
        yield rows
        if len(rows) < size:
            return
        last = tuple(rows[-1][name] for name in after)


def _after(columns: Sequence[str], last: Sequence[Any]) -> Q:
    """Rows after ``last`` in the order of ``columns``: (a, b) > (x, y) as
    ``a > x OR (a = x AND b > y)`` (row values are not on every database)."""
    head, *rest = columns
    later = Q(**{f"{head}__gt": last[0]})
    if not rest:
        return later
    return later | (Q(**{head: last[0]}) & _after(rest, last[1:]))
