"""Activity documents for pages: the cache first, then the canonical store."""

from __future__ import annotations

from collections.abc import Sequence

from tidings.canonical.store import CanonicalStore
from tidings.stores.base import ActivityCache


class ActivityDocs:
    def __init__(self, cache: ActivityCache, canonical: CanonicalStore) -> None:
        self.cache = cache
        self.canonical = canonical

    def complete(self, activity_ids: Sequence[str], docs: dict[str, bytes]) -> dict[str, bytes]:
        """``docs`` completed for ``activity_ids``: cache, then canonical store
        (whose finds are cached). Ids of removed activities stay missing."""
        misses = [i for i in activity_ids if i not in docs]
        if misses:
            docs.update(self.cache.get_many(misses))
            misses = [i for i in misses if i not in docs]
        if misses:
            found = self.canonical.activities.get_versioned_docs(misses)
            if found:
                self.cache.put_many(found)
                docs.update((aid, doc) for aid, (_, doc) in found.items())
        return docs
