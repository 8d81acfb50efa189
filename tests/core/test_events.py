from __future__ import annotations

import pytest

from tidings.core.errors import ValidationError
from tidings.core.events import Event, EventType, next_event_id, parse_event_id


@pytest.mark.parametrize(
    ("text", "key"), [("0-0", (0, 0)), ("1795456990794-12", (1795456990794, 12))]
)
def test_event_ids_parse(text: str, key: tuple[int, int]) -> None:
    assert parse_event_id(text) == key


@pytest.mark.parametrize("text", ["", "12", "-1-0", "1-", "a-b", "1-2-3", "1 -2", None, 5])
def test_malformed_event_ids_are_refused(text: object) -> None:
    with pytest.raises(ValidationError, match="not an event id"):
        parse_event_id(text)


@pytest.mark.parametrize(
    ("last", "now", "after"),
    [((5, 0), 6, (6, 0)), ((5, 0), 5, (5, 1)), ((5, 3), 4, (5, 4)), ((0, 0), 0, (0, 1))],
)
def test_ids_strictly_increase_even_when_the_clock_steps_back(
    last: tuple[int, int], now: int, after: tuple[int, int]
) -> None:
    assert next_event_id(last, now) == after


def test_events_round_trip_as_json() -> None:
    event = Event("timeline:a", "1-0", EventType.ACTIVITY_ADDED, {"id": "x", "n": [1, 2]})
    assert Event.from_json(event.to_json()) == event
