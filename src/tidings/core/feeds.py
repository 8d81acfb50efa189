"""Feed ids and feed groups.

A feed id is ``group:key``. The group names a configured :class:`FeedGroup`
(its kind and limits); the key is the owner (a user id, a site id...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from tidings.core.aggregation import KeyTemplate, TemplateError
from tidings.core.errors import InvalidFeedId, UnknownFeedGroup, ValidationError
from tidings.core.limits import MAX_FEED_ID_LENGTH
from tidings.core.ranking import RankingExpression

# Used with fullmatch: `$` also matches before a trailing newline, and
# "alice\n" would be a second feed beside "alice".
_GROUP_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
# No braces (Redis hash tags), slashes (URL paths) or whitespace in keys.
_KEY_RE = re.compile(r"[A-Za-z0-9_.@=+-]+")


class FeedKind(StrEnum):
    FLAT = "flat"
    AGGREGATED = "aggregated"
    NOTIFICATION = "notification"
    #: Held like a flat feed (newest first: recency is the write-time score),
    #: read in the order of the group's ``ranking`` expression.
    RANKED = "ranked"


#: The ranking of a ranked group that names none: recency halving daily,
#: lifted by likes and (twice as much) comments.
DEFAULT_RANKING = "decay_exp(age_hours, 24) * (1 + ln(1 + likes + 2 * comments))"
MAX_CANDIDATES = 2000

#: The key template of each aggregating kind when a feed group names none.
DEFAULT_TEMPLATES = {
    FeedKind.AGGREGATED: "{actor}:{verb}:{time:%Y-%m-%d}",
    FeedKind.NOTIFICATION: "{verb}:{object}:{time:%Y-%m-%d}",
}


class FeedGroup(BaseModel):
    """A configured group of feeds: their kind and limits.

    For ``aggregated`` and ``notification`` feeds ``max_length`` counts
    aggregates, ``aggregation`` is the key template (the kind's default when
    absent) and ``max_aggregate_size`` the newest activities a read shows per
    aggregate (every activity is still counted; ``max_group_size``, its
    former name, is still accepted).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: FeedKind = FeedKind.FLAT
    max_length: int = Field(default=800, ge=1, le=100_000)
    ttl_days: float | None = Field(default=None, gt=0)
    #: Readable with any user token over HTTP (e.g. a site-wide feed).
    public: bool = False
    #: Whether a user token may name feeds of this group in an activity's
    #: ``to`` over HTTP (its own feeds it always may): an inbox anyone may write
    #: into. Unset: notification groups are, others are not.
    addressable: bool | None = None
    aggregation: str | None = Field(default=None, max_length=200)
    max_aggregate_size: int = Field(
        default=10,
        ge=1,
        le=100,
        validation_alias=AliasChoices("max_aggregate_size", "max_group_size"),
    )

    # Ranked groups (:mod:`tidings.reading.ranked`).
    #: The score of an activity at read time (:mod:`tidings.core.ranking`).
    ranking: str | None = Field(default=None, max_length=2000)
    #: ``weight(verb)`` of each verb; verbs not named weigh 1.
    weights: dict[str, float] = Field(default_factory=dict)
    #: Values of variables an activity lacks (``extra.NAME``, reaction kinds); 0 otherwise.
    defaults: dict[str, float] = Field(default_factory=dict)
    #: The newest entries a read ranks.
    candidates: int = Field(default=500, ge=1, le=MAX_CANDIDATES)
    #: At most this many activities of one actor per page (None: no limit).
    diversity: int | None = Field(default=None, ge=1, le=100)
    #: How long a ranked page's frozen order serves the pages after it.
    snapshot_seconds: float = Field(default=600.0, ge=1, le=86_400)

    @model_validator(mode="after")
    def _check_kind(self) -> FeedGroup:
        if self.kind != FeedKind.RANKED:
            if self.ranking is not None or self.weights or self.defaults:
                raise ValueError("ranking, weights and defaults apply to ranked groups only")
        else:
            # Refused at start-up, with the position of the error.
            try:
                expression = RankingExpression.parse(self.ranking_source)
                expression.compile(weights=self.weights, defaults=self.defaults)
            except ValidationError as exc:  # RankingExpressionError, or a weight that is NaN
                raise ValueError(str(exc)) from None
        if not self.aggregated:
            if self.aggregation is not None:
                raise ValueError("aggregation applies to aggregated and notification groups only")
        else:
            if self.ttl_days is not None:
                raise ValueError(
                    "ttl_days applies to flat groups only; "
                    "aggregated feeds are capped by max_length"
                )
            try:
                KeyTemplate.parse(self.template_source)
            except TemplateError as exc:
                raise ValueError(str(exc)) from None
        return self

    @property
    def aggregated(self) -> bool:
        """Whether the feeds hold aggregates (aggregated and notification kinds)."""
        return self.kind in (FeedKind.AGGREGATED, FeedKind.NOTIFICATION)

    @property
    def ranked(self) -> bool:
        return self.kind == FeedKind.RANKED

    @property
    def ranking_source(self) -> str:
        return DEFAULT_RANKING if self.ranking is None else self.ranking

    @property
    def addressable_by_users(self) -> bool:
        """:attr:`addressable`, its default resolved by kind."""
        if self.addressable is not None:
            return self.addressable
        return self.kind == FeedKind.NOTIFICATION

    @property
    def template_source(self) -> str:
        if self.aggregation is not None:
            return self.aggregation
        return DEFAULT_TEMPLATES.get(self.kind, "")

    @property
    def ttl_ms(self) -> int | None:
        return None if self.ttl_days is None else int(self.ttl_days * 86_400_000)


DEFAULT_GROUPS: dict[str, FeedGroup] = {
    # A user's own profile feed: what they published, no one else's writes.
    # Public, as profiles are on the social sites people know: any user token
    # may read it and so follow it (a timeline stays its owner's).
    "user": FeedGroup(public=True),
    # Inboxes: followers' timelines, which `to` may also address.
    "timeline": FeedGroup(addressable=True),
    "timeline_aggregated": FeedGroup(kind=FeedKind.AGGREGATED, addressable=True),
    "notification": FeedGroup(kind=FeedKind.NOTIFICATION),
    # A home timeline read in ranked order (the default ranking).
    "timeline_ranked": FeedGroup(kind=FeedKind.RANKED, addressable=True),
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
    if not _GROUP_RE.fullmatch(group):
        raise InvalidFeedId(
            f"feed group {group!r} must be 1-32 of a-z, 0-9, _ and start with a letter"
        )
    if not _KEY_RE.fullmatch(key):
        raise InvalidFeedId(
            f"feed key {key[:64]!r} must be non-empty and use only A-Z a-z 0-9 _ . @ = + -"
        )
    if groups is not None and group not in groups:
        raise UnknownFeedGroup(
            f"unknown feed group {group!r}; configured: {', '.join(sorted(groups))}"
        )
    return FeedId(group, key)
