"""Every Redis key the Python side names, in one place.

Under a namespace ``ns`` (the ``namespace`` setting, ``tidings`` by default):

``ns:feed:{F}``
    Feed F: its ids in one string (layout in ``lua/add.lua``).
``ns:agg:{F}``
    Aggregated or notification feed F: its aggregates by position, a sorted set.
    Its other keys (records, member ids, actor sketches) and its record
    fields are derived from this one inside the scripts; ``lua/groups.lua``
    lists them.
``ns:snap:<key>``
    A snapshot of a ranked feed's order (``snapshots.py``), with its TTL.
``ns:stats:<feed>``
    A feed's counts (``counts.py``), with a TTL.
``ns:act:<id>``
    A cached activity, under its raw 16-byte id: the page scripts build these
    keys from feed entries. Value format in ``cache.py``.

The braces make the feed id the key's hash tag, so on a cluster every key of
a feed lives in one slot and one script call can touch them together.
Activity keys carry no hash tag: they spread over every slot.
"""

from __future__ import annotations

from collections.abc import Sequence


def feed_prefix(namespace: str) -> str:
    """A feed's key is this, the feed id, then ``}``."""
    return f"{namespace}:feed:{{"


def aggregated_prefix(namespace: str) -> str:
    """An aggregated feed's key is this, the feed id, then ``}``."""
    return f"{namespace}:agg:{{"


def activity_prefix(namespace: str) -> bytes:
    """A cached activity's key is this, then its raw 16-byte id."""
    return f"{namespace}:act:".encode()


def snapshot_prefix(namespace: str) -> str:
    """A ranked page snapshot's key is this, then its random key."""
    return f"{namespace}:snap:"


def stats_prefix(namespace: str) -> str:
    """A feed's cached counts' key is this, then the feed id."""
    return f"{namespace}:stats:"


def namespace_pattern(namespace: str) -> str:
    """A SCAN pattern for every key of the namespace."""
    return f"{namespace}:*"


class RedisKeys:
    """The keys of one namespace.

    The prefixes are built once: a delivery names thousands of feeds per call.
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._feed = feed_prefix(namespace)
        self._aggregated = aggregated_prefix(namespace)
        self._activity = activity_prefix(namespace)

    def feed(self, feed: str) -> str:
        return self._feed + feed + "}"

    def feeds(self, feeds: Sequence[str]) -> list[str]:
        prefix = self._feed
        return [prefix + feed + "}" for feed in feeds]

    def aggregated(self, feed: str) -> str:
        return self._aggregated + feed + "}"

    def aggregated_many(self, feeds: Sequence[str]) -> list[str]:
        prefix = self._aggregated
        return [prefix + feed + "}" for feed in feeds]

    @property
    def activity_prefix(self) -> bytes:
        return self._activity

    def activity(self, activity_id: str) -> bytes:
        return self._activity + bytes.fromhex(activity_id)

    def activities(self, activity_ids: Sequence[str]) -> list[bytes]:
        prefix = self._activity
        return [prefix + bytes.fromhex(a) for a in activity_ids]
