"""Follows written straight into the canonical store with a delivery tier,
for tests of tiered deliveries (idle followers, Celery priorities)."""

from __future__ import annotations

from collections.abc import Mapping

from tidings import Tidings
from tidings.canonical.follows import followers_moved
from tidings.canonical.schema import follows


def add_follows(engine: Tidings, source: str, tiers_of: Mapping[str, int]) -> None:
    with engine.db.write() as conn:
        conn.execute(
            follows.insert(),
            [
                {"follower": f, "source": source, "created_ms": 0, "tier": t, "tier_ms": 0}
                for f, t in tiers_of.items()
            ],
        )
    engine.canonical.follows.recount([source, *tiers_of])


def set_tier(engine: Tidings, follower: str, tier: int) -> None:
    with engine.db.write() as conn:
        conn.execute(
            follows.update()
            .where(follows.c.follower == follower)
            .values(tier=tier, tier_ms=engine.clock.ms())
        )
        followers_moved(conn, [follower])
