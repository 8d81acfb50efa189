"""The firehose's filters, as tables: what matches, what is refused, and the
index agreeing with the one-filter reference on random cases."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tidings.core.errors import ValidationError
from tidings.core.firehose import (
    MAX_BOXES,
    MAX_FOLLOW,
    MAX_TRACK,
    Filter,
    FirehoseIndex,
    sample_point,
    words,
)


def act(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "019b7ca98f2e60b6f3e13280e578ac90",
        "actor": "bob",
        "verb": "post",
        "object": "photo:17",
        "target": None,
        "extra": {},
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("track", "activity", "matches"),
    [
        ("photo", act(), True),  # a word of the object
        ("PHOTO", act(), True),  # case-insensitive
        ("phot", act(), False),  # whole words only
        ("photos", act(), False),
        ("post photo", act(), True),  # space = AND, across fields
        ("post video", act(), False),
        ("video,photo", act(), True),  # comma = OR
        ("video, cat", act(), False),
        ("sunset", act(extra={"caption": "A Sunset over the bay"}), True),  # extra strings
        ("bay sunset", act(extra={"caption": "A Sunset over the bay"}), True),  # any order
        ("sunset", act(extra={"n": 3, "tags": ["beach", "sunset"]}), True),  # nested
        ("sunset", act(extra={"sunset": 1}), False),  # keys are not text
        ("album", act(target="album:9"), True),
        ("ünïcode", act(extra={"t": "ÜNÏCODE words"}), True),
        ("17", act(), True),
    ],
)
def test_track(track: str, activity: dict[str, Any], matches: bool) -> None:
    assert Filter.parse(track=track).matches(activity) is matches


@pytest.mark.parametrize(
    ("follow", "actor", "matches"),
    [
        ("bob", "bob", True),
        ("alice,bob", "bob", True),
        ("alice", "bob", False),
        ("Bob", "bob", False),
    ],
)
def test_follow(follow: str, actor: str, matches: bool) -> None:
    assert Filter.parse(follow=follow).matches(act(actor=actor)) is matches


@pytest.mark.parametrize(
    ("boxes", "extra", "matches"),
    [
        ("-10,40,10,50", {"lng": 2.35, "lat": 48.85}, True),  # Paris
        ("-10,40,10,50", {"lng": -0.12, "lat": 51.5}, False),  # London is north of it
        ("-10,40,10,50,-1,51,1,52", {"lng": -0.12, "lat": 51.5}, True),  # a second box
        ("-10,40,10,50", {"lng": 10, "lat": 50}, True),  # the edge is in
        ("-10,40,10,50", {"lat": 48.85}, False),  # no lng
        ("-10,40,10,50", {"lng": "2", "lat": 48.85}, False),  # not a number
        ("-180,-90,180,90", {"lng": 179.9, "lat": -89.9}, True),  # the world (not indexed by cell)
    ],
)
def test_locations(boxes: str, extra: dict[str, Any], matches: bool) -> None:
    assert Filter.parse(locations=boxes).matches(act(extra=extra)) is matches


def test_filters_are_ored() -> None:
    flt = Filter.parse(track="video", follow="bob")
    assert flt.matches(act())  # by actor
    assert flt.matches(act(actor="carol", object="video:1"))  # by word
    assert not flt.matches(act(actor="carol"))


def test_no_filter_is_everything() -> None:
    assert Filter.parse().matches(act())


def test_sample_is_the_same_for_everyone_and_about_its_share() -> None:
    ids = [f"{n:032x}" for n in range(20_000)]
    kept = [i for i in ids if Filter.parse(sample="10").matches(act(id=i))]
    assert kept == [i for i in ids if Filter.parse(sample=10.0).matches(act(id=i))]
    assert 1700 < len(kept) < 2300
    assert all(sample_point(i) < 10 for i in kept)


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"track": ",".join(f"w{n}" for n in range(MAX_TRACK + 1))}, "track", "limit is 400"),
        ({"track": "x" * 61}, "track", "limit is 60"),
        ({"track": "!!!"}, "track", "no words"),
        ({"follow": ",".join(f"u{n}" for n in range(MAX_FOLLOW + 1))}, "follow", "limit is 5000"),
        ({"locations": "1,2,3"}, "locations", "each box is 4"),
        ({"locations": "a,b,c,d"}, "locations", "must be numbers"),
        ({"locations": "10,40,-10,50"}, "locations", "west < east"),
        ({"locations": "0,0,1,1," * MAX_BOXES + "0,0,1,1"}, "locations", "limit is 25"),
        ({"locations": "0,0,1,nan"}, "locations", "finite"),
        ({"sample": "0"}, "sample", "0.01 to 100"),
        ({"sample": "101"}, "sample", "0.01 to 100"),
        ({"sample": "ten"}, "sample", "not a number"),
        # As a WebSocket message's JSON gives them: once an AttributeError.
        ({"track": 5}, "track", "must be a string"),
        ({"follow": 7}, "follow", "must be a string"),
        ({"locations": 1.5}, "locations", "must be a string"),
        ({"track": {"a": 1}}, "track", "must be a string"),
        ({"sample": True}, "sample", "must be a number"),
        ({"sample": {"p": 1}}, "sample", "must be a number"),
        ({"sample": 10**400}, "sample", "not a number"),
    ],
)
def test_bad_filters_are_refused_with_the_limit(
    params: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        Filter.parse(**params)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_words_are_casefolded_whole_words() -> None:
    assert words("Hello, WORLD! photo:17 straße") == ["hello", "world", "photo", "17", "strasse"]


def test_the_index_agrees_with_each_filter() -> None:
    rng = random.Random(7)
    vocabulary = ["cat", "dog", "photo", "video", "sunset", "post", "like", "beach"]
    actors = ["alice", "bob", "carol", "dave"]
    filters: dict[int, Filter] = {}
    index = FirehoseIndex()
    for conn in range(300):
        parts: dict[str, str] = {}
        if rng.random() < 0.5:
            parts["track"] = ",".join(
                " ".join(rng.sample(vocabulary, rng.randint(1, 2)))
                for _ in range(rng.randint(1, 3))
            )
        if rng.random() < 0.3:
            parts["follow"] = ",".join(rng.sample(actors, 2))
        if rng.random() < 0.2:
            w, s = rng.uniform(-180, 170), rng.uniform(-90, 80)
            parts["locations"] = f"{w},{s},{w + rng.uniform(0.1, 10)},{s + rng.uniform(0.1, 10)}"
        if rng.random() < 0.1:
            parts["sample"] = str(rng.choice([1, 10, 50]))
        filters[conn] = Filter.parse(**parts)
        index.add(conn, filters[conn])
    for conn in range(0, 300, 7):  # some leave
        index.remove(conn)
        del filters[conn]
    for n in range(500):
        activity = act(
            id=f"{n:032x}",
            actor=rng.choice(actors),
            verb=rng.choice(vocabulary),
            object=f"{rng.choice(vocabulary)}:{n}",
            extra={"lng": rng.uniform(-180, 180), "lat": rng.uniform(-90, 90)},
        )
        expected = {c for c, f in filters.items() if f.matches(activity)}
        assert index.match(activity) == expected
