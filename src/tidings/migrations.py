"""Versioned schema migrations.

Each step is a function of a connection inside the migration's transaction;
``tidings_schema`` records the version reached. Steps are append-only: a
released step is never edited, a change is a new step.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Column, Connection, Integer, MetaData, Table, inspect, select, text

from tidings import schema

_version_meta = MetaData()
schema_version = Table("tidings_schema", _version_meta, Column("version", Integer, nullable=False))


def _v1_initial(conn: Connection) -> None:
    schema.metadata.create_all(conn)


def _v2_groups(conn: Connection) -> None:
    """Grouped feeds: the SQL group store's tables, and the outbox keeps each
    activity's JSON (a retraction must find the group after the row is gone).

    A database created at v2 or later already has both from step 1.
    """
    columns = {c["name"] for c in inspect(conn).get_columns(schema.outbox.name)}
    if "doc" not in columns:
        blob = "BYTEA" if conn.dialect.name == "postgresql" else "BLOB"
        conn.execute(text(f"ALTER TABLE {schema.outbox.name} ADD COLUMN doc {blob}"))
    schema.metadata.create_all(conn, tables=[schema.feed_groups, schema.group_members])


STEPS: list[Callable[[Connection], None]] = [_v1_initial, _v2_groups]
LATEST = len(STEPS)


def current_version(conn: Connection) -> int:
    if not conn.dialect.has_table(conn, schema_version.name):
        return 0
    return int(conn.execute(select(schema_version.c.version)).scalar_one_or_none() or 0)


def upgrade(conn: Connection) -> int:
    """Bring the schema to the latest version; returns the number of steps applied."""
    _version_meta.create_all(conn)
    version = current_version(conn)
    for step in STEPS[version:]:
        step(conn)
    if version < LATEST:
        conn.execute(schema_version.delete())
        conn.execute(schema_version.insert().values(version=LATEST))
    return LATEST - version
