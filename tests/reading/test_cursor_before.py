"""A flat feed's page from an activity id (``feeds.reads.cursor_before``): what
the Stream protocol's ``id_lt`` pages by, on every timeline store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conftest import EngineFactory
from tidings import Settings, StoreName, Tidings
from tidings.core import ids
from tidings.core.errors import ValidationError

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def test_a_page_starts_below_any_id(make_engine: EngineFactory) -> None:
    engine = make_engine()
    at = [T0 + timedelta(seconds=i) for i in range(5)]
    added = [
        engine.add_activity("user:a", {"actor": "a", "verb": "v", "object": "o", "time": t}).id
        for t in at
    ]
    newest_first = added[::-1]

    cursor = engine.reads.cursor_before("user:a", newest_first[1])
    assert [a.id for a in engine.read("user:a", limit=2, cursor=cursor).results] == newest_first[
        2:4
    ]

    # An id held by no feed is a place all the same: between its neighbours.
    between = ids.floor_id(int((T0 + timedelta(seconds=2.5)).timestamp() * 1000))
    cursor = engine.reads.cursor_before("user:a", between)
    assert [a.id for a in engine.read("user:a", cursor=cursor).results] == newest_first[2:]


@pytest.mark.parametrize(
    ("feed", "activity_id", "message"),
    [
        ("timeline_ranked:a", "0" * 32, "ordered by score"),
        ("notification:a", "0" * 32, "read it with read_aggregates"),
        ("user:a", "x" * 32, "not an activity id"),
    ],
)
def test_what_has_no_place_by_id_is_refused(
    database_url: str, feed: str, activity_id: str, message: str
) -> None:
    # (refused before any store is asked: one store is enough)
    settings = Settings(database_url=database_url, timeline_store=StoreName.MEMORY)
    with (
        Tidings(settings, task_runner="sync") as engine,
        pytest.raises(ValidationError, match=message),
    ):
        engine.reads.cursor_before(feed, activity_id)
