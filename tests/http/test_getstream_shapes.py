"""The pure shapes of aggregated reads and activity changes over the Stream
protocol (:mod:`tidings.http.getstream.shapes`), without a server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tidings.core import ids
from tidings.core.activity import Activity
from tidings.core.aggregation import Aggregate
from tidings.http.getstream.mapper import MappingError, to_uuid
from tidings.http.getstream.shapes import (
    group_id,
    group_key,
    group_keys,
    group_out,
    identity,
    partial_change,
    replacement,
)

WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("key", ["alice:like:2024-05-01", "a,b:c", "100%,,%2C", "", "%25"])
def test_group_ids_round_trip_even_in_lists(key: str) -> None:
    assert group_key(group_id(key)) == key
    assert "," not in group_id(key)
    if key:
        assert group_keys(",".join([group_id(key), group_id("x")])) == [key, "x"]


def test_a_group_as_stream_returns_it() -> None:
    activity = Activity(
        id=ids.new_id(1_714_564_800_000), actor="a", verb="like", object="p:1", time=WHEN
    )
    aggregate = Aggregate("like:p:1", "like", 2, 1, [activity], WHEN, WHEN, False, True)
    out = group_out(aggregate, True, "notification:b", {activity.id: "user:a"})
    assert out["id"] == "like:p:1"
    assert [a["id"] for a in out["activities"]] == [to_uuid(activity.id)]
    assert out["activities"][0]["origin"] == "user:a"  # where it was published
    assert (out["created_at"], out["is_seen"], out["is_read"]) == (
        "2024-05-01T12:00:00.000000", False, True,
    )  # fmt: skip
    plain = group_out(aggregate, False, "user:a", {activity.id: "user:a"})
    assert "is_seen" not in plain
    assert plain["activities"][0]["origin"] is None  # read where it was published


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ({"id": to_uuid("0" * 32)}, "0" * 32),
        ({"foreign_id": "f", "time": "2024-05-01T12:00:00.000000"}, ("f", WHEN)),
        ({"foreign_id": "f", "time": "2024-05-01T14:00:00+02:00"}, ("f", WHEN)),
    ],
)
def test_identity_of_a_change(item: dict[str, Any], named: object) -> None:
    assert identity(item, "changes.0") == named


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({}, "needs id, or foreign_id and time"),
        ({"foreign_id": "f"}, "needs id"),
        ({"foreign_id": "f", "time": "soon"}, "changes.0.time: not a time"),
        ({"id": to_uuid("0" * 32), "foreign_id": "f"}, "not both"),
        ({"id": "17"}, "changes.0.id: not an activity id"),
    ],
)
def test_bad_identities_are_refused(item: dict[str, Any], message: str) -> None:
    with pytest.raises(MappingError, match=message):
        identity(item, "changes.0")


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"set": {"a": 1}, "unset": ["a"]}, "both set and unset"),
        ({"set": {"verb.x": 1}}, "'verb' is not a custom field"),
        ({"unset": ["id"]}, "'id' is not a custom field"),
        ({"set": [1]}, "set: must be a JSON object"),
        ({"unset": "a"}, "unset: must be a list"),
    ],
)
def test_bad_partial_changes_are_refused(item: dict[str, Any], message: str) -> None:
    with pytest.raises(MappingError, match=message):
        partial_change(item, "changes.0")


def test_a_replacement_sets_the_custom_fields_sent_and_unsets_the_rest() -> None:
    stored = {
        "actor": "a",
        "verb": "post",
        "object": "o",
        "target": None,
        "extra": {"x": 1, "y": 2},
    }
    sent = {"actor": "a", "verb": "post", "time": "t", "foreign_id": "f", "id": "i", "y": 3, "z": 4}
    assert replacement(stored, sent, "activities.0") == ({"y": 3, "z": 4}, ["x"])
    with pytest.raises(MappingError, match=r"activities\.0\.object: differs"):
        replacement(stored, {**sent, "object": "other"}, "activities.0")
