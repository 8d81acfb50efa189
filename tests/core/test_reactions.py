"""Reactions in the pure core: validation, what a page may include, affinity."""

from __future__ import annotations

from typing import Any

import pytest

from tidings.core.errors import ValidationError
from tidings.core.reactions import (
    AFFINITY_HALF,
    MAX_DATA_BYTES,
    Include,
    affinity,
    parse_includes,
    validate_reaction,
)

AID = "0" * 32


def test_a_valid_reaction() -> None:
    new = validate_reaction(AID, "comment", "alice", {"text": "hi"}, ["notification:bob"] * 2)
    assert (new.kind, new.user, new.data, new.parent) == ("comment", "alice", {"text": "hi"}, None)
    assert new.to == ("notification:bob",)  # repeats dropped


#: (arguments over a valid reaction, the field named, a part of the message)
BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"activity_id": "x"}, "activity_id", "not an activity id"),
    ({"kind": "Like"}, "kind", "a-z"),
    ({"kind": "1like"}, "kind", "starting with a letter"),
    ({"kind": "l" * 65}, "kind", "1-64"),
    ({"kind": 3}, "kind", "1-64"),
    ({"user": ""}, "user", "1-255"),
    ({"user": "\ud800"}, "user", "surrogates"),
    ({"data": "text"}, "data", "JSON object"),
    ({"data": {"t": "x" * MAX_DATA_BYTES}}, "data", "the limit is 10,240"),
    ({"data": {"n": float("inf")}}, "data.n", "finite"),
    ({"to": "notification:bob"}, "to", "list of feed ids"),
    ({"to": ["a:b"] * 101}, "to", "the limit is 100"),
    ({"parent": "x"}, "parent", "not a reaction id"),
]


@pytest.mark.parametrize(("change", "field", "message"), BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_bad_reactions(change: dict[str, Any], field: str, message: str) -> None:
    args: dict[str, Any] = {"activity_id": AID, "kind": "like", "user": "alice", **change}
    with pytest.raises(ValidationError, match=message) as caught:
        validate_reaction(**args)
    assert caught.value.field == field


def test_to_feeds_are_checked_by_position() -> None:
    def check(feed: str) -> None:
        if feed != "notification:bob":
            raise ValidationError("unknown feed group")

    with pytest.raises(ValidationError) as caught:
        validate_reaction(AID, "like", "a", to=["notification:bob", "x:y"], check_feed=check)
    assert caught.value.field == "to.1"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, set()),
        ("", set()),
        ("counts", {Include.COUNTS}),
        ("counts,latest,own", {Include.COUNTS, Include.LATEST, Include.OWN}),
        (" own , counts,", {Include.OWN, Include.COUNTS}),
        (["latest"], {Include.LATEST}),
    ],
)
def test_includes(raw: Any, expected: set[Include]) -> None:
    assert parse_includes(raw) == expected


def test_an_unknown_include_names_the_allowed_ones() -> None:
    with pytest.raises(ValidationError, match="'likes'; allowed: counts, latest, own"):
        parse_includes("counts,likes")


@pytest.mark.parametrize(
    ("reactions", "follows", "expected"),
    [
        (0, False, 0.0),
        (0, True, 3 / 13),
        (10, False, 0.5),
        (7, True, 0.5),
        (-4, False, 0.0),
        (10_000, True, 10_003 / 10_013),
    ],
)
def test_affinity_saturates_below_one(reactions: int, follows: bool, expected: float) -> None:
    assert affinity(reactions, follows) == pytest.approx(expected)
    assert 0 <= affinity(reactions, follows) < 1
    assert AFFINITY_HALF == 10
