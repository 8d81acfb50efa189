"""Follower lists kept between batched deliveries: used only while their
source's followers version holds, so follows, unfollows and tier moves made by
any process (here: a second engine on the same database) reach the next
delivery."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidings import Settings, StoreName, Tidings
from tidings.canonical.follower_lists import FollowerList, FollowerLists


def listed(*followers: str) -> FollowerList:
    return tuple((f, 0) for f in followers)


@pytest.mark.parametrize(
    ("puts", "get", "expected"),
    [
        # (source, version, followers) put in order; then a get of (source, version)
        ([("s", 1, listed("a"))], ("s", 1), listed("a")),
        ([("s", 1, listed("a"))], ("s", 2), None),  # the version moved
        ([("s", 1, listed("a")), ("s", 2, listed("a", "b"))], ("s", 2), listed("a", "b")),
        ([("s", 1, listed("a")), ("s", 2, listed("b"))], ("s", 1), None),
        # a batch that read an older list after another kept a newer one
        ([("s", 2, listed("b")), ("s", 1, listed("a"))], ("s", 2), listed("b")),
        ([("s", 0, ())], ("s", 0), ()),  # no followers is a list too
        ([], ("s", 0), None),
        # limit 6, a list weighing its entries + 1: the least recently used goes first
        (
            [("s", 1, listed("a", "b")), ("t", 1, listed("c", "d")), ("u", 1, listed("e"))],
            ("s", 1),
            None,
        ),
        (
            [("s", 1, listed("a", "b")), ("t", 1, listed("c", "d")), ("u", 1, listed("e"))],
            ("t", 1),
            listed("c", "d"),
        ),
        # empty lists count too: seven of them do not fit in 6
        ([(f"e{i}", 0, ()) for i in range(7)], ("e0", 0), None),
        ([(f"e{i}", 0, ()) for i in range(7)], ("e6", 0), ()),
        ([("s", 1, listed(*"abcdef"))], ("s", 1), None),  # over the limit alone
        # a new list over the limit still drops the old one
        ([("s", 1, listed("a")), ("s", 2, listed(*"abcdef"))], ("s", 1), None),
    ],
)
def test_kept_lists(
    puts: list[tuple[str, int, FollowerList]], get: tuple[str, int], expected: FollowerList | None
) -> None:
    lists = FollowerLists(limit=6)
    for source, version, followers in puts:
        lists.put(source, version, followers)
    assert lists.get(*get) == expected


def test_a_get_keeps_a_list_from_being_dropped_first() -> None:
    lists = FollowerLists(limit=6)
    lists.put("s", 1, listed("a", "b"))
    lists.put("t", 1, listed("c", "d"))
    assert lists.get("s", 1) is not None  # s is now the most recently used
    lists.put("u", 1, listed("e"))
    assert lists.get("t", 1) is None
    assert lists.get("s", 1) == listed("a", "b")
    assert len(lists) == 2


def test_a_list_is_read_again_after_its_max_age() -> None:
    now = [100.0]
    lists = FollowerLists(limit=6, max_age_s=60, clock=lambda: now[0])
    lists.put("s", 1, listed("a"))
    now[0] += 60
    assert lists.get("s", 1) == listed("a")
    now[0] += 0.001
    assert lists.get("s", 1) is None


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def two_engines(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Tidings, Tidings]]:
    """A delivering engine and another on the same database (another process)."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
    else:
        url = f"sqlite:///{tmp_path / 'lists.db'}"
    settings = Settings(database_url=url, timeline_store=StoreName.SQL, inactive_days=30)
    with (
        Tidings(settings, task_runner="manual") as deliverer,
        Tidings(settings, task_runner="manual") as other,
    ):
        yield deliverer, other


def post(engine: Tidings, n: int) -> str:
    return engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": f"p:{n}"}).id


def holds(engine: Tidings, feed: str, activity: str) -> bool:
    return activity in engine.timeline.page(
        feed, limit=100, before=None, cap=engine.deliverer.cap("timeline")
    )


def test_changes_made_elsewhere_reach_the_next_delivery(
    two_engines: tuple[Tidings, Tidings],
) -> None:
    deliverer, other = two_engines
    other.follow_many([("timeline:alice", "user:bob"), ("timeline:carl", "user:bob")])
    first = post(other, 1)
    deliverer.admin.drain()
    assert holds(deliverer, "timeline:alice", first)
    kept = deliverer.canonical.follows.lists
    assert len(kept) == 1  # bob's followers are kept now

    # A follow and an unfollow made by the other engine
    other.follow("timeline:dana", "user:bob")
    other.unfollow("timeline:carl", "user:bob")
    second = post(other, 2)
    deliverer.admin.drain()
    assert holds(deliverer, "timeline:dana", second)
    assert not holds(deliverer, "timeline:carl", second)
    assert holds(deliverer, "timeline:alice", second)

    # An unfollow and a follow again (the count is back where it was)
    other.unfollow("timeline:dana", "user:bob")
    other.follow("timeline:erin", "user:bob")
    third = post(other, 3)
    deliverer.admin.drain()
    assert not holds(deliverer, "timeline:dana", third)
    assert holds(deliverer, "timeline:erin", third)


def test_a_follower_idled_and_woken_elsewhere_is_skipped_then_reached(
    two_engines: tuple[Tidings, Tidings],
) -> None:
    deliverer, other = two_engines
    other.follow_many([("timeline:alice", "user:bob"), ("timeline:carl", "user:bob")])
    now = other.clock.ms()
    other.canonical.readers.record_reads({"timeline:alice": now, "timeline:carl": now}, now)
    post(other, 1)
    deliverer.admin.drain()  # bob's followers are kept
    # alice stops reading; the other engine's sweep idles her 31 days later
    later = other.clock.ms() + 31 * 86_400_000
    other.canonical.readers.record_reads({"timeline:carl": later}, later)
    sweep = other.canonical.readers.sweep_readers(
        lambda: later, recent_ms=86_400_000, idle_ms=30 * 86_400_000, can_idle=lambda f: True
    )
    assert [f for idled in sweep for f in idled] == ["timeline:alice"]
    second = post(other, 2)
    deliverer.admin.drain()
    assert not holds(deliverer, "timeline:alice", second)
    assert holds(deliverer, "timeline:carl", second)
    # She reads again: woken by the other engine, reached by the next delivery
    assert other.canonical.readers.record_reads({"timeline:alice": later + 1}, later + 1)
    deliverer.admin.drain()  # her rebuild, from the canonical store, first
    third = post(other, 3)
    deliverer.admin.drain()
    assert holds(deliverer, "timeline:alice", third)


def test_an_unchanged_version_reads_no_list(
    two_engines: tuple[Tidings, Tidings], monkeypatch: pytest.MonkeyPatch
) -> None:
    deliverer, other = two_engines
    other.follow_many([("timeline:alice", "user:bob"), ("timeline:carl", "user:bob")])
    reads: list[str] = []
    fetch = deliverer.db.fetch_raw

    def counted(conn: Any, sql: str, params: tuple[Any, ...]) -> list[Any]:
        if "tidings_follows WHERE source IN" in sql:
            reads.append(sql)
        return fetch(conn, sql, params)

    monkeypatch.setattr(deliverer.db, "fetch_raw", counted)
    for n in range(3):
        post(other, n)
        deliverer.admin.drain()
    assert len(reads) == 1  # the first batch only
    other.follow("timeline:dana", "user:bob")
    post(other, 3)
    deliverer.admin.drain()
    assert len(reads) == 2  # the follow moved the version
