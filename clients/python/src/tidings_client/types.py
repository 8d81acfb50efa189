"""The service's JSON, typed: each TypedDict has the field names of the HTTP
schema it mirrors (``tidings.http.models``), so a result is the decoded JSON
itself, with no copy or conversion per read.

Keys a response carries only sometimes (a ranked feed's ``score``, the
reaction fields a read asked for) are ``NotRequired``. Times are the ISO-8601
strings the service sends.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

#: A JSON object as the service sends it (profiles, ``extra``, object data).
JSON = dict[str, Any]


class ActivityIn(TypedDict):
    """An activity to publish: ``actor``, ``verb`` and ``object`` are required."""

    actor: str
    verb: str
    object: str
    target: NotRequired[str | None]
    time: NotRequired[str | None]
    foreign_id: NotRequired[str | None]
    to: NotRequired[list[str]]
    extra: NotRequired[JSON]


class Activity(TypedDict):
    """A stored activity (``ActivityOut``); with ``enrich``, ``actor``,
    ``object`` and ``target`` may be the stored user or object."""

    id: str
    actor: str | JSON
    verb: str
    object: str | JSON
    target: str | JSON | None
    time: str
    foreign_id: str | None
    to: list[str]
    extra: JSON
    score: NotRequired[float | None]
    explain: NotRequired[dict[str, float] | None]
    reaction_counts: NotRequired[dict[str, int] | None]
    latest_reactions: NotRequired[dict[str, list[JSON]] | None]
    own_reactions: NotRequired[dict[str, list[JSON]] | None]


class Page(TypedDict):
    """A page of a flat or ranked feed; ``next`` is the cursor of the next page."""

    results: list[Activity]
    next: str | None
    renewed: NotRequired[bool | None]


class Aggregate(TypedDict):
    """One group of an aggregated or notification feed."""

    group: str
    verb: str
    activity_count: int
    actor_count: int
    activities: list[Activity]
    created_at: str
    updated_at: str
    is_seen: NotRequired[bool | None]
    is_read: NotRequired[bool | None]


class AggregatePage(TypedDict):
    """A page of groups; ``unseen`` and ``unread`` on notification feeds."""

    results: list[Aggregate]
    next: str | None
    unseen: NotRequired[int | None]
    unread: NotRequired[int | None]


class Counts(TypedDict):
    """A notification feed's unseen and unread groups."""

    unseen: int
    unread: int


class BatchItem(TypedDict):
    created: bool
    activity: Activity


class BatchResult(TypedDict):
    results: list[BatchItem]


class FollowResult(TypedDict):
    follower: str
    source: str
    created: bool


class FollowPair(TypedDict):
    follower: str
    source: str


class FollowBatchResult(TypedDict):
    """The pairs the batch created (those already following are left out)."""

    created: list[FollowPair]


class FollowRow(TypedDict):
    follower: str
    source: str
    created_at: str


class FollowPage(TypedDict):
    results: list[FollowRow]
    next: str | None


class Reaction(TypedDict):
    id: str
    activity_id: str
    kind: str
    user: str
    data: JSON
    parent: str | None
    to: list[str]
    created_at: str
    updated_at: str
    children_counts: dict[str, int]


class ReactionPage(TypedDict):
    results: list[Reaction]
    next: str | None


class UserCounts(TypedDict):
    followers: int
    following: int
    activities: int


class User(TypedDict):
    id: str
    handle: str
    profile: JSON
    counts: UserCounts


class Stats(TypedDict):
    """A feed's exact follower, following and published-activity counts."""

    followers: int
    following: int
    activities: int


class StoredObject(TypedDict):
    """An object activities refer to as ``type:id``."""

    type: str
    id: str
    data: JSON


class Mute(TypedDict):
    target: str
    until_ms: int | None
    notifications: bool


class Block(TypedDict):
    target: str


class Filter(TypedDict):
    id: str
    keywords: list[str]
    whole_word: bool
    contexts: list[str]
    until_ms: int | None
    action: str


class Health(TypedDict):
    status: str
    pending_deliveries: int


class Problem(TypedDict):
    """An error body (``application/problem+json``, RFC 9457)."""

    type: str
    title: str
    status: int
    detail: str
    field: NotRequired[str | None]


__all__ = [
    "JSON",
    "Activity",
    "ActivityIn",
    "Aggregate",
    "AggregatePage",
    "BatchItem",
    "BatchResult",
    "Block",
    "Counts",
    "Filter",
    "FollowBatchResult",
    "FollowPage",
    "FollowPair",
    "FollowResult",
    "FollowRow",
    "Health",
    "Mute",
    "Page",
    "Problem",
    "Reaction",
    "ReactionPage",
    "Stats",
    "StoredObject",
    "User",
    "UserCounts",
]
