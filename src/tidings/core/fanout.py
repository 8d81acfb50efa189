"""Fan-out (pure): planning a delivery's store calls, push or pull per source,
and the read-time merge.

Planning: feeds of one group share a cap, so a chunk of targets becomes one
store call per group; the order of groups and of feeds within them is kept,
which keeps the work of a retried chunk identical to the first attempt's.

A source is *pushed* (each activity written into every follower feed) until
its follower count passes ``pull_threshold``; then it is *pulled*: follower
feeds no longer receive its activities, and readers merge its newest ones at
read time. Hysteresis keeps a source that hovers around the threshold from
flapping: it goes back to push only once it has fallen below
``threshold * (1 - hysteresis)``.

A pulled source on its way back to push is *draining*: deliveries push again,
readers still merge it, until its recent activities have been copied into
its followers' feeds. Only then do reads stop merging it, so no entry is
missed across the switch (and the merge drops the duplicates meanwhile).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Sequence
from enum import StrEnum


class Strategy(StrEnum):
    """How a source's activities reach its followers (stored by value)."""

    PUSH = "push"
    PULL = "pull"
    DRAINING = "draining"


class OutboxKind(StrEnum):
    """What an outbox row asks of the deliverer (stored by value).

    ``DELIVER`` writes an activity into the feeds that follow its source,
    ``RETRACT`` takes it out of them again, ``COPY`` copies sources' history
    into feeds that just followed them.
    """

    DELIVER = "deliver"
    RETRACT = "retract"
    COPY = "copy"


def classify(current: Strategy, followers: int, threshold: int, hysteresis: float) -> Strategy:
    """Where a source with ``followers`` should be, given where it is now.

    A draining source counts as push here: it is on its way there, and only
    a count above the threshold sends it back to pull.
    """
    if current == Strategy.PULL:
        below = followers < threshold * (1 - hysteresis)
        return Strategy.PUSH if below else Strategy.PULL
    return Strategy.PULL if followers > threshold else Strategy.PUSH


def merge_newest(lists: Iterable[Sequence[str]], limit: int) -> list[str]:
    """The newest ``limit`` distinct ids of several newest-first id lists.

    Ids are unique and sort by time, so merging by id alone is exact: no
    score is needed, and an id present in several lists (a pulled source's
    activity that was also pushed before the source switched) is kept once.
    """
    out: list[str] = []
    if limit <= 0:
        return out
    last = None
    for item in heapq.merge(*lists, reverse=True):
        if item != last:
            out.append(item)
            last = item
            if len(out) == limit:
                break
    return out


def backfill_plan(
    newest: Sequence[str], followers: Sequence[tuple[str, str]]
) -> list[tuple[list[str], list[str]]]:
    """What a source going back to push copies into its followers: ``(ids, feeds)``
    pairs, one per distinct slice, in follower order of first appearance.

    ``newest`` are the source's newest ids (newest first); ``followers`` are
    ``(feed, history_from)``: a follower receives only the ids its history
    includes, as it would have through the pulled merge.
    """
    ascending = list(reversed(newest))
    plan: dict[int, list[str]] = {}
    for feed, start in followers:
        keep = len(ascending) - bisect.bisect_left(ascending, start)
        if keep:
            plan.setdefault(keep, []).append(feed)
    return [(list(newest[:keep]), feeds) for keep, feeds in plan.items()]


def by_feed_group(feeds: Sequence[str], *, presorted: bool = False) -> dict[str, list[str]]:
    """Feeds split by group, first-seen order, duplicates dropped.

    ``presorted`` promises ``feeds`` are sorted and unique (a follower chunk):
    then the first and last feed tell whether all share one group, which is
    the usual case and avoids touching every feed in Python.
    """
    if not feeds:
        return {}
    group, _, _ = feeds[0].partition(":")
    prefix = group + ":"
    if presorted and feeds[-1].startswith(prefix):
        return {group: list(feeds)}
    unique = list(dict.fromkeys(feeds))
    plan: dict[str, list[str]] = {}
    for feed in unique:
        plan.setdefault(feed.partition(":")[0], []).append(feed)
    return plan


def direct_targets(source: str, to: Iterable[str]) -> list[str]:
    """The feeds an activity reaches without a follow: its own feed and ``to``."""
    return [source, *[feed for feed in to if feed != source]]
