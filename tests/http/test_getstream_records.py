"""Reactions, users and collection entries in Stream's shapes, and the
references enrichment resolves: tables for the pure functions of
:mod:`tidings.http.getstream.records` (no server)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tidings.core.reactions import Reaction
from tidings.core.users import StoredObject, User
from tidings.http.getstream.records import entry_out, reaction_out, reference, stamp, user_out

ACTIVITY = "0190a1b2c3d4e5f60718293a4b5c6d7e"
REACTION = "0190a1b2c3d5e5f60718293a4b5c6d7f"
WHEN_US = 1_714_566_615_123_456  # 2024-05-01T12:30:15.123456Z


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("SU:alice", ("SU", "alice")),
        ("SO:food:p1", ("SO", "food", "p1")),
        ("SO:food:a:b", ("SO", "food", "a:b")),
        ("SR:0190a1b2-c3d4-e5f6-0718-293a4b5c6d7e", ("SR", "0190a1b2-c3d4-e5f6-0718-293a4b5c6d7e")),
        ("SU:", None),
        ("SO:food", None),
        ("SO::p1", None),
        ("SX:alice", None),
        ("alice", None),
        ("photo:17", None),
        (17, None),
    ],
)
def test_references(value: object, names: tuple[str, ...] | None) -> None:
    assert reference(value) == names


@pytest.mark.parametrize(
    "value",
    [
        WHEN_US,
        datetime(2024, 5, 1, 12, 30, 15, 123456, UTC),
        "2024-05-01T12:30:15.123456Z",
        "2024-05-01T14:30:15.123456+02:00",
    ],
)
def test_times_are_naive_utc(value: object) -> None:
    assert stamp(value) == "2024-05-01T12:30:15.123456"


def test_a_reaction_in_streams_shape() -> None:
    child = Reaction(
        REACTION, ACTIVITY, "reply", "bob", {"t": 1}, parent=ACTIVITY, depth=2,
        to=("notification:carol",), created_us=WHEN_US, updated_us=WHEN_US,
        children_counts={"like": 2},
    )  # fmt: skip
    assert reaction_out(child.to_dict(), {"like": []}) == {
        "id": "0190a1b2-c3d5-e5f6-0718-293a4b5c6d7f",
        "kind": "reply",
        "activity_id": "0190a1b2-c3d4-e5f6-0718-293a4b5c6d7e",
        "user_id": "bob",
        "data": {"t": 1},
        "parent": "0190a1b2-c3d4-e5f6-0718-293a4b5c6d7e",
        "target_feeds": ["notification:carol"],
        "created_at": "2024-05-01T12:30:15.123456",
        "updated_at": "2024-05-01T12:30:15.123456",
        "children_counts": {"like": 2},
        "latest_children": {"like": []},
    }
    top = Reaction(REACTION, ACTIVITY, "like", "bob", created_us=WHEN_US, updated_us=WHEN_US)
    assert reaction_out(top.to_dict())["parent"] == ""


def test_users_and_entries_in_streams_shape() -> None:
    user = User("ann", "ann", {"name": "Ann"}, WHEN_US, WHEN_US)
    assert user_out(user) == {
        "id": "ann",
        "data": {"name": "Ann"},
        "created_at": "2024-05-01T12:30:15.123456",
        "updated_at": "2024-05-01T12:30:15.123456",
    }
    counted = user_out(user, {"followers": 3, "following": 1, "activities": 9})
    assert (counted["followers_count"], counted["following_count"]) == (3, 1)
    entry = entry_out(StoredObject("food", "p1", {"name": "pizza"}, WHEN_US, WHEN_US))
    assert entry == {
        "id": "p1",
        "collection": "food",
        "foreign_id": "food:p1",
        "data": {"name": "pizza"},
        "created_at": "2024-05-01T12:30:15.123456",
        "updated_at": "2024-05-01T12:30:15.123456",
    }
