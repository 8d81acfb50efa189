"""Request and response shapes, for validation and the OpenAPI schema.

The limits here are :mod:`tidings.core.limits`, so the schema documents them;
the engine checks them again, so the two can never disagree silently.

Request bodies are validated strictly: a JSON boolean, integer or string is
required where the schema says so (``"all": "yes"``, ``"copy_limit": "5"`` and
``5.0`` are refused, not coerced).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from tidings.core.limits import (
    MAX_AGGREGATE_KEY_LENGTH,
    MAX_BATCH,
    MAX_COPY_LIMIT,
    MAX_FEED_ID_LENGTH,
    MAX_FOLLOW_BATCH,
    MAX_MARK_AGGREGATES,
    MAX_REF_LENGTH,
    MAX_TO,
    MAX_VERB_LENGTH,
)
from tidings.core.reactions import MAX_KIND_LENGTH
from tidings.core.rules import MAX_DURATION_S, MAX_KEYWORDS, Context
from tidings.core.users import MAX_HANDLE_LENGTH

Ref = Field(min_length=1, max_length=MAX_REF_LENGTH)
FeedIdField = Field(min_length=3, max_length=MAX_FEED_ID_LENGTH, examples=["user:bob"])
AggregateKey = Annotated[str, Field(max_length=MAX_AGGREGATE_KEY_LENGTH)]


class _Input(BaseModel):
    """A request body: unknown fields are refused, and JSON types are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ActivityIn(_Input):
    actor: str = Field(min_length=1, max_length=MAX_REF_LENGTH, examples=["bob"])
    verb: str = Field(min_length=1, max_length=MAX_VERB_LENGTH, examples=["like"])
    object: str = Field(min_length=1, max_length=MAX_REF_LENGTH, examples=["photo:17"])
    target: str | None = Field(default=None, min_length=1, max_length=MAX_REF_LENGTH)
    # A string, parsed by the library's own rule (tidings.activity.parse_time),
    # so the HTTP and Python APIs accept the same times.
    time: str | None = Field(
        default=None,
        description="ISO-8601 with an offset, e.g. 2026-05-01T12:00:00Z; "
        "naive times and Unix numbers are refused",
        json_schema_extra={"format": "date-time"},
    )
    foreign_id: str | None = Field(default=None, min_length=1, max_length=MAX_REF_LENGTH)
    to: list[str] = Field(default_factory=list, max_length=MAX_TO)
    extra: dict[str, Any] = Field(
        default_factory=dict, description="free JSON; the whole activity is at most 10,240 bytes"
    )


class ActivityOut(BaseModel):
    id: str = Field(pattern=r"^[0-9a-f]{32}$")
    actor: str | dict[str, Any] = Field(description="with enrich: the user, or a tombstone")
    verb: str
    object: str | dict[str, Any] = Field(description="with enrich: the stored object, if any")
    target: str | dict[str, Any] | None
    time: AwareDatetime
    foreign_id: str | None
    to: list[str]
    extra: dict[str, Any]
    score: float | None = Field(default=None, description="ranked feeds: the ranking's score")
    explain: dict[str, float] | None = Field(
        default=None, description="ranked feeds, with explain=true: the variables of the score"
    )
    reaction_counts: dict[str, int] | None = Field(
        default=None, description="with reactions=counts: exact counts per kind"
    )
    latest_reactions: dict[str, list[dict[str, Any]]] | None = Field(
        default=None, description="with reactions=latest: the newest per kind"
    )
    own_reactions: dict[str, list[dict[str, Any]]] | None = Field(
        default=None, description="with reactions=own: the reader's, per kind"
    )


class Page(BaseModel):
    results: list[ActivityOut]
    next: str | None = Field(description="cursor of the next page; null on the last page")
    renewed: bool | None = Field(
        default=None,
        description="ranked feeds: the frozen order of the pages before had expired; this "
        "page was ranked afresh, leaving out everything served before",
    )


# An aggregate, and a page of them. GroupOut and GroupPage keep their names:
# they name the OpenAPI schemas clients are generated from, which are frozen.
class GroupOut(BaseModel):
    group: str = Field(description="the aggregate's key, rendered from the feed group's template")
    verb: str = Field(description="verb of the newest activity")
    activity_count: int
    actor_count: int = Field(
        description="distinct actors; exact up to 64, estimated past that on Redis"
    )
    activities: list[ActivityOut] = Field(description="the newest max_aggregate_size, newest first")
    created_at: AwareDatetime
    updated_at: AwareDatetime
    is_seen: bool | None = Field(default=None, description="notification feeds only")
    is_read: bool | None = Field(default=None, description="notification feeds only")


class GroupPage(BaseModel):
    results: list[GroupOut]
    next: str | None = Field(description="cursor of the next page; null on the last page")
    unseen: int | None = Field(default=None, description="unseen aggregates (notification feeds)")
    unread: int | None = Field(default=None, description="unread aggregates (notification feeds)")


class MarkIn(_Input):
    """Name the aggregates (by key, in ``groups``), or ``{"all": true}``; the engine checks each key
    (:func:`tidings.aggregation.check_aggregate_keys`)."""

    groups: list[AggregateKey] | None = Field(
        default=None, min_length=1, max_length=MAX_MARK_AGGREGATES
    )
    all: bool = False

    @model_validator(mode="after")
    def _one_of(self) -> MarkIn:
        if (self.groups is None) == (not self.all):
            raise ValueError('give either "groups" (a list of aggregate keys) or "all": true')
        return self


class CountsOut(BaseModel):
    unseen: int
    unread: int


class BatchIn(_Input):
    activities: list[ActivityIn] = Field(min_length=1, max_length=MAX_BATCH)


class BatchItem(BaseModel):
    created: bool
    activity: ActivityOut


class BatchOut(BaseModel):
    results: list[BatchItem]


class UpdateIn(_Input):
    set: dict[str, Any] = Field(default_factory=dict)
    unset: list[str] = Field(default_factory=list, max_length=1000)


class FollowIn(_Input):
    source: str = FeedIdField
    copy_limit: int = Field(default=100, ge=0, le=MAX_COPY_LIMIT)


class FollowPair(_Input):
    follower: str = FeedIdField
    source: str = FeedIdField


class FollowBatchIn(_Input):
    follows: list[FollowPair] = Field(min_length=1, max_length=MAX_FOLLOW_BATCH)
    copy_limit: int = Field(default=100, ge=0, le=MAX_COPY_LIMIT)


class FollowOut(BaseModel):
    follower: str
    source: str
    created: bool


class FollowBatchOut(BaseModel):
    created: list[FollowPair]


class FollowRow(BaseModel):
    follower: str
    source: str
    created_at: AwareDatetime


class FollowPage(BaseModel):
    results: list[FollowRow]
    next: str | None


class Health(BaseModel):
    status: str
    pending_deliveries: int


class ReactionIn(_Input):
    kind: str = Field(min_length=1, max_length=MAX_KIND_LENGTH, examples=["like"])
    user: str = Field(min_length=1, max_length=MAX_REF_LENGTH, examples=["alice"])
    data: dict[str, Any] = Field(
        default_factory=dict, description="free JSON, at most 10,240 bytes serialised"
    )
    to: list[str] = Field(
        default_factory=list,
        max_length=MAX_TO,
        description="feeds that receive a notification activity of the reaction",
    )
    parent: str | None = Field(
        default=None, description="a reaction this one answers (3 levels at most)"
    )


class ReactionOut(BaseModel):
    id: str = Field(pattern=r"^[0-9a-f]{32}$")
    activity_id: str
    kind: str
    user: str
    data: dict[str, Any]
    parent: str | None
    to: list[str]
    created_at: AwareDatetime
    updated_at: AwareDatetime
    children_counts: dict[str, int]


class ReactionPage(BaseModel):
    results: list[ReactionOut]
    next: str | None = Field(description="cursor of the next page; null on the last page")


class ReactionUpdateIn(_Input):
    data: dict[str, Any]


class UserIn(_Input):
    id: str = Field(min_length=1, max_length=MAX_REF_LENGTH, examples=["alice"])
    handle: str = Field(min_length=1, max_length=MAX_HANDLE_LENGTH, examples=["Alice"])
    profile: dict[str, Any] = Field(
        default_factory=dict, description="free JSON, at most 10,240 bytes serialised"
    )


class UserPatch(_Input):
    handle: str | None = Field(default=None, min_length=1, max_length=MAX_HANDLE_LENGTH)
    profile: dict[str, Any] | None = None


class UserCounts(BaseModel):
    followers: int
    following: int
    activities: int


class UserOut(BaseModel):
    id: str
    handle: str
    profile: dict[str, Any]
    counts: UserCounts


class StatsOut(BaseModel):
    followers: int
    following: int
    activities: int = Field(description="activities published into the feed")


class ObjectIn(_Input):
    data: dict[str, Any] = Field(description="free JSON, at most 10,240 bytes serialised")


class ObjectOut(BaseModel):
    type: str
    id: str
    data: dict[str, Any]


class MuteIn(_Input):
    target: str = Field(min_length=1, max_length=MAX_REF_LENGTH, examples=["bob"])
    duration_s: int | None = Field(default=None, ge=1, le=MAX_DURATION_S)
    notifications: bool = Field(default=True, description="hide the target's notifications too")


class MuteOut(BaseModel):
    target: str
    until_ms: int | None
    notifications: bool


class BlockIn(_Input):
    target: str = Field(min_length=1, max_length=MAX_REF_LENGTH, examples=["bob"])


class FilterIn(_Input):
    keywords: list[str] = Field(min_length=1, max_length=MAX_KEYWORDS)
    whole_word: bool = True
    contexts: list[str] = Field(
        default_factory=lambda: [c.value for c in Context], min_length=1, max_length=3
    )
    duration_s: int | None = Field(default=None, ge=1, le=MAX_DURATION_S)
    action: str = Field(default="hide", pattern="^hide$")


class FilterOut(BaseModel):
    id: str
    keywords: list[str]
    whole_word: bool
    contexts: list[str]
    until_ms: int | None
    action: str


class ListOut(BaseModel):
    results: list[Any]
