"""The narrow interfaces every timeline store implements.

A feed is a set of activity ids ordered newest first (ids sort by time). Its
cap is exact: after a write a feed holds at most ``max_length`` ids, and the
oldest are dropped; an id removed later does not bring a dropped one back.
Ids older than the group's TTL are never returned by reads; stores prune them
physically when convenient, which reads cannot tell apart.

Every implementation is held to the contract suites in ``tests/stores/``
(timeline, aggregate and cache contracts, over one shared backend fixture).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tidings.core.aggregation import AggregateCap, Member, Position, StoredAggregatePage


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

    def add_each(self, entries: Mapping[str, Sequence[str]], cap: Cap) -> None:
        """Insert each feed's own ids into it, then apply the cap to each feed.

        ``prepare_add_each(entries, cap)()``; see there.
        """

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[str]], cap: Cap
    ) -> Callable[[], None]:
        """``add`` for a batch of activities, each feed getting its own subset of
        them: encoded now, written when the result is called.

        ``entries`` maps a feed to the ids it gets, in any order, duplicates
        allowed. Every id goes into its feed (idempotent: a retried call changes
        nothing), then the cap applies once to each feed written, exactly as if
        each feed had had one ``add`` of its ids. Ids come out of order when
        several deliveries run at once; one older than a full feed's visible
        entries is dropped (the cap would drop it at once). An empty mapping or
        id list writes nothing.
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


class AggregateStore(Protocol):
    """Aggregated and notification feeds: aggregates of activities, with seen/read state.

    An aggregate holds the ids of every activity that joined it (so counts stay
    exact through retries, concurrent writers and removals) and shows the
    newest ``max_aggregate_size``. A feed keeps its newest ``max_length`` aggregates
    by position (newest member, then key); a dropped aggregate takes its seen and
    read state with it, so the unseen/unread counts count only held aggregates.
    """

    def add(self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap) -> None:
        """Each member joins its aggregate in every feed; a member a feed holds already
        changes nothing. An aggregate that gains a member becomes unseen and unread."""

    def prepare_add(
        self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap
    ) -> Callable[[], None]:
        """``add``, encoded now and written when the result is called."""

    def prepare_add_each(
        self, entries: Mapping[str, Sequence[Member]], cap: AggregateCap
    ) -> Callable[[], None]:
        """``add`` of each feed's own members (a batch of deliveries), encoded
        now and written when the result is called."""

    def remove(self, feeds: Sequence[str], members: Sequence[Member], cap: AggregateCap) -> None:
        """Take members out of their aggregates; an emptied aggregate disappears."""

    def page(
        self,
        feed: str,
        *,
        limit: int,
        snapshot: str | None,
        after: Position | None,
        cap: AggregateCap,
        docs: bool = False,
    ) -> StoredAggregatePage:
        """Up to ``limit`` aggregates by position as of ``snapshot`` (None: now, and the
        page says which snapshot it used), strictly after ``after``; with ``docs``,
        the stored JSON of the shown activities the store can fetch in passing."""

    def member_ids(self, feed: str) -> list[str]:
        """Every activity id the feed holds, in any order."""

    def mark(self, feed: str, aggregates: Sequence[str] | None, *, read: bool) -> None:
        """Mark aggregates (None: all) seen, and read too when ``read``; unknown keys
        are ignored."""

    def clear(self, feeds: Sequence[str]) -> None: ...

    def close(self) -> None: ...


class ActivityCache(Protocol):
    """Where hydration looks before the canonical store (stored JSON by id)."""

    def get_many(self, activity_ids: Sequence[str]) -> dict[str, bytes]: ...

    def put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> None:
        """Cache ``(version, JSON)`` by id, each only over an older version: a
        read's refill that raced with an update must not undo it."""

    def prepare_put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> Callable[[], Any]:
        """:meth:`put_many` encoded now, done when called (see ``send_together``)."""

    def delete(self, activity_ids: Sequence[str]) -> None: ...


class SnapshotStore(Protocol):
    """Frozen orders of ranked feed pages, by random key, each kept ``ttl_ms``.

    A ranked feed's first page freezes the order of its candidates here;
    later pages read from it, so scores changing underneath show no item
    twice and skip none. A snapshot is written once and never changed.
    """

    def put(self, key: str, body: bytes, ttl_ms: int) -> None: ...

    def get(self, key: str) -> bytes | None:
        """The body put under ``key``, or None once it has expired (or never was)."""


class NoCache:
    """For stores that share the canonical store's database: nothing to cache."""

    def get_many(self, activity_ids: Sequence[str]) -> dict[str, bytes]:
        return {}

    def put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> None:
        return None

    def prepare_put_many(self, docs: Mapping[str, tuple[int, bytes]]) -> Callable[[], Any]:
        return no_call

    def delete(self, activity_ids: Sequence[str]) -> None:
        return None


def no_call() -> None:
    """A prepared call (or a hook) with nothing to do."""


class Sender(Protocol):
    """How a publish's writes after its commit are made (see
    ``tidings.stores.redis.behind``)."""

    def submit(
        self, calls: Sequence[Callable[[], Any]], done: Callable[[BaseException | None], None]
    ) -> None:
        """Make ``calls`` (as :func:`send_together`); ``done`` is told exactly
        once how they went: None, or the error."""

    def settle(self) -> None:
        """Wait until every call submitted so far is made and ``done`` told."""

    def pending(self) -> bool:
        """Whether calls submitted are not all made yet."""


class SendNow:
    """Calls made before :meth:`submit` returns."""

    def submit(
        self, calls: Sequence[Callable[[], Any]], done: Callable[[BaseException | None], None]
    ) -> None:
        send_now(calls, done)

    def settle(self) -> None:
        return None

    def pending(self) -> bool:
        return False


def send_now(
    calls: Sequence[Callable[[], Any]], done: Callable[[BaseException | None], None]
) -> None:
    """:func:`send_together`, then ``done`` told how it went."""
    try:
        send_together(calls)
    except Exception as exc:
        done(exc)
    else:
        done(None)


def send_together(calls: Sequence[Callable[[], Any]]) -> None:
    """Make ``calls``: those prepared for a server (they carry a ``server``
    that can ``send`` several; servers of one kind on one client count as
    one) in one round trip per server, up to the next call without a server,
    which is made only once every call before it was sent (another store's
    write, the live-events hook). Calls to different servers are independent
    writes, sent server by server.

    A publish's writes after its commit (the activity cached, its own feed,
    the counts it moved) are three round trips to Redis apart, one together.
    """
    pending: dict[tuple[type, int], tuple[Any, list[Callable[[], Any]]]] = {}

    def flush() -> None:
        for server, prepared in pending.values():
            server.send(prepared)
        pending.clear()

    for call in calls:
        server = getattr(call, "server", None)
        if server is None:
            flush()
            call()
        else:
            key = (type(server), id(getattr(server, "client", server)))
            pending.setdefault(key, (server, []))[1].append(call)
    flush()
