"""The narrow interfaces every timeline store implements.

A feed is a set of activity ids ordered newest first (ids sort by time). Its
cap is exact: after a write a feed holds at most ``max_length`` ids, and the
oldest are dropped; an id removed later does not bring a dropped one back.
Ids older than the group's TTL are never returned by reads; stores prune them
physically when convenient, which reads cannot tell apart.

All three implementations are held to ``tests/test_timeline_contract.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Cap:
    """The limits of a feed group at the time of a call.

    ``floor`` is the smallest visible id (from the TTL and the clock), or
    None when the group has no TTL; ``ttl_ms`` lets stores expire idle feeds.
    """

    max_length: int
    floor: str | None = None
    ttl_ms: int | None = None


class TimelineStore(Protocol):
    def add(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        """Insert every id into every feed (idempotent), then apply the cap to each feed."""

    def prepare_add(
        self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap
    ) -> Callable[[], None]:
        """``add``, split in two: encode now, write when the result is called.

        Deliveries prepare the next chunk in a read-ahead thread while the
        store writes the current one. Stores with nothing to encode return a
        closure over ``add``.
        """

    def remove(self, feeds: Sequence[str], activity_ids: Sequence[str], cap: Cap) -> None:
        """Remove the ids from every feed; ids a feed does not hold are ignored.

        ``cap`` is the feeds' group cap (stores that trim lazily need it)."""

    def page(self, feed: str, *, limit: int, before: str | None, cap: Cap) -> list[str]:
        """Up to ``limit`` ids, newest first, strictly older than ``before`` when given."""

    def page_docs(
        self, feed: str, *, limit: int, before: str | None, cap: Cap
    ) -> tuple[list[str], dict[str, bytes]]:
        """``page``, plus the stored JSON of those ids the store can fetch in the
        same round trip (none, for a store without activities); the caller
        hydrates the rest."""

    def clear(self, feeds: Sequence[str]) -> None:
        """Empty the feeds."""

    def close(self) -> None: ...


class ActivityCache(Protocol):
    """Where hydration looks before the canonical store (stored JSON by id)."""

    def get_many(self, activity_ids: Sequence[str]) -> dict[str, bytes]: ...

    def put_many(self, docs: Mapping[str, bytes]) -> None: ...

    def delete(self, activity_ids: Sequence[str]) -> None: ...


class NoCache:
    """For stores that share the canonical store's database: nothing to cache."""

    def get_many(self, activity_ids: Sequence[str]) -> dict[str, bytes]:
        return {}

    def put_many(self, docs: Mapping[str, bytes]) -> None:
        return None

    def delete(self, activity_ids: Sequence[str]) -> None:
        return None
