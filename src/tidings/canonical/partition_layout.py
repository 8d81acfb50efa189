"""The partitioned layout of the tables that grow with their source feed
(PostgreSQL only): its DDL, and the rename that puts it in place.

``tidings_activities`` (by ``feed``, the feed an activity was published to)
and ``tidings_follows`` (by ``source``, the feed followed) are declared
``PARTITION BY HASH`` of that column. PostgreSQL requires every unique key
of a partitioned table to contain the partition key, so:

- activities: the primary key becomes ``(feed, id)`` (ids stay unique: they
  are made unique, and were never checked against other feeds' anyway); the
  old ``(feed, id)`` index is that key now; a plain index on ``id`` serves
  lookups by id alone, which probe every partition's index;
- follows: ``(follower, source)`` already contains ``source``.

A partitioned table is built beside the plain one as ``<table>_partitioned``
(partitions ``<table>_p<n>``, indexes named ``<name>_next``) and
:func:`swap_in` renames it into place in the caller's transaction: the plain
table becomes ``<table>_unpartitioned``. A new database gets the layout from
its first migration (:func:`partition_empty`); an existing one from the
online copy in :mod:`tidings.canonical.partitioning`.

The other tables keyed by a feed are left as they are: the outbox and the
unfollow log are queues, emptied as deliveries finish (and an outbox
history-copy row has no single source); ``tidings_feed_stats`` and
``tidings_fanout`` hold one row per feed, not per activity or follow;
``tidings_addressed`` grows with activities but is keyed by the feed
addressed; the SQL timeline and aggregate store tables
(``tidings_feed_entries``, ``tidings_groups``, …) by the feed that holds
the entries, and a deployment large enough to partition keeps its feeds
in Redis.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text

from tidings.core.limits import MAX_PARTITIONS

BUILDING = "_partitioned"
RETIRED = "_unpartitioned"
_NEXT = "_next"


@dataclass(frozen=True, slots=True)
class Layout:
    """One partitioned table: its partition key, its primary key (the old
    table's primary key is the copy's keyset order, ``old_key``), its other
    unique keys and its indexes, each ``(name, columns)``."""

    table: str
    key: str
    primary: tuple[str, ...]
    old_key: tuple[str, ...]
    unique: tuple[tuple[str, tuple[str, ...]], ...]
    indexes: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def building(self) -> str:
        return self.table + BUILDING

    @property
    def retired(self) -> str:
        return self.table + RETIRED

    def partition(self, n: int) -> str:
        return f"{self.table}_p{n}"


ACTIVITIES = Layout(
    table="tidings_activities",
    key="feed",
    primary=("feed", "id"),
    old_key=("id",),
    unique=(("tidings_activities_feed_foreign_id", ("feed", "foreign_id")),),
    indexes=(("tidings_activities_id", ("id",)),),
)
FOLLOWS = Layout(
    table="tidings_follows",
    key="source",
    primary=("follower", "source"),
    old_key=("follower", "source"),
    unique=(),
    indexes=(
        (
            "tidings_follows_source_tier_since",
            ("source", "follower", "tier", "tier_ms", "since_row"),
        ),
    ),
)
LAYOUTS = (ACTIVITIES, FOLLOWS)


def check_partitions(partitions: int) -> int:
    """``partitions`` if it is a partition count this code accepts."""
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be from 1 to {MAX_PARTITIONS}, not {partitions}")
    return partitions


def is_partitioned(conn: Connection, table: str) -> bool:
    """Whether ``table`` exists and is a partitioned table."""
    kind = conn.execute(
        text("SELECT relkind FROM pg_class WHERE oid = to_regclass(:t)"), {"t": table}
    ).scalar_one_or_none()
    return bool(kind == "p")


def partition_count(conn: Connection, table: str) -> int:
    """How many partitions ``table`` has (0: not a partitioned table)."""
    n: int = conn.execute(
        text("SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass(:t)"), {"t": table}
    ).scalar_one()
    return n


def create_building(conn: Connection, layout: Layout, partitions: int) -> None:
    """The partitioned table beside ``layout.table``, with its partitions and
    keys; what already exists of it (an earlier run) is kept."""
    columns = ", ".join(layout.primary)
    conn.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {layout.building} (LIKE {layout.table} INCLUDING "
            f"DEFAULTS, CONSTRAINT {layout.table}_pkey{_NEXT} PRIMARY KEY ({columns})) "
            f"PARTITION BY HASH ({layout.key})"
        )
    )
    for n in range(partitions):
        conn.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS {layout.partition(n)} PARTITION OF "
                f"{layout.building} FOR VALUES WITH (MODULUS {partitions}, REMAINDER {n})"
            )
        )
    for name, cols in layout.unique:
        conn.execute(
            text(
                f"CREATE UNIQUE INDEX IF NOT EXISTS {name}{_NEXT} ON {layout.building} "
                f"({', '.join(cols)})"
            )
        )
    for name, cols in layout.indexes:
        conn.execute(
            text(
                f"CREATE INDEX IF NOT EXISTS {name}{_NEXT} ON {layout.building} ({', '.join(cols)})"
            )
        )


def swap_in(conn: Connection, layout: Layout) -> None:
    """Rename the plain table (and its indexes) out of the way and the
    partitioned one (and its indexes) into place, in the caller's
    transaction; the plain one is left as ``layout.retired``."""
    old_indexes = conn.execute(
        text(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass(:t)"
        ),
        {"t": layout.table},
    ).scalars()
    for name in list(old_indexes):
        # A constraint's index renames its constraint with it.
        conn.execute(text(f"ALTER INDEX {name} RENAME TO {name[: 63 - len(RETIRED)]}{RETIRED}"))
    conn.execute(text(f"ALTER TABLE {layout.table} RENAME TO {layout.retired}"))
    conn.execute(text(f"ALTER TABLE {layout.building} RENAME TO {layout.table}"))
    names = [f"{layout.table}_pkey"] + [n for n, _ in (*layout.unique, *layout.indexes)]
    for name in names:
        conn.execute(text(f"ALTER INDEX {name}{_NEXT} RENAME TO {name}"))


def partition_empty(conn: Connection, partitions: int) -> None:
    """A new database's tables in the partitioned layout (they hold no rows
    yet: the whole change is a few statements in the migration's
    transaction)."""
    for layout in LAYOUTS:
        if is_partitioned(conn, layout.table):
            continue
        create_building(conn, layout, check_partitions(partitions))
        swap_in(conn, layout)
        conn.execute(text(f"DROP TABLE {layout.retired}"))
