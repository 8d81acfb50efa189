"""Timeline stores: where materialised feeds live (memory, SQL, Redis)."""

from tidings.stores.base import ActivityCache, Cap, TimelineStore

__all__ = ["ActivityCache", "Cap", "TimelineStore"]
