"""The Redis stores, on a single server or a cluster.

``keys`` names every key; ``transport`` connects and carries script calls (one
server, or one call per cluster node); ``timeline``, ``aggregates`` and ``cache``
are the stores; ``aio`` reads pages on the event loop; ``lua/`` holds the
scripts, each documenting the keys it touches.
"""

from tidings.stores.redis.aggregates import RedisAggregateStore
from tidings.stores.redis.cache import RedisActivityCache
from tidings.stores.redis.counts import RedisCountsCache
from tidings.stores.redis.snapshots import RedisSnapshotStore
from tidings.stores.redis.timeline import RedisTimelineStore
from tidings.stores.redis.transport import connect, disconnect

__all__ = [
    "RedisActivityCache",
    "RedisAggregateStore",
    "RedisCountsCache",
    "RedisSnapshotStore",
    "RedisTimelineStore",
    "connect",
    "disconnect",
]
