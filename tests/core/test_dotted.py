"""Dotted paths into an activity's ``extra`` (:mod:`tidings.core.dotted`)."""

from __future__ import annotations

from typing import Any

import pytest

from tidings.core.dotted import MAX_PATH_PARTS, apply
from tidings.core.errors import ValidationError

EXTRA = {"p": {"price": {"eur": 20, "usd": 22}, "name": "lamp"}, "n": 1}


@pytest.mark.parametrize(
    ("changes", "removals", "expected"),
    [
        ({"n": 2}, [], {**EXTRA, "n": 2}),
        ({"p.price.eur": 18}, [], {"p": {"price": {"eur": 18, "usd": 22}, "name": "lamp"}, "n": 1}),
        ({}, ["p.name", "p.price.usd"], {"p": {"price": {"eur": 20}}, "n": 1}),
        ({"new.deep.key": [1]}, [], {**EXTRA, "new": {"deep": {"key": [1]}}}),
        ({}, ["missing.path", "n.inside", "p.none"], EXTRA),  # nothing there: no change
        ({"p": None}, [], {"p": None, "n": 1}),
        ({"p.price": 5}, ["p.price"], {"p": {"price": 5, "name": "lamp"}, "n": 1}),  # unset first
    ],
)
def test_paths_set_and_unset(
    changes: dict[str, Any], removals: list[str], expected: dict[str, Any]
) -> None:
    before = repr(EXTRA)
    assert apply(EXTRA, changes, removals) == expected
    assert repr(EXTRA) == before  # (a new dict; the one given is left alone)


@pytest.mark.parametrize(
    ("changes", "removals", "message"),
    [
        ({"n.count": 1}, [], "goes through 'n', which is not an object"),
        ({"p.name.first": "x"}, [], "goes through 'p.name'"),
        ({"a..b": 1}, [], "empty part"),
        ({".a": 1}, [], "empty part"),
        ({}, ["a."], "empty part"),
        ({".".join("k" * (MAX_PATH_PARTS + 1)): 1}, [], f"the limit is {MAX_PATH_PARTS}"),
    ],
)
def test_bad_paths_are_refused(changes: dict[str, Any], removals: list[str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        apply(EXTRA, changes, removals)
