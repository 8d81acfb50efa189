"""The check that ends every scenario: each acknowledged write, where it must be.

- **Canonical store**: every publish answered 2xx is in PostgreSQL, once
  (by ``foreign_id``), with the id it was answered with (read with SQL on
  the primary: the truth, not a cache of it).
- **Feeds**: once the deliveries have drained, each feed of the run holds,
  exactly once, every acknowledged activity it should: a source its own, a
  static follower those of its three sources, a follower made during the
  load (its follow acknowledged) every one of its source (copied or
  delivered). Read through the HTTP API, page by page, as a reader would.
  Activities whose publish was not acknowledged may be there too (a publish
  cut off after its commit): they are not counted either way.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from scripts import cluster
from scripts.cluster import State
from scripts.faults.traffic import Ledger, Plan
from tidings import Settings, Tidings
from tidings.core.limits import MAX_PAGE_SIZE
from tidings.http.auth import mint


@dataclass
class Audit:
    """What the check found."""

    acknowledged: int = 0
    #: Acknowledged publishes not in the canonical store (or under another id).
    lost: int = 0
    #: Acknowledged publishes stored more than once.
    duplicated: int = 0
    feeds: int = 0
    #: Acknowledged activities missing from a feed that should hold them
    #: (counted per feed), and entries held twice by one feed.
    missing_in_feeds: int = 0
    duplicated_in_feeds: int = 0
    #: Feeds read that were missing something, as ``feed: n missing``.
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.missing_in_feeds or self.duplicated_in_feeds
        )


def conninfo(state: State) -> str:
    return state.database_url.replace("postgresql+psycopg://", "postgresql://")


def drain(state: State, timeout: float) -> float:
    """Wait until the outbox is empty (every delivery done); the seconds it took."""
    settings = Settings(database_url=state.database_url, redis_url=state.redis_url)
    started = time.monotonic()
    with Tidings(settings, task_runner="manual") as engine:
        while engine.admin.pending():
            if time.monotonic() - started > timeout:
                raise RuntimeError(
                    f"{engine.admin.pending()} deliveries still pending after {timeout:.0f} s"
                )
            time.sleep(0.2)
    return time.monotonic() - started


def rebuild_command(state: State, args: list[str]) -> int:
    """Run ``tidings <args>`` (a rebuild) on the cluster, as an operator would;
    the feeds it says it rebuilt."""
    done = subprocess.run(
        [cluster.TIDINGS, *args], env=cluster.tidings_env(state), capture_output=True, text=True
    )
    found = re.search(r"(\d+) feed\(s\) rebuilt", done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"tidings {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return int(found[1])


def missing_in_redis(state: State, feeds: Mapping[str, set[str]]) -> tuple[list[str], int]:
    """The feeds whose timeline in Redis lacks one of their acknowledged
    activities, and the entries missing in all: read from the store itself
    (a reader would be served some of them from PostgreSQL, as a feed that
    lost everything reads its history)."""
    settings = Settings(database_url=state.database_url, redis_url=state.redis_url)
    lacking, missing = [], 0
    with Tidings(settings, task_runner="manual") as engine:
        for feed, want in sorted(feeds.items()):
            cap = engine.deliverer.cap(feed.partition(":")[0])
            held = engine.timeline.page(feed, limit=cap.max_length, before=None, cap=cap)
            if gone := len(want - set(held)):
                lacking.append(feed)
                missing += gone
    return lacking, missing


def expected_feeds(plan: Plan, ledger: Ledger) -> dict[str, set[str]]:
    """Each feed of the run -> the ids of the acknowledged activities it must hold."""
    by_source: dict[str, set[str]] = {plan.source(i): set() for i in range(plan.sources)}
    for source, activity_id in ledger.acknowledged.values():
        by_source[source].add(activity_id)
    feeds = dict(by_source)
    for j in range(plan.followers):
        feeds[plan.follower(j)] = set().union(*(by_source[s] for s in plan.followed_by(j)))
    for follower, source in ledger.follows.items():
        feeds[follower] = set(by_source[source])
    return feeds


def check(state: State, plan: Plan, ledger: Ledger, feeds: Mapping[str, set[str]]) -> Audit:
    """Check the canonical store and ``feeds`` (from :func:`expected_feeds`)."""
    audit = Audit(acknowledged=len(ledger.acknowledged))
    _check_canonical(state, plan, ledger, audit)
    token = mint(state.secret, "*", server=True)
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {token}"}) as client:
        for feed, want in sorted(feeds.items()):
            held = read_feed(client, state.serve_urls, feed)
            audit.feeds += 1
            counts = Counter(held)
            missing = len(want - counts.keys())
            doubled = sum(n - 1 for n in counts.values() if n > 1)
            audit.missing_in_feeds += missing
            audit.duplicated_in_feeds += doubled
            if (missing or doubled) and len(audit.examples) < 5:
                audit.examples.append(f"{feed}: {missing} missing, {doubled} twice")
    return audit


def _check_canonical(state: State, plan: Plan, ledger: Ledger, audit: Audit) -> None:
    with psycopg.connect(conninfo(state), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT foreign_id, id FROM tidings_activities WHERE foreign_id LIKE %s",
            (f"{plan.run}-a%",),
        ).fetchall()
    stored: dict[str, list[str]] = {}
    for foreign_id, activity_id in rows:
        stored.setdefault(foreign_id, []).append(activity_id)
    for foreign_id, (_, activity_id) in ledger.acknowledged.items():
        ids = stored.get(foreign_id, [])
        audit.lost += activity_id not in ids
        audit.duplicated += max(0, len(ids) - 1)


def read_feed(client: httpx.Client, urls: list[str], feed: str) -> list[str]:
    """Every activity id of ``feed``, newest first, page by page."""
    group, key = feed.split(":", 1)
    ids: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": str(MAX_PAGE_SIZE)} | ({"cursor": cursor} if cursor else {})
        page = _get(client, urls, f"/v1/feeds/{group}/{key}", params)
        ids += [a["id"] for a in page["results"]]
        cursor = page.get("next")
        if not cursor:
            return ids


def _get(client: httpx.Client, urls: list[str], path: str, params: dict[str, str]) -> Any:
    """GET on the first serve process that answers 200 (the check runs after
    the fault is repaired; a 503 while a store settles is asked again)."""
    deadline = time.monotonic() + 30
    while True:
        for url in urls:
            try:
                answer = client.get(url + path, params=params)
            except httpx.TransportError:
                continue
            if answer.status_code == 200:
                return answer.json()
            if answer.status_code != 503:
                raise RuntimeError(f"GET {path}: {answer.status_code} {answer.text[:200]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"GET {path}: no serve process answered 200 for 30 s")
        time.sleep(0.5)
