"""The Redis stores: timelines, groups and the activity cache, on a single
server or a cluster (transport), with an asyncio page reader (aio)."""
