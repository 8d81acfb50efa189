"""Stateful differential test: every store against the in-memory reference.

Hypothesis drives random sequences of publishes, removals, updates, follows,
unfollows (all of them while deliveries are still in flight: deliveries wait
for a rule of their own, which runs one deliverer or two at once),
fan-out reclassifications (any threshold, so sources switch
between push and pull), time passing with reader sweeps (so follower feeds
go idle and are rebuilt when read) and cursor walks against two engines at once: one on the memory
timeline store (the reference) and one on the store under test (SQL on
SQLite, Redis, SQL on PostgreSQL). Every operation's outcome and every page
of every read must be identical.

Ids are random, so left alone the two engines would mint different ids and
order same-millisecond activities differently. The random part of each id is
therefore drawn by Hypothesis and fed to both engines through the ``os``
that :mod:`tidings.core.ids` sees, which makes the engines mint identical ids (and
lets Hypothesis explore the order of activities that share a millisecond).
Results, ids and cursors are then compared exactly.

Flat reads are also checked against a model of what a reader sees, built from
the facts alone (which activities exist, where each was added and addressed,
who follows whom from where, which sources are pulled): the feed's
materialised entries, plus its pulled sources, plus, past the oldest
materialised entry, its whole history from the canonical store.

The universe is small on purpose: few feeds, tiny caps (so trimming happens
all the time), few foreign ids (so re-adds are idempotent no-ops) and few
distinct times (so equal timestamps are common).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, Literal

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import select

from servers import PostgresServer
from tidings import (
    Activity,
    ActivityNotFound,
    FeedGroup,
    FeedKind,
    Settings,
    StoreName,
    Tidings,
    TidingsError,
)
from tidings.canonical.schema import follows
from tidings.core import ids
from tidings.core.aggregation import AggregatePage
from tidings.core.fanout import Strategy
from tidings.stores.redis import connect
from tidings.stores.redis.keys import namespace_pattern

USERS = ["user:u1", "user:u2", "user:u3", "user:u4"]
TIMELINES = ["timeline:t1", "timeline:t2", "timeline:t3"]
FEEDS = USERS + TIMELINES
# Aggregated feeds: tiny caps on aggregates and aggregate sizes, and templates over the
# few distinct times (so aggregates fill, merge and get trimmed all the time).
AGGREGATED = ["agg:a1", "agg:a2"]
NOTIFICATIONS = ["note:n1"]
AGGREGATE_FEEDS = AGGREGATED + NOTIFICATIONS
GROUPS = {
    "timeline": FeedGroup(max_length=4),
    "user": FeedGroup(max_length=6),
    "agg": FeedGroup(
        kind=FeedKind.AGGREGATED,
        max_length=3,
        max_aggregate_size=2,
        aggregation="{actor}:{time:%S}",
    ),
    "note": FeedGroup(
        kind=FeedKind.NOTIFICATION, max_length=3, max_aggregate_size=2, aggregation="{time:%S.%f}"
    ),
}
FOREIGN_IDS = ["f1", "f2", "f3"]
EXTRA_KEYS = ["k1", "k2", "k3"]

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# Few distinct times, two of them one millisecond apart; None means "now".
TIMES: list[datetime | None] = [
    NOW - timedelta(seconds=2),
    NOW - timedelta(seconds=1),
    NOW - timedelta(seconds=1, milliseconds=1),
    NOW,
    None,
]

_names = itertools.count(1)

Outcome = tuple[str, Any]


def outcome(call: Callable[[], Any]) -> Outcome:
    """The result of ``call``, or the class of the tidings error it raised."""
    try:
        return ("ok", call())
    except TidingsError as exc:
        return ("error", type(exc).__name__)


@contextmanager
def minting(random_part: int) -> Iterator[None]:
    """Make :func:`tidings.core.ids.new_id` use ``random_part`` (then its successors) as its
    80 random bits, seen only by the ids module."""
    parts = itertools.count(random_part)

    def urandom(n: int) -> bytes:
        assert n == 10, f"ids asked for {n} random bytes"
        return (next(parts) % (1 << 80)).to_bytes(10, "big")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ids, "os", SimpleNamespace(urandom=urandom))
        yield


def walk(engine: Tidings, feed: str, limit: int) -> list[tuple[list[Activity], str | None]]:
    """Every page of ``feed``, following cursors to the end."""
    pages: list[tuple[list[Activity], str | None]] = []
    cursor = None
    while True:
        page = engine.read(feed, limit=limit, cursor=cursor)
        pages.append((page.results, page.next))
        # Deep history: a walk with limit 1 may visit every activity.
        assert len(pages) <= 500, f"cursor walk of {feed} does not end"
        if page.next is None:
            return pages
        cursor = page.next


def walk_aggregates(engine: Tidings, feed: str, limit: int) -> list[AggregatePage]:
    """Every page of the aggregated ``feed``, following cursors to the end."""
    pages = [engine.read_aggregates(feed, limit=limit)]
    while (cursor := pages[-1].next) is not None:
        pages.append(engine.read_aggregates(feed, limit=limit, cursor=cursor))
        assert len(pages) <= 20, f"cursor walk of {feed} does not end"
    return pages


def raw_aggregates(engine: Tidings, feed: str) -> tuple[Any, ...]:
    """What the aggregate store holds for ``feed`` (stored docs aside)."""
    cap = engine.deliverer.aggregate_cap(feed.split(":")[0])
    page = engine.aggregates.page(feed, limit=100, snapshot=None, after=None, cap=cap)
    return page.aggregates, page.snapshot, page.unseen, page.unread


def raw_feed(engine: Tidings, feed: str) -> list[str]:
    """What the timeline store holds for ``feed`` (no hydration, no lazy cleanup)."""
    cap = engine.deliverer.cap(feed.split(":")[0])
    return engine.timeline.page(feed, limit=100, before=None, cap=cap)


def expected_walk(
    engine: Tidings,
    feed: str,
    held: list[str],
    published: list[tuple[str, str]],
    hidden: set[tuple[str, str]],
) -> list[str]:
    """What a full cursor walk of the flat ``feed`` shows, given ``held`` (its
    materialised entries before the walk), from the facts alone;
    ``hidden``: ``(feed, id)`` entries their feed's owner removed (from that
    feed alone: they never come back from its history or pulled sources)."""
    alive: dict[str, tuple[str, Activity]] = {}
    for source, activity_id in published:
        with suppress(ActivityNotFound):
            alive[activity_id] = (source, engine.get_activity(activity_id))
    with engine.db.read() as conn:
        rows = conn.execute(
            select(follows.c.source, follows.c.history_from).where(follows.c.follower == feed)
        )
        starts: dict[str, str] = {r.source: r.history_from for r in rows}
    pulled = {s for s in starts if engine.admin.fanout_strategy(s) != "push"}

    def in_history(activity_id: str) -> bool:
        source, activity = alive[activity_id]
        return (
            source == feed
            or feed in activity.to
            or (source in starts and activity_id >= (starts[source] or ""))
        )

    if engine.canonical.readers.reader_state(feed) != "active":
        held = []  # an idle feed is read from its whole history (then rebuilt)
    end = min(held) if held else "~"
    shown = {i for i in held if i in alive}
    shown |= {i for i, (s, _) in alive.items() if s in pulled and i >= (starts[s] or "")}
    shown |= {i for i in alive if i < end and in_history(i)}
    shown -= {i for f, i in hidden if f == feed}
    return sorted(shown, reverse=True)


@dataclass
class Backend:
    """Where the engine under test keeps its data; set by the test function."""

    name: str  # "sql", "redis" or "postgres"
    tmp: Path
    redis_url: str | None = None
    postgres: PostgresServer | None = None


class StoreMachine(RuleBasedStateMachine):
    backend: ClassVar[Backend | None] = None

    def __init__(self) -> None:
        super().__init__()
        backend = self.backend
        assert backend is not None, "run through test_store_matches_reference"
        self.closers: list[Callable[[], None]] = []
        #: Both engines' clock: time passes for idle followers (see time_passes).
        self.now = NOW
        try:
            self.reference, self.subject = self._open(backend)
        except BaseException:
            self.teardown()  # Hypothesis only tears down machines it finished building
            raise
        self.engines = (self.reference, self.subject)
        # (feed, id) of every activity ever published, removed ones included.
        self.published: list[tuple[str, str]] = []
        self.hidden: set[tuple[str, str]] = set()
        self.serial = itertools.count(1)

    def _open(self, backend: Backend) -> tuple[Tidings, Tidings]:
        """The reference engine and the engine under test, on fresh stores."""
        n = next(_names)
        self.dir = Path(tempfile.mkdtemp(prefix=f"ex{n}-", dir=backend.tmp))
        self.closers.append(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        reference = self._engine(f"sqlite:///{self.dir / 'reference.db'}", "memory")
        if backend.name == "sql":
            return reference, self._engine(f"sqlite:///{self.dir / 'subject.db'}", "sql")
        if backend.name == "redis":
            assert backend.redis_url is not None
            client = connect(backend.redis_url)
            namespace = f"st{os.getpid()}-{n}"

            def drop_keys() -> None:
                keys = list(client.scan_iter(match=namespace_pattern(namespace)))
                if keys:
                    client.delete(*keys)
                client.close()

            self.closers.append(drop_keys)
            subject = self._engine(
                f"sqlite:///{self.dir / 'subject.db'}",
                "redis",
                namespace=namespace,
                redis_client=client,
            )
            return reference, subject
        server = backend.postgres
        assert server is not None
        name = f"stateful_{os.getpid()}_{n}"
        url = server.new_database(name)
        self.closers.append(lambda: server.drop_database(name))
        return reference, self._engine(url, "sql")

    def _engine(
        self,
        url: str,
        store: Literal["memory", "sql", "redis"],
        *,
        namespace: str = "tidings",
        redis_client: Any = None,
    ) -> Tidings:
        engine = Tidings(
            Settings(
                database_url=url,
                timeline_store=StoreName(store),
                namespace=namespace,
                groups=GROUPS,
                pull_hysteresis=0.5,
                # The model switches at once; the grace period has its own test.
                pull_grace_seconds=0,
            ),
            redis_client=redis_client,
            # Deliveries wait for the `deliver` rule: follows, unfollows,
            # removals and reads happen while activities are in flight.
            task_runner="manual",
            clock=lambda: self.now,
        )
        # Closed before the resources registered so far (LIFO).
        self.closers.append(engine.close)
        return engine

    def teardown(self) -> None:
        errors: list[BaseException] = []
        for close in reversed(self.closers):
            try:
                close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def both(self, op: Callable[[Tidings], Any], random_part: int = 0) -> Outcome:
        """Apply ``op`` to both engines (minting the same ids) and return the common outcome."""
        results = []
        for engine in self.engines:
            with minting(random_part):
                results.append(outcome(partial(op, engine)))
        expected, got = results
        assert got == expected, f"{self.backend.name if self.backend else '?'} differs"
        return expected

    # -- rules ----------------------------------------------------------------

    @initialize(
        graph=st.lists(
            st.tuples(
                st.sampled_from(TIMELINES + USERS[:2]), st.sampled_from(USERS + TIMELINES[:1])
            ),
            max_size=10,
        ),
        threshold=st.integers(0, 3),
    )
    def follow_graph(self, graph: list[tuple[str, str]], threshold: int) -> None:
        """Start from a random follow graph, classified by a random threshold."""
        pairs = [(f, s) for f, s in graph if f != s]
        self.both(lambda e: e.follow_many(pairs, copy_limit=0))
        self.reclassify(threshold)

    def publish(
        self,
        feed: str,
        *,
        when: datetime | None,
        order: int,
        actor: str = "alice",
        foreign_id: str | None = None,
        to: list[str] | None = None,
        extra: dict[str, int] | None = None,
    ) -> None:
        serial = next(self.serial)
        data: dict[str, Any] = {
            "actor": actor,
            "verb": "post",
            "object": f"obj:{serial}",  # tells activities apart whatever their ids
            "foreign_id": foreign_id,
            "to": to or [],
            "extra": extra or {},
        }
        if when is not None:
            data["time"] = when
        # `order` decides where the id sorts among ids of the same millisecond;
        # the serial keeps ids unique.
        kind, stored = self.both(lambda e: e.add_activity(feed, data), (order << 64) | serial)
        assert kind == "ok", stored
        if stored.object == f"obj:{serial}":
            self.published.append((feed, stored.id))
        else:  # an idempotent re-add returned the activity stored before
            assert foreign_id is not None
            assert (feed, stored.id) in self.published

    @rule(
        feed=st.sampled_from(FEEDS),
        actor=st.sampled_from(["alice", "bob"]),
        when=st.sampled_from(TIMES),
        foreign_id=st.none() | st.sampled_from(FOREIGN_IDS),
        to=st.lists(st.sampled_from(TIMELINES + USERS[:1] + AGGREGATE_FEEDS), max_size=2),
        extra=st.dictionaries(st.sampled_from(EXTRA_KEYS), st.integers(0, 2), max_size=2),
        order=st.integers(0, 7),
    )
    def add(
        self,
        feed: str,
        actor: str,
        when: datetime | None,
        foreign_id: str | None,
        to: list[str],
        extra: dict[str, int],
        order: int,
    ) -> None:
        self.publish(
            feed, when=when, order=order, actor=actor, foreign_id=foreign_id, to=to, extra=extra
        )

    @rule(
        feed=st.sampled_from(FEEDS),
        posts=st.lists(
            st.tuples(st.sampled_from(TIMES), st.integers(0, 7)), min_size=2, max_size=8
        ),
        to=st.lists(st.sampled_from(TIMELINES + NOTIFICATIONS), max_size=1),
    )
    def burst(self, feed: str, posts: list[tuple[datetime | None, int]], to: list[str]) -> None:
        """Several posts in a row: fills feeds past their caps (and Redis past its slack)."""
        for when, order in posts:
            self.publish(feed, when=when, order=order, to=to)

    @precondition(lambda self: self.published)
    @rule(
        pick=st.integers(0, 1000),
        elsewhere=st.none() | st.sampled_from(FEEDS + NOTIFICATIONS),
    )
    def remove_by_id(self, pick: int, elsewhere: str | None) -> None:
        """From the feed it was added to, or (its `to` entry) from another."""
        feed, activity_id = self.published[pick % len(self.published)]
        kind, _ = self.both(lambda e: e.remove_activity(elsewhere or feed, activity_id))
        if kind == "ok" and elsewhere not in (None, feed):
            self.hidden.add((elsewhere, activity_id))
            event("removed an entry from another feed")

    @rule(feed=st.sampled_from(FEEDS), foreign_id=st.sampled_from(FOREIGN_IDS))
    def remove_by_foreign_id(self, feed: str, foreign_id: str) -> None:
        self.both(lambda e: e.remove_activity(feed, foreign_id=foreign_id))

    @precondition(lambda self: self.published)
    @rule(
        pick=st.integers(0, 1000),
        by_foreign_id=st.none() | st.tuples(st.sampled_from(FEEDS), st.sampled_from(FOREIGN_IDS)),
        set_=st.none() | st.dictionaries(st.sampled_from(EXTRA_KEYS), st.integers(0, 2)),
        unset=st.lists(st.sampled_from(EXTRA_KEYS), max_size=2),
    )
    def update(
        self,
        pick: int,
        by_foreign_id: tuple[str, str] | None,
        set_: dict[str, int] | None,
        unset: list[str],
    ) -> None:
        ref = by_foreign_id or self.published[pick % len(self.published)][1]
        self.both(lambda e: e.update_activity(ref, set=set_, unset=unset))

    @rule(
        follower=st.sampled_from(TIMELINES + USERS[:2] + AGGREGATED),
        source=st.sampled_from(USERS + TIMELINES[:1]),
        copy_limit=st.integers(0, 5),
        threshold=st.none() | st.integers(0, 3),
    )
    def follow(self, follower: str, source: str, copy_limit: int, threshold: int | None) -> None:
        # Reclassifying right after most follows keeps sources switching.
        self.both(lambda e: e.follow(follower, source, copy_limit=copy_limit))
        if threshold is not None:
            self.reclassify(threshold)

    @rule(
        follower=st.sampled_from(TIMELINES + USERS[:2] + AGGREGATED),
        source=st.sampled_from(USERS + TIMELINES[:1]),
        keep_history=st.booleans(),
    )
    def unfollow(self, follower: str, source: str, keep_history: bool) -> None:
        self.both(lambda e: e.unfollow(follower, source, keep_history=keep_history))

    @rule(threshold=st.integers(0, 4))
    def reclassify(self, threshold: int) -> None:
        self.both(lambda e: e.admin.reclassify(threshold=threshold))

    @rule(days=st.sampled_from([1, 31]))
    def time_passes(self, days: int) -> None:
        """Time passes and readers are swept: feeds not read for 30 days go idle
        (cleared, skipped by deliveries); the next read rebuilds them."""
        self.now += timedelta(days=days)
        _, idled = self.both(lambda e: e.admin.sweep_readers())
        event("a sweep idled feeds" if idled else "a sweep idled nothing")

    @rule(source=st.sampled_from(USERS + TIMELINES[:1]))
    def cut_reclassify_short(self, source: str) -> None:
        """A reclassify that died after marking a pulled source draining."""
        if self.reference.admin.fanout_strategy(source) == "pull":
            for engine in self.engines:
                engine.canonical.fanout.set_strategy(source, Strategy.DRAINING, engine.clock.ms())

    @rule(feed=st.sampled_from(FEEDS), limit=st.integers(1, 7))
    def read(self, feed: str, limit: int) -> None:
        held = raw_feed(self.reference, feed)
        expected = expected_walk(self.reference, feed, held, self.published, self.hidden)
        kind, pages = self.both(lambda e: walk(e, feed, limit))
        assert kind == "ok", pages
        # The reference itself must honour the contract: newest first, no
        # duplicates, pages of `limit` but the last; and show what the model does.
        got = [a.id for results, _ in pages for a in results]
        assert got == sorted(set(got), reverse=True)
        assert all(len(results) == limit for results, _ in pages[:-1])
        assert got == expected

    @rule(feed=st.sampled_from(AGGREGATE_FEEDS), limit=st.integers(1, 4))
    def read_aggregates(self, feed: str, limit: int) -> None:
        kind, pages = self.both(lambda e: walk_aggregates(e, feed, limit))
        assert kind == "ok", pages
        keys = [g.key for page in pages for g in page.results]
        assert len(keys) == len(set(keys))
        assert len(keys) <= GROUPS[feed.split(":")[0]].max_length
        assert all(len(page.results) == limit for page in pages[:-1])

    @rule(
        feed=st.sampled_from(NOTIFICATIONS),
        limit=st.integers(1, 4),
        mark_seen=st.booleans(),
        mark_read=st.booleans(),
    )
    def read_and_mark(self, feed: str, limit: int, mark_seen: bool, mark_read: bool) -> None:
        self.both(
            lambda e: e.read_aggregates(feed, limit, mark_seen=mark_seen, mark_read=mark_read)
        )

    @rule(
        feed=st.sampled_from(NOTIFICATIONS),
        pick=st.none() | st.lists(st.integers(0, 3), max_size=3),
        read=st.booleans(),
    )
    def mark(self, feed: str, pick: list[int] | None, read: bool) -> None:
        keys = None
        if pick is not None:
            held = [g.key for g in raw_aggregates(self.reference, feed)[0]] + ["unknown"]
            keys = [held[i % len(held)] for i in pick]
        if read:
            self.both(lambda e: e.mark_read(feed, keys))
        else:
            self.both(lambda e: e.mark_seen(feed, keys))

    # -- invariants -----------------------------------------------------------

    @rule(deliverers=st.sampled_from([1, 2]))
    def deliver(self, deliverers: int) -> None:
        """Carry out what is pending: the reference with one deliverer, the
        subject with one or with two at once (the order entries then arrive
        in, and which deliverer writes which, must not matter)."""
        self.reference.admin.drain()
        if deliverers == 2:
            runner = self.subject.parts.deliverer
            with ThreadPoolExecutor(2) as pool:
                for done in [pool.submit(runner.run_pending) for _ in range(2)]:
                    done.result()
        self.subject.admin.drain()

    @invariant()
    def as_much_is_pending(self) -> None:
        assert self.subject.admin.pending() == self.reference.admin.pending()

    @invariant()
    def stores_hold_the_same_ids(self) -> None:
        for feed in FEEDS:
            assert raw_feed(self.subject, feed) == raw_feed(self.reference, feed), feed
        for feed in AGGREGATE_FEEDS:
            assert raw_aggregates(self.subject, feed) == raw_aggregates(self.reference, feed), feed


# PostgreSQL runs fewer examples: each creates, migrates and drops a database
# of its own (the slowest run of the three), and most of the SQL it runs is
# SQLite's too, which runs 40.
SETTINGS = {
    "sql": settings(max_examples=40, stateful_step_count=30),
    "redis": settings(max_examples=40, stateful_step_count=30),
    "postgres": settings(max_examples=12, stateful_step_count=30),
}


# Passing, the three runs take well under a minute. A failure is shrunk for up
# to Hypothesis's five-minute cap; the suite's 120 s timeout would cut that
# short and report a confusing "flaky" error instead of the counterexample.
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "store",
    [
        "sql",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
)
def test_store_matches_reference(
    store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    backend = Backend(store, tmp_path)
    if store == "redis":
        backend.redis_url = request.getfixturevalue("redis_url")
    elif store == "postgres":
        backend.postgres = request.getfixturevalue("postgres_server")
    StoreMachine.backend = backend
    try:
        run_state_machine_as_test(
            StoreMachine,
            settings=settings(
                SETTINGS[store],
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            ),
        )
    finally:
        StoreMachine.backend = None
