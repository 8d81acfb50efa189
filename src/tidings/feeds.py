"""Feed ids and feed groups.

A feed id is ``group:key``. The group names a configured :class:`FeedGroup`
(its kind and limits); the key is the owner (a user id, a site id...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from tidings.errors import InvalidFeedId, UnknownFeedGroup

MAX_FEED_ID_LENGTH = 255
_GROUP_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
# No braces (Redis hash tags), slashes (URL paths) or whitespace in keys.
_KEY_RE = re.compile(r"^[A-Za-z0-9_.@=+-]+$")


class FeedKind(StrEnum):
    FLAT = "flat"
    AGGREGATED = "aggregated"
    NOTIFICATION = "notification"


class FeedGroup(BaseModel):
    """A configured group of feeds: their kind and limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: FeedKind = FeedKind.FLAT
    max_length: int = Field(default=800, ge=1, le=100_000)
    ttl_days: float | None = Field(default=None, gt=0)
    #: Readable with any user token over HTTP (e.g. a site-wide feed).
    public: bool = False

    @property
    def ttl_ms(self) -> int | None:
        return None if self.ttl_days is None else int(self.ttl_days * 86_400_000)


DEFAULT_GROUPS: dict[str, FeedGroup] = {
    "user": FeedGroup(),
    "timeline": FeedGroup(),
    "notification": FeedGroup(kind=FeedKind.NOTIFICATION),
}


class FeedId(NamedTuple):
    group: str
    key: str

    def __str__(self) -> str:
        return f"{self.group}:{self.key}"


def parse_feed_id(feed: object, groups: Mapping[str, FeedGroup] | None = None) -> FeedId:
    """Split and check a feed id; with ``groups``, the group must be configured."""
    if not isinstance(feed, str):
        raise InvalidFeedId(f"a feed id must be a string, got {type(feed).__name__}")
    if len(feed) > MAX_FEED_ID_LENGTH:
        raise InvalidFeedId(f"feed id is {len(feed)} characters; the limit is {MAX_FEED_ID_LENGTH}")
    group, sep, key = feed.partition(":")
    if not sep:
        raise InvalidFeedId(f"feed id {feed!r} must be 'group:key'")
    if not _GROUP_RE.match(group):
        raise InvalidFeedId(
            f"feed group {group!r} must be 1-32 of a-z, 0-9, _ and start with a letter"
        )
    if not _KEY_RE.match(key):
        raise InvalidFeedId(
            f"feed key {key[:64]!r} must be non-empty and use only A-Z a-z 0-9 _ . @ = + -"
        )
    if groups is not None and group not in groups:
        raise UnknownFeedGroup(
            f"unknown feed group {group!r}; configured: {', '.join(sorted(groups))}"
        )
    return FeedId(group, key)
