"""Fan-out planning (pure): which store calls a delivery makes.

Feeds of one group share a cap, so a chunk of targets becomes one store call
per group; the order of groups and of feeds within them is kept, which keeps
the work of a retried chunk identical to the first attempt's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def by_group(feeds: Sequence[str], *, presorted: bool = False) -> dict[str, list[str]]:
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
