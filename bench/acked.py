"""The load test's acknowledged publishes, each found where it must be.

Locust (``bench/locustfile.py``) writes every publish answered 2xx: its
feed, its ``foreign_id`` (new for each publish) and the id it was answered
with. Once the deliveries have drained, each must be

- in the canonical store once, under that id (SQL on the primary);
- in its author's own feed once (read over HTTP, page by page).

Follower timelines are checked by the fault scenarios (``scripts/faults``),
on a graph of their own where what each feed must hold is known exactly;
here the random follows made during the load would have to be tracked by
the locustfile too.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import httpx
import psycopg
from scripts.cluster import State
from scripts.faults.audit import Audit, conninfo, read_feed

from tidings.http.auth import mint


def check(state: State, acked_file: Path) -> Audit:
    """Check every publish ``acked_file`` lists; what was found."""
    acknowledged: list[list[str]] = json.loads(acked_file.read_text())
    audit = Audit(acknowledged=len(acknowledged))
    with psycopg.connect(conninfo(state), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT foreign_id, id FROM tidings_activities WHERE foreign_id = ANY(%s)",
            ([foreign_id for _, foreign_id, _ in acknowledged],),
        ).fetchall()
    stored: dict[str, list[str]] = {}
    for foreign_id, activity_id in rows:
        stored.setdefault(foreign_id, []).append(activity_id)
    by_feed: dict[str, set[str]] = {}
    for feed, foreign_id, activity_id in acknowledged:
        ids = stored.get(foreign_id, [])
        audit.lost += activity_id not in ids
        audit.duplicated += max(0, len(ids) - 1)
        by_feed.setdefault(feed, set()).add(activity_id)
    token = mint(state.secret, "*", server=True)
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {token}"}) as client:
        for feed, want in sorted(by_feed.items()):
            counts = Counter(read_feed(client, state.serve_urls, feed))
            missing = len(want - counts.keys())
            doubled = sum(n - 1 for n in counts.values() if n > 1)
            audit.feeds += 1
            audit.missing_in_feeds += missing
            audit.duplicated_in_feeds += doubled
            if (missing or doubled) and len(audit.examples) < 5:
                audit.examples.append(f"{feed}: {missing} missing, {doubled} twice")
    return audit
