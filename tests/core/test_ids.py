import os

import pytest

from tidings.core import ids


def test_round_trip_and_length() -> None:
    for _ in range(500):
        raw = os.urandom(16)
        text = ids.encode(raw)
        assert len(text) == ids.ID_LENGTH
        assert ids.decode(text) == raw


@pytest.mark.parametrize("ms", [0, 1, 1_700_000_000_000, ids.MAX_MS])
def test_carries_its_time(ms: int) -> None:
    assert ids.id_ms(ids.new_id(ms)) == ms


def test_text_sorts_like_time() -> None:
    made = [ids.new_id(ms) for ms in range(0, 10**13, 7 * 10**10)]
    assert made == sorted(made)


def test_same_millisecond_ids_are_unique() -> None:
    made = {ids.new_id(1_700_000_000_000) for _ in range(20_000)}
    assert len(made) == 20_000


def test_encode_many_keeps_order() -> None:
    raws = [os.urandom(16) for _ in range(5)]
    assert ids.encode_many(b"".join(raws)) == [ids.encode(r) for r in raws]
    assert ids.encode_many(b"") == []


def test_floor_id_sorts_below_every_id_of_its_millisecond() -> None:
    floor = ids.floor_id(5000)
    assert all(floor <= ids.new_id(5000) for _ in range(100))
    assert ids.new_id(4999) < floor


@pytest.mark.parametrize(
    "text",
    ["", "0" * 31, "0" * 33, "0" * 31 + "g", "0" * 31 + "A", " " + "0" * 31],
)
def test_malformed_ids(text: str) -> None:
    assert not ids.is_valid(text)
    with pytest.raises(ValueError, match="not an activity id"):
        ids.decode(text)


@pytest.mark.parametrize("ms", [-1, ids.MAX_MS + 1])
def test_time_out_of_range(ms: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        ids.new_id(ms)


@pytest.mark.parametrize(
    "text",
    ["0" * 32 + "\n", "0" * 31, "0" * 33, "A" * 32, "\u0660" * 32, None, 7],
)
def test_is_valid_needs_exactly_32_lowercase_hex(text: object) -> None:
    assert not ids.is_valid(text)
    if isinstance(text, str):
        with pytest.raises(ValueError, match="not an activity id"):
            ids.decode(text)
