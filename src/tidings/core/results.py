"""What engine methods return: a page of results and the cursor to the next one;
a follow; delivery and live-event figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    results: list[T] = field(default_factory=list)
    #: Opaque cursor for the next page; None on the last page.
    next: str | None = None
    #: The feed is being rebuilt after its owner was idle: this page came from
    #: the canonical store (complete, but slower to make). Over HTTP: 206.
    regenerating: bool = False
    #: Ranked feeds: the frozen order of the pages before had expired, so this
    #: page was ranked afresh, leaving out everything served before.
    renewed: bool = False
    #: Per result, what a read added to the activity: ``score`` (and
    #: ``explain``) on ranked feeds, ``reaction_counts``, ``latest_reactions``
    #: and ``own_reactions`` when asked for. None when nothing was.
    extras: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class Stats:
    """Delivery figures of one engine, for monitoring (``/metrics``)."""

    #: Outbox rows delivered by this process since it started.
    delivered: int
    #: Outbox rows waiting to be delivered, by any process.
    pending: int
    #: Age of the oldest pending delivery; 0 when none is pending.
    lag_seconds: float


@dataclass(frozen=True, slots=True)
class BusFigures:
    """How far behind the live events run in one process, for monitoring (``/metrics``)."""

    #: The longest an event took, in the last 5 to 10 seconds, from the bus
    #: (Redis) taking it to its hand-over to this process's subscribers;
    #: about 0 for the in-process bus, which hands events over as it makes them.
    lag_seconds: float
    #: Events made here and still waiting to be sent to the bus (Redis slow
    #: or down: beyond ``MAX_PENDING`` they are dropped and their feeds resync).
    backlog: int


@dataclass(frozen=True, slots=True)
class Follow:
    follower: str
    source: str
    created_ms: int


class FollowList(StrEnum):
    """Which follows of a feed a page lists: of it, or by it."""

    #: The feeds following it, in follower order.
    FOLLOWERS = "followers"
    #: The sources it follows, in source order.
    FOLLOWING = "following"


@dataclass(frozen=True, slots=True)
class FeedStats:
    """A feed's counts, kept in the transactions that change them."""

    #: Feeds following this one.
    followers: int
    #: Feeds this one follows.
    following: int
    #: Activities published into this feed (not those delivered to it).
    activities: int
