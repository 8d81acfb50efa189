"""Versioned schema migrations.

Each step is a function of a connection inside the migration's transaction;
``tidings_schema`` records the version reached. Steps are append-only: a
released step is never edited, a change is a new step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Integer,
    MetaData,
    Row,
    Table,
    delete,
    inspect,
    select,
    text,
)

from tidings.canonical import schema
from tidings.canonical.partition_layout import partition_empty
from tidings.core.handles import skeleton

log = logging.getLogger("tidings.canonical.migrations")

_version_meta = MetaData()
schema_version = Table("tidings_schema", _version_meta, Column("version", Integer, nullable=False))


def _v1_initial(conn: Connection) -> None:
    schema.metadata.create_all(conn)


def _v2_aggregates(conn: Connection) -> None:
    """Aggregated feeds: the SQL aggregate store's tables; activities keep the
    aggregate keys they were delivered under, and the outbox keeps each
    activity's JSON and keys (a retraction must find the aggregates after the
    row is gone).

    A database created at v2 or later already has all of it from step 1.
    """
    blob = "BYTEA" if conn.dialect.name == "postgresql" else "BLOB"
    for table, column in (
        (schema.outbox, "doc"),
        (schema.outbox, "group_keys"),
        (schema.activities, "group_keys"),
    ):
        if column not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column} {blob}"))
    schema.metadata.create_all(conn, tables=[schema.aggregates, schema.aggregate_members])


def _v3_outbox_parts(conn: Connection) -> None:
    """The Celery runner: follower ranges of outbox rows, one a task.

    A database created at v3 or later already has it from step 1.
    """
    schema.metadata.create_all(conn, tables=[schema.outbox_parts])


def _v4_fanout(conn: Connection) -> None:
    """Hybrid fan-out: the per-source strategy table, and where each follow's
    history starts (existing follows: the floor id of their creation time,
    the same hex text :func:`tidings.core.ids.floor_id` makes).

    A database created at v4 or later already has all of it from step 1.
    """
    if "history_from" not in {c["name"] for c in inspect(conn).get_columns("tidings_follows")}:
        conn.execute(text("ALTER TABLE tidings_follows ADD COLUMN history_from VARCHAR(32)"))
        if conn.dialect.name == "postgresql":
            floor = "lpad(to_hex(created_ms), 12, '0')"
        else:
            floor = "printf('%012x', created_ms)"
        zeros = "0" * 20
        conn.execute(text(f"UPDATE tidings_follows SET history_from = {floor} || '{zeros}'"))
    schema.metadata.create_all(conn, tables=[schema.fanout])


def _v5_tiers(conn: Connection) -> None:
    """Inactive followers and delivery priorities: each follow's tier (in the
    covering index deliveries read), when each feed was last read, and parts
    recorded per tier (pending parts carry over as tier "all"). Durable
    seen/read marks, and when each activity was accepted (NULL for those
    accepted before: a rebuild takes their time instead).

    A database created at v5 or later already has all of it from step 1.
    """
    columns = {c["name"] for c in inspect(conn).get_columns("tidings_follows")}
    if "tier" not in columns:
        conn.execute(text("ALTER TABLE tidings_follows ADD COLUMN tier INTEGER NOT NULL DEFAULT 0"))
        conn.execute(
            text("ALTER TABLE tidings_follows ADD COLUMN tier_ms BIGINT NOT NULL DEFAULT 0")
        )
        conn.execute(text("DROP INDEX IF EXISTS tidings_follows_source_follower"))
        for index in schema.follows.indexes:
            index.create(conn, checkfirst=True)
    if "tier" not in {c["name"] for c in inspect(conn).get_columns("tidings_outbox_parts")}:
        # The primary key changes, which SQLite cannot ALTER: copy the table.
        conn.execute(text("ALTER TABLE tidings_outbox_parts RENAME TO tidings_outbox_parts_v4"))
        if conn.dialect.name == "postgresql":
            conn.execute(
                text(
                    "ALTER TABLE tidings_outbox_parts_v4 RENAME CONSTRAINT "
                    "tidings_outbox_parts_pkey TO tidings_outbox_parts_v4_pkey"
                )
            )
        schema.metadata.create_all(conn, tables=[schema.outbox_parts])
        conn.execute(
            text(
                'INSERT INTO tidings_outbox_parts (row_id, tier, "after", "last", done, split_ms) '
                'SELECT row_id, \'all\', "after", "last", done, 0 FROM tidings_outbox_parts_v4'
            )
        )
        conn.execute(text("DROP TABLE tidings_outbox_parts_v4"))
    if "accepted_us" not in {c["name"] for c in inspect(conn).get_columns("tidings_activities")}:
        conn.execute(text("ALTER TABLE tidings_activities ADD COLUMN accepted_us BIGINT"))
    schema.metadata.create_all(conn, tables=[schema.feed_reads, schema.aggregate_marks])


def _v6_outbox_claims(conn: Connection) -> None:
    """Outbox ids never reused, and a token per claim: a delivery still running
    when its row was replaced (a removal) must not act on the new row.

    SQLite cannot add AUTOINCREMENT to a column: the table is copied (ids
    kept, so the sequence starts above every pending row). PostgreSQL's
    serial ids were never reused; it only gains the column.

    A database created at v6 or later already has all of it from step 1.
    """
    if "claim_token" in {c["name"] for c in inspect(conn).get_columns("tidings_outbox")}:
        return
    if conn.dialect.name == "postgresql":
        conn.execute(
            text("ALTER TABLE tidings_outbox ADD COLUMN claim_token BIGINT NOT NULL DEFAULT 0")
        )
        return
    columns = (
        "id, kind, activity_id, source, targets, doc, group_keys, position, "
        "lease_until_ms, attempts, created_ms"
    )
    conn.execute(text("ALTER TABLE tidings_outbox RENAME TO tidings_outbox_v5"))
    schema.metadata.create_all(conn, tables=[schema.outbox])
    conn.execute(
        text(f"INSERT INTO tidings_outbox ({columns}) SELECT {columns} FROM tidings_outbox_v5")
    )
    conn.execute(text("DROP TABLE tidings_outbox_v5"))


def _v7_activity_versions(conn: Connection) -> None:
    """Activity versions, so the activity cache is written in commit order
    (existing activities start at 1).

    A database created at v7 or later already has it from step 1.
    """
    if "version" not in {c["name"] for c in inspect(conn).get_columns("tidings_activities")}:
        conn.execute(
            text("ALTER TABLE tidings_activities ADD COLUMN version BIGINT NOT NULL DEFAULT 1")
        )


def _v8_hidden_entries(conn: Connection) -> None:
    """Entries removed from one feed by its owner (``tidings_hidden``)."""
    schema.metadata.create_all(conn, tables=[schema.hidden])


def _v9_follow_marks(conn: Connection) -> None:
    """Each follow's outbox mark (``since_row``; existing follows: 0, so every
    pending delivery still reaches them), in the covering delivery index; the
    log of recent unfollows.

    A database created at v9 or later already has it from step 1.
    """
    schema.metadata.create_all(conn, tables=[schema.unfollows])
    if "since_row" in {c["name"] for c in inspect(conn).get_columns("tidings_follows")}:
        return
    conn.execute(text("ALTER TABLE tidings_follows ADD COLUMN since_row BIGINT NOT NULL DEFAULT 0"))
    conn.execute(text("DROP INDEX IF EXISTS tidings_follows_source_tier"))
    for index in schema.follows.indexes:
        index.create(conn, checkfirst=True)


def _v10_reactions(conn: Connection) -> None:
    """Reactions, their counts and the affinities they make; snapshots of
    ranked pages."""
    schema.metadata.create_all(
        conn,
        tables=[
            schema.reactions,
            schema.reaction_counts,
            schema.reaction_latest,
            schema.affinities,
            schema.rank_snapshots,
        ],
    )


def _v11_users(conn: Connection) -> None:
    """Users, their handles and objects; each feed's count of the activities
    published into it (existing feeds: counted now).

    A database created at v11 or later already has the column from step 1.
    """
    schema.metadata.create_all(conn, tables=[schema.users, schema.handles, schema.objects])
    if "activities" in {c["name"] for c in inspect(conn).get_columns("tidings_feed_stats")}:
        return
    conn.execute(
        text("ALTER TABLE tidings_feed_stats ADD COLUMN activities BIGINT NOT NULL DEFAULT 0")
    )
    conn.execute(
        text(
            "INSERT INTO tidings_feed_stats (feed, followers, following, activities) "
            "SELECT feed, 0, 0, 0 FROM tidings_activities GROUP BY feed "
            "ON CONFLICT (feed) DO NOTHING"
        )
    )
    conn.execute(
        text(
            "UPDATE tidings_feed_stats SET activities = (SELECT count(*) FROM tidings_activities "
            "a WHERE a.feed = tidings_feed_stats.feed)"
        )
    )


def _v12_rules(conn: Connection) -> None:
    """Users' mutes, blocks and keyword filters."""
    schema.metadata.create_all(conn, tables=[schema.mutes, schema.blocks, schema.keyword_filters])


def _v13_follows_version(conn: Connection) -> None:
    """A version of each source's followers (``feed_stats.follows_version``),
    which cached follower lists are checked against.

    A database created at v13 or later already has it from step 1.
    """
    if "follows_version" in {c["name"] for c in inspect(conn).get_columns("tidings_feed_stats")}:
        return
    conn.execute(
        text("ALTER TABLE tidings_feed_stats ADD COLUMN follows_version BIGINT NOT NULL DEFAULT 0")
    )


def _v14_object_owners(conn: Connection) -> None:
    """Who created each object (``tidings_objects.owner``): objects stored
    before are the application's (NULL), which user tokens may not change.

    A database created at v14 or later already has it from step 1.
    """
    if "owner" in {c["name"] for c in inspect(conn).get_columns("tidings_objects")}:
        return
    conn.execute(text("ALTER TABLE tidings_objects ADD COLUMN owner VARCHAR(255)"))


def _v15_handle_skeletons(conn: Connection) -> None:
    """Handle keys become confusable skeletons (``alice`` spelt with a Cyrillic a is
    ``alice``): every stored key is recomputed (a key is the old key's
    skeleton, so the handles themselves are not needed).

    Two keys that become one keep one holder: a handle held now before one
    given up, then the user created first (their handle is the older name
    people know). The other user keeps their handle as it is shown; it no
    longer finds them by handle, and a rename gives them a key of their own.
    Each such pair is logged.
    """
    h, u = schema.handles.c, schema.users.c
    rows = conn.execute(
        select(h.hkey, h.user_id, h.released_ms, u.created_us).select_from(
            schema.handles.outerjoin(schema.users, u.id == h.user_id)
        )
    ).all()
    claims: dict[str, list[Row[Any, Any, Any, Any]]] = {}
    for row in rows:
        claims.setdefault(skeleton(row.hkey), []).append(row)
    for key, held in sorted(claims.items()):
        if len(held) == 1 and held[0].hkey == key:
            continue
        held.sort(key=lambda r: (r.released_ms is not None, r.created_us or 2**63, r.user_id))
        winner = held[0]
        for lost in held[1:]:
            log.warning(
                "handle key %r (was %r) stays %r's; %r's handle (was %r) no longer resolves to "
                "them until they rename",
                key,
                winner.hkey,
                winner.user_id,
                lost.user_id,
                lost.hkey,
            )
        conn.execute(delete(schema.handles).where(h.hkey.in_([r.hkey for r in held])))
        conn.execute(
            schema.handles.insert().values(
                hkey=key, user_id=winner.user_id, released_ms=winner.released_ms
            )
        )


def _v16_replaced_users(conn: Connection) -> None:
    """When a re-created user id's previous user was deleted (``replaced_us``).

    A database created at v16 or later already has it from step 1.
    """
    if "replaced_us" not in {c["name"] for c in inspect(conn).get_columns("tidings_users")}:
        conn.execute(text("ALTER TABLE tidings_users ADD COLUMN replaced_us BIGINT"))


def _v17_reaction_trash(conn: Connection) -> None:
    """Reactions removed softly (``tidings_reaction_trash``), restorable."""
    schema.metadata.create_all(conn, tables=[schema.reaction_trash])


def _v18_placed(conn: Connection) -> None:
    """Activities placed in feeds, reaching no follower (``tidings_placed``)."""
    schema.metadata.create_all(conn, tables=[schema.placed])


STEPS: list[Callable[[Connection], None]] = [
    _v1_initial,
    _v2_aggregates,
    _v3_outbox_parts,
    _v4_fanout,
    _v5_tiers,
    _v6_outbox_claims,
    _v7_activity_versions,
    _v8_hidden_entries,
    _v9_follow_marks,
    _v10_reactions,
    _v11_users,
    _v12_rules,
    _v13_follows_version,
    _v14_object_owners,
    _v15_handle_skeletons,
    _v16_replaced_users,
    _v17_reaction_trash,
    _v18_placed,
]
LATEST = len(STEPS)


def current_version(conn: Connection) -> int:
    if not conn.dialect.has_table(conn, schema_version.name):
        return 0
    return int(conn.execute(select(schema_version.c.version)).scalar_one_or_none() or 0)


def upgrade(conn: Connection, *, partitions: int = 0) -> int:
    """Bring the schema to the latest version; returns the number of steps applied.

    With ``partitions``, a new PostgreSQL database gets its activities and
    follows partitioned (that many each, see
    :mod:`tidings.canonical.partition_layout`) while they are empty; an
    existing one keeps the layout it has until
    ``tidings migrate --partition`` copies it online (a step here would
    rewrite both tables in one transaction, holding publishes for the whole
    copy).
    """
    _version_meta.create_all(conn)
    version = current_version(conn)
    for step in STEPS[version:]:
        step(conn)
    if version == 0 and partitions and conn.dialect.name == "postgresql":
        partition_empty(conn, partitions)
    if version < LATEST:
        conn.execute(schema_version.delete())
        conn.execute(schema_version.insert().values(version=LATEST))
    return LATEST - version
