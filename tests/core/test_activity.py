from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tidings.core import ids
from tidings.core.activity import Activity, NewActivity, parse_time, validate
from tidings.core.errors import ValidationError
from tidings.core.feeds import DEFAULT_GROUPS, parse_feed_id
from tidings.core.limits import MAX_ACTIVITY_BYTES, MAX_TO

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
BASE: dict[str, Any] = {"actor": "bob", "verb": "like", "object": "photo:1"}


def check(feed: str) -> None:
    parse_feed_id(feed, DEFAULT_GROUPS)


def test_minimal_activity_gets_id_and_time() -> None:
    a = validate(BASE, now=NOW)
    assert a.time == NOW
    assert ids.id_ms(a.id) == int(NOW.timestamp() * 1000)
    assert (a.target, a.foreign_id, a.to, a.extra) == (None, None, (), {})


def test_dataclass_and_mapping_inputs_agree() -> None:
    a = validate(NewActivity("bob", "like", "photo:1", extra={"n": 1}), now=NOW)
    b = validate({**BASE, "extra": {"n": 1}}, now=NOW)
    assert (a.actor, a.verb, a.object, a.extra) == (b.actor, b.verb, b.object, b.extra)


def test_json_round_trip() -> None:
    a = validate(
        {
            **BASE,
            "target": "album:2",
            "foreign_id": "like:9",
            "to": ["notification:carol"],
            "extra": {"nested": {"list": [1, 2.5, None, "x"]}},
        },
        now=NOW,
    )
    assert Activity.from_json(a.to_json()) == a


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, NOW),
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01T14:00:00+02:00", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        (
            datetime(2024, 5, 1, 9, tzinfo=timezone(timedelta(hours=-3))),
            datetime(2024, 5, 1, 12, tzinfo=UTC),
        ),
    ],
)
def test_times_become_utc(value: object, expected: datetime) -> None:
    got = parse_time(value, now=NOW)
    assert got == expected
    assert got.tzinfo is UTC


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"actor": None}, "actor", "is required"),
        ({"actor": ""}, "actor", "must not be empty"),
        ({"actor": 7}, "actor", "must be a string"),
        ({"actor": "a" * 256}, "actor", "the limit is 255"),
        ({"object": "o" * 256}, "object", "the limit is 255"),
        ({"target": "t" * 256}, "target", "the limit is 255"),
        ({"foreign_id": "f" * 256}, "foreign_id", "the limit is 255"),
        ({"foreign_id": "a\x00b"}, "foreign_id", "NUL"),
        ({"actor": "a\ud800b"}, "actor", "surrogate"),
        ({"object": "\udfff"}, "object", "surrogate"),
        ({"verb": "like\x00"}, "verb", "NUL"),
        ({"time": "0001-01-01T00:00:00+01:00"}, "time", "1970"),
        ({"verb": "v" * 65}, "verb", "the limit is 64"),
        ({"verb": "two words"}, "verb", "whitespace"),
        ({"time": "2024-05-01T12:00:00"}, "time", "naive"),
        ({"time": datetime(2024, 5, 1)}, "time", "naive"),
        ({"time": "yesterday"}, "time", "ISO-8601"),
        ({"time": 12}, "time", "datetime or an ISO-8601"),
        ({"time": 1_700_000_000.5}, "time", "datetime or an ISO-8601"),
        ({"time": "\u0662\u0660\u0662\u0664-05-01T12:00:00Z"}, "time", "ISO-8601"),
        ({"time": "2024-05-01T12:00:00Z\n"}, "time", "ISO-8601"),
        ({"time": "1969-12-31T23:59:59Z"}, "time", "1970"),
        ({"to": "timeline:a"}, "to", "list of feed ids"),
        (
            {"to": ["timeline:a"] * 0 + [f"timeline:u{i}" for i in range(MAX_TO + 1)]},
            "to",
            f"the limit is {MAX_TO}",
        ),
        ({"to": ["nogroup"]}, "to", "group:key"),
        ({"to": ["planet:earth"]}, "to", "unknown feed group"),
        ({"extra": [1]}, "extra", "JSON object"),
        ({"extra": {"x": object()}}, "extra", "JSON"),
        # JSON has no NaN or infinities; stored, they would have become null.
        ({"extra": {"x": float("nan")}}, "extra.x", "finite"),
        ({"extra": {"a": {"b": [1, float("inf")]}}}, "extra.a.b.1", "finite"),
        ({"extra": {"x": float("-inf")}}, "extra.x", "finite"),
        ({"extra": {"x": "a\x00"}}, "extra.x", "NUL"),
        ({"extra": {"x": ["\ud800"]}}, "extra.x.0", "surrogate"),
        ({"extra": {"a": {"k\x00": 1}}}, "extra.a", r"key 'k\\x00' must not contain NUL"),
        ({"extra": {"\udc80": 1}}, "extra", "surrogate"),
        ({"extra": {1: 1}}, "extra", "keys must be strings"),
        (
            {"extra": {"blob": "x" * MAX_ACTIVITY_BYTES}},
            "extra",
            f"the limit is {MAX_ACTIVITY_BYTES}",
        ),
        ({"colour": "red"}, "colour", "unknown field"),
    ],
)
def test_rejections_name_the_field_and_limit(
    change: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as info:
        validate({**BASE, **change}, now=NOW, check_feed=check)
    assert info.value.field == field


def test_to_is_deduplicated_in_order() -> None:
    a = validate({**BASE, "to": ["timeline:b", "timeline:a", "timeline:b"]}, now=NOW)
    assert a.to == ("timeline:b", "timeline:a")


def test_extra_is_detached_from_caller() -> None:
    extra: dict[str, Any] = {"tags": ["a"]}
    a = validate({**BASE, "extra": extra}, now=NOW)
    extra["tags"].append("b")
    assert a.extra == {"tags": ["a"]}


def test_with_extra_checks_size() -> None:
    a = validate(BASE, now=NOW)
    with pytest.raises(ValidationError, match="limit"):
        a.with_extra({"blob": "x" * MAX_ACTIVITY_BYTES})
