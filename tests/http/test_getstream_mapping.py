"""The Stream protocol's pure parts, without a server: the mapping of shapes
and ids, the rights of tokens, the setting that turns the protocol on."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
from pydantic import ValidationError
from starlette.routing import Mount

from tidings.core import ids
from tidings.core.results import Follow
from tidings.http import create_app
from tidings.http.getstream import MOUNT_PATH
from tidings.http.getstream.auth import Grant, GrantCache, authenticate
from tidings.http.getstream.errors import Code, StreamError
from tidings.http.getstream.mapper import (
    MappingError,
    activity_in,
    activity_out,
    flag,
    follow_out,
    from_uuid,
    id_bounds,
    integer,
    parse_time,
    to_uuid,
)
from tidings.settings import MAX_STREAM_KEYS, Settings, StreamKey

SECRET = "k" * 40
KEY = StreamKey(key="app", secret=SECRET, groups=frozenset({"user", "timeline"}))
LOW, HIGH = "0" * 32, "f" * 32


# -- ids and times -------------------------------------------------------------


# Fixed ids, not ids.new_id: its random part would give each pytest-xdist
# worker different test ids, and xdist refuses to run a collection that differs.
EARLIEST = (0).to_bytes(6, "big").hex() + "5a" * 10
LATEST = ids.MAX_MS.to_bytes(6, "big").hex() + "a5" * 10


@pytest.mark.parametrize("activity_id", [EARLIEST, LATEST, LOW, HIGH])
def test_ids_map_to_uuids_and_back_exactly(activity_id: str) -> None:
    as_uuid = to_uuid(activity_id)
    assert len(as_uuid) == 36
    assert as_uuid.count("-") == 4
    assert from_uuid(as_uuid) == activity_id
    assert from_uuid(as_uuid.upper()) == activity_id


def test_uuids_sort_as_the_ids_do() -> None:
    made = sorted(ids.new_id(ms) for ms in (5, 1_000, 1_700_000_000_000, 1, 5))
    assert sorted(to_uuid(i) for i in made) == [to_uuid(i) for i in made]


@pytest.mark.parametrize("text", ["17", "", "0" * 32, "g" * 8 + "-0000-0000-0000-" + "0" * 12])
def test_what_is_not_a_uuid_is_refused(text: str) -> None:
    with pytest.raises(MappingError, match="id_lt: not an activity id"):
        from_uuid(text, "id_lt")


@pytest.mark.parametrize(
    ("sent", "given"),
    [
        ("2024-05-01T12:00:00.123456", "2024-05-01T12:00:00.123456+00:00"),
        ("2024-05-01T12:00:00", "2024-05-01T12:00:00+00:00"),
        ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00Z"),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T12:00:00+02:00"),
        ("2024-05-01T12:00:00-0500", "2024-05-01T12:00:00-0500"),
        ("yesterday", "yesterday"),  # (for tidings' validation to refuse)
        (17, 17),
        (None, None),
    ],
)
def test_naive_times_are_utc(sent: object, given: object) -> None:
    assert parse_time(sent) == given


# -- activities ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "given"),
    [
        (
            {"actor": "a", "verb": "v", "object": "o", "mood": "ok", "n": 2},
            {"actor": "a", "verb": "v", "object": "o", "extra": {"mood": "ok", "n": 2}},
        ),
        (
            {"actor": "a", "verb": "v", "object": "o", "to": ["user:1 eyJ.x.y", "user:2"]},
            {"actor": "a", "verb": "v", "object": "o", "to": ["user:1", "user:2"]},
        ),
        (  # what Stream assigns is ignored when sent back
            {"actor": "a", "id": "x", "origin": "user:1", "duration": "1ms"},
            {"actor": "a"},
        ),
        ({"time": "2024-05-01T12:00:00"}, {"time": "2024-05-01T12:00:00+00:00"}),
    ],
)
def test_activities_in(sent: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    assert activity_in(sent) == given


@pytest.mark.parametrize(
    ("sent", "field"),
    [([1], "activity"), ("x", "activity"), ({"to": "user:1"}, "to")],
)
def test_activities_in_refused(sent: object, field: str) -> None:
    with pytest.raises(MappingError, match=f"^{field}: "):
        activity_in(sent)


def test_activities_out_have_custom_fields_on_top() -> None:
    activity_id = ids.new_id(1_714_564_800_000)
    doc = {
        "id": activity_id,
        "actor": "a",
        "verb": "v",
        "object": "o",
        "target": None,
        "time": "2024-05-01T12:00:00.5+02:00",
        "foreign_id": "f",
        "to": ["user:1"],
        "extra": {"mood": "ok", "actor": "shadowed"},
    }
    assert activity_out(doc) == {
        "id": to_uuid(activity_id),
        "actor": "a",
        "verb": "v",
        "object": "o",
        "target": None,
        "time": "2024-05-01T10:00:00.500000",
        "foreign_id": "f",
        "origin": None,
        "to": ["user:1"],
        "mood": "ok",
    }


def test_follows_out() -> None:
    row = Follow("timeline:1", "user:2", 1_714_564_800_250)
    assert follow_out(row) == {
        "feed_id": "timeline:1",
        "target_id": "user:2",
        "created_at": "2024-05-01T12:00:00.250000",
        "updated_at": "2024-05-01T12:00:00.250000",
    }


# -- query parameters ----------------------------------------------------------

A, B = ids.new_id(1_000), ids.new_id(2_000)


@pytest.mark.parametrize(
    ("params", "bounds"),
    [
        ({}, (None, None)),
        ({"id_lt": to_uuid(A)}, (A, None)),
        ({"id_lte": to_uuid(A)}, (ids.after(A), None)),
        ({"id_lte": to_uuid(HIGH)}, (None, None)),
        ({"id_gt": to_uuid(A)}, (None, A)),
        ({"id_gte": to_uuid(A)}, (None, f"{int(A, 16) - 1:032x}")),
        ({"id_gte": to_uuid(LOW)}, (None, None)),
        ({"id_lt": to_uuid(B), "id_gt": to_uuid(A)}, (B, A)),
    ],
)
def test_id_bounds(params: Mapping[str, str], bounds: tuple[str | None, str | None]) -> None:
    assert id_bounds(params) == bounds


def test_id_bounds_take_one_of_each_side() -> None:
    with pytest.raises(MappingError, match="id_lt and id_lte"):
        id_bounds({"id_lt": to_uuid(A), "id_lte": to_uuid(A)})


@pytest.mark.parametrize(
    ("params", "value"), [({}, 25), ({"limit": ""}, 25), ({"limit": "7"}, 7), ({"limit": "1"}, 1)]
)
def test_integers(params: Mapping[str, str], value: int) -> None:
    assert integer(params, "limit", 25, 1, 100) == value


@pytest.mark.parametrize("text", ["0", "101", "x", "2.5"])
def test_integers_refused(text: str) -> None:
    with pytest.raises(MappingError, match="limit: must be an integer from 1 to 100"):
        integer({"limit": text}, "limit", 25, 1, 100)


@pytest.mark.parametrize(
    ("text", "value"), [("", False), ("0", False), ("False", False), ("1", True), ("True", True)]
)
def test_flags(text: str, value: bool) -> None:
    assert flag({"keep_history": text}, "keep_history") is value
    with pytest.raises(MappingError, match="keep_history"):
        flag({"keep_history": "maybe"}, "keep_history")


# -- tokens --------------------------------------------------------------------


def _grant(claims: Mapping[str, object], secret: str = SECRET, key: str = "app") -> Grant:
    token = jwt.encode(dict(claims), secret, algorithm="HS256")
    headers = {"authorization": token, "stream-auth-type": "jwt"}
    return authenticate({"app": KEY}, {"api_key": key}, headers, now=lambda: 1000.0)


def _code(claims: Mapping[str, object], **kwargs: Any) -> Code:
    with pytest.raises(StreamError) as raised:
        _grant(claims, **kwargs)
    return raised.value.kind


def test_tokens_refused() -> None:
    assert _code({"user_id": "a"}, key="nope") == Code.API_KEY
    assert _code({"user_id": "a"}, secret="z" * 40) == Code.SIGNATURE
    assert _code({"user_id": "a", "exp": 999}) == Code.SIGNATURE
    assert _code({"user_id": 7}) == Code.SIGNATURE
    assert _code({}) == Code.NOT_ALLOWED
    assert _code({"user_id": "*"}) == Code.NOT_ALLOWED


def test_a_remembered_token_still_expires_and_stays_with_its_key() -> None:
    clock = [1000.0]
    other = StreamKey(key="other", secret="o" * 40, groups=frozenset({"user"}))
    grants = GrantCache({"app": KEY, "other": other}, size=2)
    token = jwt.encode({"user_id": "1", "exp": 1500}, SECRET, algorithm="HS256")
    headers = {"authorization": token, "stream-auth-type": "jwt"}

    def grant(key: str = "app") -> Grant:
        return grants.authenticate({"api_key": key}, headers, lambda: clock[0])

    assert grant() == grant() == Grant(KEY, "1")
    with pytest.raises(StreamError, match="signature does not match"):
        grant("other")  # (verified against the other key's secret, not remembered)
    for n in range(3):  # more tokens than it keeps: it starts over
        extra = jwt.encode({"user_id": f"u{n}"}, SECRET, algorithm="HS256")
        grants.authenticate({"api_key": "app"}, {"authorization": extra}, lambda: clock[0])
    assert grant().user_id == "1"
    clock[0] = 1500.0
    with pytest.raises(StreamError, match="expired"):
        grant()


@pytest.mark.parametrize(
    ("claims", "allowed"),
    [
        ({"resource": "*", "action": "*", "feed_id": "*"}, True),
        ({"resource": "feed", "action": "read", "feed_id": "user1"}, True),
        ({"resource": "feed", "action": "*", "feed_id": "user1"}, True),
        ({"resource": "feed", "action": "write", "feed_id": "user1"}, False),
        ({"resource": "follower", "action": "read", "feed_id": "user1"}, False),
        ({"resource": "feed", "action": "read", "feed_id": "user2"}, False),
        ({"user_id": "1"}, True),
        ({"user_id": "2"}, False),
    ],
)
def test_what_a_token_may_read(claims: Mapping[str, object], allowed: bool) -> None:
    grant = _grant(claims)
    if allowed:
        grant.check("feed", "read", "user", "1")
    else:
        with pytest.raises(StreamError) as raised:
            grant.check("feed", "read", "user", "1")
        assert raised.value.kind == Code.NOT_ALLOWED


def test_a_key_reaches_its_groups_only() -> None:
    with pytest.raises(StreamError, match="'notification' is not configured") as raised:
        _grant({"user_id": "1"}).check("feed", "read", "notification", "1")
    assert raised.value.kind == Code.FEED_CONFIG


# -- the setting ---------------------------------------------------------------


def _keys(*entries: Mapping[str, object]) -> Settings:
    # (as the environment gives them: JSON, read by the setting's validation)
    return Settings.model_validate({"stream_keys": list(entries)})


def test_stream_keys_are_checked() -> None:
    good: dict[str, object] = {"key": "app", "secret": SECRET, "groups": ["user"]}
    assert _keys(good).stream_keys[0].groups == {"user"}
    cases = [
        ({**good, "secret": "short"}, "at least 32 characters"),
        ({**good, "groups": []}, "at least 1 item"),
        ({**good, "groups": ["nope"]}, "stream_keys.0.groups: nope not configured"),
        ({**good, "key": "a b"}, "stream_keys.0.key"),
    ]
    for entry, message in cases:
        with pytest.raises(ValidationError, match=message):
            _keys(entry)
    with pytest.raises(ValidationError, match=r"stream_keys\.1\.key: 'app' is given twice"):
        _keys(good, good)
    with pytest.raises(ValidationError, match=f"at most {MAX_STREAM_KEYS} items"):
        _keys(*({**good, "key": f"k{i}"} for i in range(MAX_STREAM_KEYS + 1)))


def test_the_protocol_is_mounted_only_when_keys_are_set(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    off = create_app(settings=Settings(secret="x" * 40, database_url=url))
    on = create_app(settings=Settings(secret="x" * 40, database_url=url, stream_keys=(KEY,)))
    assert MOUNT_PATH not in [r.path for r in off.routes if isinstance(r, Mount)]
    assert MOUNT_PATH in [r.path for r in on.routes if isinstance(r, Mount)]


@pytest.mark.parametrize(
    ("when", "out"),
    [
        (datetime(2024, 5, 1, 12, tzinfo=UTC), "2024-05-01T12:00:00.000000"),
        # As stored (orjson: no fraction when it is zero), and with an offset.
        ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00.000000"),
        ("2024-05-01T12:00:00.000042Z", "2024-05-01T12:00:00.000042"),
        ("2024-05-01T14:00:00.5+02:00", "2024-05-01T12:00:00.500000"),
    ],
)
def test_times_out_are_naive_utc(when: datetime | str, out: str) -> None:
    doc = {"id": LOW, "actor": "a", "verb": "v", "object": "o", "time": when}
    assert activity_out(doc)["time"] == out
