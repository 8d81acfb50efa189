import pytest

from tidings.core.errors import InvalidFeedId, UnknownFeedGroup
from tidings.core.fanout import by_feed_group, direct_targets
from tidings.core.feeds import DEFAULT_GROUPS, FeedId, parse_feed_id


@pytest.mark.parametrize(
    ("feed", "expected"),
    [
        ("user:bob", FeedId("user", "bob")),
        ("timeline:a.b-c_d@e=f+g", FeedId("timeline", "a.b-c_d@e=f+g")),
        ("notification:42", FeedId("notification", "42")),
    ],
)
def test_valid_feed_ids(feed: str, expected: FeedId) -> None:
    assert parse_feed_id(feed, DEFAULT_GROUPS) == expected
    assert str(expected) == feed


@pytest.mark.parametrize(
    ("feed", "message"),
    [
        ("bob", "must be 'group:key'"),
        ("User:bob", "feed group"),
        ("user:", "feed key"),
        ("user:b{o}b", "feed key"),
        ("user:a/b", "feed key"),
        ("user:a b", "feed key"),
        # Full match: `$` alone would let a trailing newline through.
        ("user:bob\n", "feed key"),
        ("user\n:bob", "feed group"),
        ("user:" + "x" * 251, "the limit is 255"),
        (7, "must be a string"),
    ],
)
def test_malformed_feed_ids(feed: object, message: str) -> None:
    with pytest.raises(InvalidFeedId, match=message):
        parse_feed_id(feed, DEFAULT_GROUPS)


def test_unknown_group_lists_the_configured_ones() -> None:
    with pytest.raises(
        UnknownFeedGroup,
        match="configured: notification, timeline, timeline_aggregated, timeline_ranked, user",
    ):
        parse_feed_id("planet:earth", DEFAULT_GROUPS)


@pytest.mark.parametrize(
    ("feeds", "plan"),
    [
        ([], {}),
        (
            ["timeline:a", "user:b", "timeline:c", "timeline:a"],
            {"timeline": ["timeline:a", "timeline:c"], "user": ["user:b"]},
        ),
    ],
)
def test_by_group(feeds: list[str], plan: dict[str, list[str]]) -> None:
    assert by_feed_group(feeds) == plan


def test_direct_targets_put_the_source_first_once() -> None:
    assert direct_targets("user:b", ["timeline:a", "user:b"]) == ["user:b", "timeline:a"]
