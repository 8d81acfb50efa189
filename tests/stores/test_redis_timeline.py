"""How the Redis timeline store writes a feed (its results are held to the
timeline contract): the commands its script runs, from the test server's
``INFO commandstats``, and the feed's value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tidings.core import ids
from tidings.stores.base import Cap
from tidings.stores.redis import RedisTimelineStore, connect, disconnect

pytestmark = pytest.mark.redis

CAP = Cap(800)
FEED = "timeline:x"


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    made = connect(redis_url)
    yield made
    disconnect(made)


@pytest.fixture
def timeline(client: Any) -> Iterator[RedisTimelineStore]:
    made = RedisTimelineStore(client, "t")
    yield made
    made.close()


def calls(client: Any) -> dict[str, int]:
    """Calls per command so far (the scripts' own commands included)."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()}


def commands_of(client: Any, write: Any) -> dict[str, int]:
    """The commands ``write()`` made Redis run, by name (the script call left out)."""
    before = calls(client)
    write()
    after = calls(client)
    ran = {name: n - before.get(name, 0) for name, n in after.items()}
    return {name: n for name, n in ran.items() if n and name not in ("evalsha", "info")}


def full_feed(timeline: RedisTimelineStore) -> list[str]:
    """A full feed at cap 800 whose ids are 10 ms apart (room for others between)."""
    a = [ids.new_id(1_700_000_000_000 + 10 * i) for i in range(CAP.max_length)]
    timeline.add([FEED], a, CAP)
    return a


def read(timeline: RedisTimelineStore) -> list[str]:
    return timeline.page(FEED, limit=1000, before=None, cap=CAP)


def test_a_new_newest_id_is_appended(client: Any, timeline: RedisTimelineStore) -> None:
    a = full_feed(timeline)
    newest = ids.new_id(1_700_000_000_000 + 10 * CAP.max_length)
    ran = commands_of(client, lambda: timeline.add_each({FEED: [newest]}, CAP))
    assert ran == {"getrange": 1, "append": 1}
    assert read(timeline) == [newest, *a[:0:-1]]


@pytest.mark.parametrize("back", [3, 300])
def test_an_out_of_order_id_rewrites_only_the_tail(
    client: Any, timeline: RedisTimelineStore, back: int
) -> None:
    # Given a full feed
    a = full_feed(timeline)
    key = timeline.keys.feed(FEED)
    length = client.strlen(key)
    # When an id goes `back` entries from the newest
    late = ids.new_id(ids.id_ms(a[-back]) + 1)
    ran = commands_of(client, lambda: timeline.add_each({FEED: [late]}, CAP))
    # Then the script read growing tails and wrote one SETRANGE: no GET, no SET
    assert ran.keys() == {"getrange", "strlen", "setrange"}
    assert ran["setrange"] == 1
    assert ran["getrange"] <= 5
    assert client.strlen(key) == length + 16
    # And the feed holds it in place, its oldest entry now trimmed
    assert read(timeline) == sorted([late, *a[1:]], reverse=True)


def test_an_id_below_a_full_feeds_window_writes_nothing(
    client: Any, timeline: RedisTimelineStore
) -> None:
    a = full_feed(timeline)
    old = ids.new_id(ids.id_ms(a[0]) - 1)
    ran = commands_of(client, lambda: timeline.add_each({FEED: [old, a[5]]}, CAP))
    assert "setrange" not in ran
    assert "append" not in ran
    assert "set" not in ran
    assert read(timeline) == a[::-1]


def test_the_value_is_compacted_after_slack_trimmed_ids(
    client: Any, timeline: RedisTimelineStore
) -> None:
    # Given a full feed that takes out-of-order ids, each trimming its oldest entry
    a = full_feed(timeline)
    key = timeline.keys.feed(FEED)
    late = sorted(ids.new_id(ids.id_ms(a[-2]) + 1) for _ in range(CAP.max_length + 1))
    for i in late[:-1]:
        timeline.add_each({FEED: [i]}, CAP)
    # Then the value carries the trimmed ones, `slack` (800) of them at most
    assert client.strlen(key) == 2 * CAP.max_length * 16
    ran = commands_of(client, lambda: timeline.add_each({FEED: [late[-1]]}, CAP))
    assert ran.get("set") == 1
    assert client.strlen(key) == CAP.max_length * 16
    assert read(timeline) == [a[-1], *late[:1:-1]]
