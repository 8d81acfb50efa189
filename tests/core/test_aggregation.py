"""The pure aggregation core: key templates, aggregate keys, positions and cursors."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pydantic
import pytest

from tidings import FeedGroup, FeedKind, InvalidCursor, Settings, ValidationError
from tidings.core import ids
from tidings.core.activity import Activity
from tidings.core.aggregation import (
    Aggregate,
    KeyTemplate,
    Member,
    Position,
    TemplateError,
    actor_tag,
    check_aggregate_keys,
    decode_position,
    encode_position,
    member,
    ms_time,
    place,
    shorten,
)
from tidings.core.limits import MAX_AGGREGATE_KEY_LENGTH

T0 = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)


def activity(**fields: Any) -> Activity:
    """An activity by bob liking photo:1 at T0, with ``fields`` replaced."""
    data: dict[str, Any] = {
        "id": ids.new_id(T0_MS),
        "actor": "bob",
        "verb": "like",
        "object": "photo:1",
        "time": T0,
    }
    data.update(fields)
    return Activity(**data)


# -- parsing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "fields"),
    [
        ("{actor}", ["actor"]),
        ("{actor}:{verb}:{time:%Y-%m-%d}", ["actor", "verb", "time"]),
        ("{verb}:{object}:{time:%Y-%m-%d}", ["verb", "object", "time"]),
        ("{target}", ["target"]),
        ("{time}", ["time"]),
        ("{extra.album_id}", ["extra.album_id"]),
        ("{extra.A_1}/{verb}", ["extra.A_1", "verb"]),
        ("prefix-{object}-suffix", ["object"]),
        ("{{literal}}:{actor}", ["actor"]),
    ],
)
def test_valid_templates_parse(template: str, fields: list[str]) -> None:
    # Given a well-formed template, when it is parsed, then it keeps its source
    # and names exactly the fields it uses, in order.
    parsed = KeyTemplate.parse(template)
    assert parsed.source == template
    assert [field for _, field, _ in parsed.parts if field is not None] == fields


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{nobody}", "unknown field {nobody}"),
        ("{actor}:{Verb}", "unknown field {Verb}"),
        ("{}", "unknown field {}"),
        ("{0}", "unknown field {0}"),
        ("{extra.}", "unknown field {extra.}"),
        ("{extra.a-b}", "unknown field {extra.a-b}"),
        ("{extra." + "x" * 65 + "}", "unknown field"),
        ("{actor.name}", "unknown field {actor.name}"),
        ("{actor:>10}", "only {time} takes a format, not {actor}"),
        ("{extra.n:%Y}", "only {time} takes a format, not {extra.n}"),
        ("{verb!r}", "conversions (!r) are not supported"),
        ("{actor", "malformed template"),
        ("actor}", "malformed template"),
        ("no fields here", "names no field"),
        ("{{actor}}", "names no field"),
        ("", "non-empty string"),
    ],
)
def test_bad_templates_raise_template_error(template: str, message: str) -> None:
    # Given a broken template, when it is parsed, then a TemplateError says what is wrong.
    with pytest.raises(TemplateError, match=re.escape(message)):
        KeyTemplate.parse(template)


def test_unknown_field_message_lists_the_allowed_fields() -> None:
    with pytest.raises(TemplateError) as caught:
        KeyTemplate.parse("{colour}")
    text = str(caught.value)
    for allowed in ("{actor}", "{verb}", "{object}", "{target}", "{time}", "{extra.NAME}"):
        assert allowed in text


def test_template_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        KeyTemplate.parse("{nope}")


# -- rendering ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "fields", "key"),
    [
        ("{actor}:{verb}:{time:%Y-%m-%d}", {}, "bob:like:2026-01-02"),
        ("{verb}:{object}:{time:%Y-%m-%d}", {}, "like:photo:1:2026-01-02"),
        ("{time:%Y-%m-%dT%H}", {}, "2026-01-02T03"),
        ("{time}", {}, "2026-01-02T03:04:05.678000+00:00"),
        ("{object}@{target}", {"target": "album:9"}, "photo:1@album:9"),
        ("{object}@{target}", {}, "photo:1@"),
        ("{extra.album}", {"extra": {"album": "summer"}}, "summer"),
        ("{extra.album}", {"extra": {"album": ""}}, ""),
        ("a:{extra.album}", {"extra": {}}, "a:"),
        ("a:{extra.album}", {"extra": {"album": None}}, "a:"),
        ("{extra.n}", {"extra": {"n": 3}}, "3"),
        ("{extra.n}", {"extra": {"n": 1.5}}, "1.5"),
        ("{extra.n}", {"extra": {"n": True}}, "true"),
        ("{extra.n}", {"extra": {"n": False}}, "false"),
        ("{extra.n}", {"extra": {"n": [1, "a"]}}, '[1,"a"]'),
        ("{extra.n}", {"extra": {"n": {"b": 1}}}, '{"b":1}'),
        ("{{{actor}}}", {}, "{bob}"),
    ],
)
def test_render(template: str, fields: dict[str, Any], key: str) -> None:
    # Given an activity, when a template is rendered over it, then the key is exact.
    assert KeyTemplate.parse(template).render(activity(**fields)) == key


def test_extra_values_render_as_text_or_json() -> None:
    # Strings render raw, anything else as compact JSON: so the string "1" and
    # the number 1 share an aggregate, as do the string "[1]" and the list [1].
    template = KeyTemplate.parse("{extra.n}")
    keys = {
        template.render(activity(extra={"n": value}))
        for value in ("1", 1, [1], {"1": 1}, "[1]", True, "true", "x")
    }
    assert keys == {"1", "[1]", '{"1":1}', "true", "x"}


def test_member_carries_id_aggregate_and_actor() -> None:
    a = activity(actor="carol")
    assert member(KeyTemplate.parse("{verb}:{object}"), a) == Member(a.id, "like:photo:1", "carol")


# -- long keys -----------------------------------------------------------------------


def test_keys_up_to_the_limit_are_kept() -> None:
    key = "k" * MAX_AGGREGATE_KEY_LENGTH
    assert shorten(key) == key


@pytest.mark.parametrize("length", [MAX_AGGREGATE_KEY_LENGTH + 1, 1000, 10_000])
def test_long_keys_become_a_digest(length: int) -> None:
    short = shorten("k" * length)
    assert re.fullmatch(r"#[0-9a-f]{64}", short)
    assert len(short) <= MAX_AGGREGATE_KEY_LENGTH
    assert shorten("k" * length) == short  # deterministic


def test_long_rendered_keys_are_shortened_and_stay_distinct() -> None:
    # Given two activities whose keys differ only past the limit,
    template = KeyTemplate.parse("{actor}:{object}")
    one = activity(actor="a" * 255, object="o" * 254 + "1")
    two = activity(actor="a" * 255, object="o" * 254 + "2")
    # when rendered, then both keys are short digests, and different.
    k1, k2 = template.render(one), template.render(two)
    assert k1.startswith("#")
    assert k2.startswith("#")
    assert len(k1) <= MAX_AGGREGATE_KEY_LENGTH
    assert k1 != k2
    assert template.render(one) == k1


def test_a_digest_never_equals_a_short_key_rendered_from_other_fields() -> None:
    long_key = shorten("x" * 500)
    assert KeyTemplate.parse("{actor}").render(activity(actor="x" * 200)) != long_key


def test_actor_tags_are_eight_bytes_and_distinct() -> None:
    tags = {actor_tag(f"user{i}") for i in range(1000)}
    assert len(tags) == 1000
    assert all(len(t) == 8 for t in tags)
    assert actor_tag("bob") == actor_tag("bob")


# -- place -----------------------------------------------------------------------------


# Fixed random parts: parameter ids must be the same in every collection (one
# per pytest-xdist worker).
A, B, C = (ids.floor_id(T0_MS + i)[:-4] + f"{0xA5C3 + i:04x}" for i in range(3))
BEFORE_A = ids.floor_id(T0_MS - 1)
BETWEEN_A_B = ids.floor_id(T0_MS + 1)  # after A (same ms as B, smallest possible)
AFTER_C = ids.floor_id(T0_MS + 3)


@pytest.mark.parametrize(
    ("members", "snapshot", "expected"),
    [
        ([A, B, C], None, C),
        ([A], None, A),
        ([], None, None),
        ([], AFTER_C, None),
        ([A, B, C], AFTER_C, C),
        ([A, B, C], C, C),  # the snapshot itself counts
        ([A, B, C], B, B),
        ([A, B, C], BETWEEN_A_B, A),
        ([A, B, C], BEFORE_A, None),
        ([A, C], B, A),
    ],
)
def test_place(members: list[str], snapshot: str | None, expected: str | None) -> None:
    # Given an aggregate's sorted members, when placed at a snapshot, then it stands at
    # the ms of its newest member not after the snapshot (None: not there yet).
    got = place(members, "g", snapshot)
    assert got == (None if expected is None else Position(ids.id_ms(expected), "g"))


def test_positions_order_by_ms_then_key() -> None:
    assert Position(T0_MS, "z") < Position(T0_MS + 1, "a")
    assert Position(T0_MS, "a") < Position(T0_MS, "b")
    assert sorted([Position(9, "a"), Position(2, "b"), Position(2, "a")]) == [
        Position(2, "a"),
        Position(2, "b"),
        Position(9, "a"),
    ]


def test_same_millisecond_members_place_at_the_same_ms() -> None:
    x, y = sorted(ids.new_id(T0_MS) for _ in range(2))
    assert place([x], "a", None) == place([y], "a", None)
    assert place([x], "a", None) < place([y], "b", None)  # type: ignore[operator]


# -- cursors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["bob:like:2026-01-02", "", "a" * MAX_AGGREGATE_KEY_LENGTH, shorten("x" * 999), "ünï:cödé"],
)
def test_position_round_trip(key: str) -> None:
    for ms in (0, T0_MS, ids.MAX_MS):
        snapshot, after = C, Position(ms, key)
        assert decode_position(encode_position(snapshot, after)) == (snapshot, after)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        A,  # only a snapshot
        A + "0123456789a",  # position cut short
        A.upper() + "0123456789ab" + "key",
        A + "0123456789AB" + "key",
        A + "g" * 12 + "key",
        A + "-123456789ab" + "key",
        "-" * 32 + "0123456789ab" + "key",
        A + "0123456789ab" + "k" * (MAX_AGGREGATE_KEY_LENGTH + 1),
    ],
)
def test_malformed_positions_raise_invalid_cursor(text: str) -> None:
    with pytest.raises(InvalidCursor, match="malformed"):
        decode_position(text)


def test_ms_time_is_the_id_time() -> None:
    assert ms_time(ids.new_id(T0_MS)) == T0
    assert ms_time(A).tzinfo is UTC


def test_aggregate_dict_shows_seen_and_read_only_when_tracked() -> None:
    a = activity()
    common: dict[str, Any] = {
        "key": "g",
        "verb": "like",
        "activity_count": 1,
        "actor_count": 1,
        "activities": [a],
        "created_at": T0,
        "updated_at": T0,
    }
    aggregated = Aggregate(**common).to_dict()
    assert "is_seen" not in aggregated
    assert "is_read" not in aggregated
    assert aggregated["activities"] == [a.to_dict()]
    assert aggregated["group"] == "g"  # the key keeps its JSON name
    notification = Aggregate(**common, is_seen=True, is_read=False).to_dict()
    assert (notification["is_seen"], notification["is_read"]) == (True, False)


# -- feed group configuration ------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"aggregation": "{actor}"}, "aggregated and notification groups only"),
        ({"kind": "flat", "aggregation": "{verb}"}, "aggregated and notification groups only"),
        ({"kind": "aggregated", "ttl_days": 1}, "ttl_days applies to flat groups only"),
        ({"kind": "notification", "ttl_days": 0.5}, "ttl_days applies to flat groups only"),
        ({"kind": "aggregated", "aggregation": "{nope}"}, "unknown field {nope}"),
        ({"kind": "notification", "aggregation": "{verb:%Y}"}, "only {time} takes a format"),
        ({"kind": "notification", "aggregation": "static"}, "names no field"),
        ({"kind": "aggregated", "aggregation": "{actor}" * 40}, "at most 200 characters"),
        ({"kind": "aggregated", "max_aggregate_size": 0}, "greater than or equal to 1"),
        ({"kind": "aggregated", "max_aggregate_size": 101}, "less than or equal to 100"),
        ({"kind": "sideways"}, "Input should be"),
    ],
)
def test_feed_group_config_errors(config: dict[str, Any], message: str) -> None:
    # Given an inconsistent feed group configuration, when it is loaded, then pydantic
    # refuses it with a message that names the problem.
    with pytest.raises(pydantic.ValidationError, match=re.escape(message)):
        FeedGroup(**config)
    with pytest.raises(pydantic.ValidationError, match=re.escape(message)):
        Settings.model_validate({"groups": {"custom": config}})


@pytest.mark.parametrize("kind", ["aggregated", "notification"])
def test_an_empty_aggregation_is_refused_not_defaulted(kind: str) -> None:
    # An explicit "" is a mistake (KeyTemplate.parse refuses it), not a request
    # for the kind's default template.
    with pytest.raises(pydantic.ValidationError, match="non-empty"):
        FeedGroup.model_validate({"kind": kind, "aggregation": ""})


@pytest.mark.parametrize(
    ("config", "kind", "template"),
    [
        ({}, FeedKind.FLAT, ""),
        ({"kind": "aggregated"}, FeedKind.AGGREGATED, "{actor}:{verb}:{time:%Y-%m-%d}"),
        ({"kind": "notification"}, FeedKind.NOTIFICATION, "{verb}:{object}:{time:%Y-%m-%d}"),
        (
            {"kind": "aggregated", "aggregation": "{extra.album}"},
            FeedKind.AGGREGATED,
            "{extra.album}",
        ),
    ],
)
def test_feed_group_templates(config: dict[str, Any], kind: FeedKind, template: str) -> None:
    group = FeedGroup(**config)
    assert group.kind == kind
    assert group.aggregated == (kind != FeedKind.FLAT)
    assert group.template_source == template


def test_default_groups_include_aggregated_feeds() -> None:
    groups = Settings().groups
    assert groups["timeline_aggregated"].kind == FeedKind.AGGREGATED
    assert groups["notification"].kind == FeedKind.NOTIFICATION
    assert groups["notification"].max_aggregate_size == 10


def test_max_group_size_is_still_accepted_for_max_aggregate_size() -> None:
    # Given a configuration written before the rename, when it is loaded, then
    # max_group_size sets max_aggregate_size, as the new name does.
    old = Settings.model_validate({"groups": {"a": {"kind": "aggregated", "max_group_size": 3}}})
    new = Settings.model_validate(
        {"groups": {"a": {"kind": "aggregated", "max_aggregate_size": 4}}}
    )
    assert old.groups["a"].max_aggregate_size == 3
    assert new.groups["a"].max_aggregate_size == 4
    assert FeedGroup.model_validate({"max_group_size": 5}).max_aggregate_size == 5


@pytest.mark.parametrize(
    "keys",
    [[], ["bob:like:2026-01-02"], ["", "a" * MAX_AGGREGATE_KEY_LENGTH, "ünï:cödé", "#" + "0" * 64]],
)
def test_aggregate_keys_that_can_exist_are_accepted(keys: list[str]) -> None:
    assert check_aggregate_keys(keys) == keys


@pytest.mark.parametrize(
    ("keys", "field", "message"),
    [
        ("like:photo:1", "groups", "list of aggregate keys"),
        (None, "groups", "list of aggregate keys"),
        (["ok", 7], "groups.1", "list of aggregate keys"),
        (
            ["ok", "k" * (MAX_AGGREGATE_KEY_LENGTH + 1)],
            "groups.1",
            "is 201 characters; the limit is 200",
        ),
        (["\x00"], "groups.0", "NUL"),
        (["a\ud800"], "groups.0", "surrogate"),
        (["\udfff"], "groups.0", "surrogate"),
    ],
)
def test_aggregate_keys_no_aggregate_can_have_are_refused(
    keys: Any, field: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as info:
        check_aggregate_keys(keys)
    assert info.value.field == field
