"""Follows and the counts they move, written in few statements: lists of
VALUES on SQLite, a parameter per column on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from sqlalchemy import Connection

from tidings.canonical.db import Database

_FOLLOW_COLUMNS = (
    "follower",
    "source",
    "created_ms",
    "history_from",
    "tier",
    "tier_ms",
    "since_row",
)
_INSERT_FOLLOW = f"INSERT INTO tidings_follows ({', '.join(_FOLLOW_COLUMNS)})"
_IGNORE = "ON CONFLICT DO NOTHING"
_ADD_STATS_ROW = "INSERT INTO tidings_feed_stats (feed) VALUES ({p}) ON CONFLICT DO NOTHING"
_COUNT_FOLLOWS = (
    "UPDATE tidings_feed_stats SET followers = followers + {p}, following = following + {p}, "
    "follows_version = follows_version + {p} WHERE feed = {p}"
)
# PostgreSQL: the follows of a call in one statement, and the counts they
# move in another (rows locked in feed order), each of one JSON parameter of
# rows: psycopg adapts a list to an array element by element in Python, at
# four times the cost of the statement for a batch of 1,000 follows. (jsonb:
# parsed once, where ``json`` parses a row again for each field read.)
_INSERT_FOLLOWS_POSTGRES = (
    f"{_INSERT_FOLLOW} SELECT r->>0, r->>1, %(now)s, r->>2, CAST(r->>3 AS int), %(now)s, "
    "%(since)s FROM jsonb_array_elements(CAST(%(rows)s AS jsonb)) AS r "
    f"{_IGNORE} RETURNING follower, source"
)
_COUNT_FOLLOWS_POSTGRES = (
    "INSERT INTO tidings_feed_stats AS s (feed, followers, following, follows_version) "
    "SELECT r->>0, CAST(r->>1 AS bigint), CAST(r->>2 AS bigint), CAST(r->>3 AS bigint) "
    "FROM jsonb_array_elements(CAST(%s AS jsonb)) AS r ON CONFLICT (feed) DO UPDATE SET "
    "followers = s.followers + excluded.followers, following = s.following + excluded.following, "
    "follows_version = s.follows_version + excluded.follows_version"
)


def insert_follows(
    db: Database, conn: Connection, rows: Sequence[dict[str, Any]]
) -> list[tuple[str, str]]:
    """Insert the follows of ``rows`` not yet recorded; the pairs inserted."""
    if db.dialect == "sqlite":
        # Driver-level VALUES lists (SQLAlchemy's RETURNING insert ran one
        # statement per row). Nearly always every follow is new and the
        # row count says so; when some were there already, the insert is
        # taken back and made again naming the rows it adds.
        values = [tuple(r[c] for c in _FOLLOW_COLUMNS) for r in rows]
        with db.savepoint(conn, "tidings_follows"):
            if db.run_values(conn, _INSERT_FOLLOW, values, _IGNORE) != len(rows):
                db.undo_to(conn, "tidings_follows")
                made = db.fetch_values(
                    conn, _INSERT_FOLLOW, values, f"{_IGNORE} RETURNING follower, source"
                )
                new = {(f, s) for f, s in made}
                rows = [r for r in rows if (r["follower"], r["source"]) in new]
        return [(r["follower"], r["source"]) for r in rows]
    # One statement whatever the number of follows (SQLAlchemy's insert
    # ran one per row: ON CONFLICT DO NOTHING with RETURNING defeats its
    # batching). RETURNING (not rowcount, on which drivers disagree for
    # ON CONFLICT DO NOTHING) names the pairs that were new. Every row of
    # a call has the same time and outbox mark.
    follows = [[r["follower"], r["source"], r["history_from"], r["tier"]] for r in rows]
    params = {
        "rows": orjson.dumps(follows).decode(),
        "now": rows[0]["created_ms"],
        "since": rows[0]["since_row"],
    }
    returned = set(map(tuple, db.fetch_raw(conn, _INSERT_FOLLOWS_POSTGRES, params)))
    return [(r["follower"], r["source"]) for r in rows if (r["follower"], r["source"]) in returned]


def count_follows(
    db: Database, conn: Connection, pairs: Iterable[tuple[str, str]], step: int
) -> None:
    """Move the follower and following counts of the feeds of ``pairs``
    (``(follower, source)``) by ``step`` each."""
    followers: dict[str, int] = {}
    following: dict[str, int] = {}
    for follower, source in pairs:
        followers[source] = followers.get(source, 0) + step
        following[follower] = following.get(follower, 0) + step
    feeds = sorted(followers.keys() | following.keys())
    if not feeds:
        return
    if db.dialect != "sqlite":
        # One statement, its rows in feed order.
        counts = [[f, followers.get(f, 0), following.get(f, 0), int(f in followers)] for f in feeds]
        db.run_raw(conn, _COUNT_FOLLOWS_POSTGRES, (orjson.dumps(counts).decode(),))
        return
    db.run_many(conn, _ADD_STATS_ROW, [(f,) for f in feeds])
    # One statement per feed, in feed order (a feed may be a follower and a
    # source): the stats rows are locked in the order every writer uses.
    db.run_many(
        conn,
        _COUNT_FOLLOWS,
        [(followers.get(f, 0), following.get(f, 0), int(f in followers), f) for f in feeds],
    )
