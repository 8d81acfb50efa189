"""Fan-out planning (pure): which store calls a delivery makes.

Feeds of one group share a cap, so a chunk of targets becomes one store call
per group; the order of groups and of feeds within them is kept, which keeps
the work of a retried chunk identical to the first attempt's.
"""

from __future__ import annotations

from collections.abc import Iterable


def by_group(feeds: Iterable[str]) -> dict[str, list[str]]:
    """Feeds split by group, first-seen order, duplicates dropped."""
    unique = list(dict.fromkeys(feeds))
    if not unique:
        return {}
    group, _, _ = unique[0].partition(":")
    prefix = group + ":"
    # Follower chunks are nearly always one group: check that at C speed first.
    if all(feed.startswith(prefix) for feed in unique):
        return {group: unique}
    plan: dict[str, list[str]] = {}
    for feed in unique:
        plan.setdefault(feed.partition(":")[0], []).append(feed)
    return plan


def direct_targets(source: str, to: Iterable[str]) -> list[str]:
    """The feeds an activity reaches without a follow: its own feed and ``to``."""
    return [source, *[feed for feed in to if feed != source]]
