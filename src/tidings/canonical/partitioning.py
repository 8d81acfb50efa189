"""Partitioning an existing PostgreSQL database online
(``tidings migrate --partition``), while publishes and follows go on.

For each table of :data:`tidings.canonical.partition_layout.LAYOUTS`:

1. **Build**: the partitioned table is created beside the plain one, empty.
2. **Mirror**: a trigger on the plain table repeats every insert, update and
   delete into it, in the writer's own transaction. Creating the trigger
   waits for the writes in flight (its lock, SHARE ROW EXCLUSIVE, waits for
   theirs), so every write is either committed before it (and copied) or
   mirrored after it: there is no window in which a write is in neither.
3. **Copy**: the rows are copied in keyset order of the plain table's
   primary key, up to the highest key present once the trigger is in place
   (every row above it was written since, and mirrored: the copy does not
   chase publishes, whose ids grow), ``batch_rows`` a transaction
   (``ON CONFLICT DO NOTHING``: a row the trigger mirrored first stays as
   the trigger wrote it, which is as new or newer). The rows a batch reads are held ``FOR KEY SHARE``
   until its commit, so a delete cannot slip between the read and the
   insert and leave a deleted row behind; updates are not held up (the
   trigger's upsert overwrites the copied row). Each batch records where it
   ended in ``tidings_partitioning`` in its own transaction: a run killed
   at any point resumes after the last batch committed, and the trigger,
   which stays while the process is gone, mirrors what was written meanwhile.
4. **Swap**: one short transaction locks the plain table (ACCESS EXCLUSIVE,
   waiting at most ``lock_timeout_ms`` a try, so a long transaction makes
   the migration retry rather than queue every publish behind it), drops
   the trigger and renames the partitioned table into place. Statements
   waiting for the table meanwhile resolve its name again and find the new
   one; prepared ones are planned again (same columns, same types).
5. The plain table, renamed ``<table>_unpartitioned``, is dropped (kept
   with ``keep_old``).

Running it again after it finished changes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from tidings.canonical.db import Database
from tidings.canonical.partition_layout import (
    LAYOUTS,
    Layout,
    check_partitions,
    create_building,
    is_partitioned,
    partition_count,
    swap_in,
)
from tidings.core.errors import ConfigurationError
from tidings.core.limits import DEFAULT_PARTITIONS

#: Where each table's copy has got to: the last primary key copied (a JSON
#: array) and the rows read so far. Dropped when every table is done.
_PROGRESS = (
    "CREATE TABLE IF NOT EXISTS tidings_partitioning (tbl VARCHAR(64) PRIMARY KEY, "
    "last_key TEXT NOT NULL, copied BIGINT NOT NULL)"
)
_SAVE_PROGRESS = (
    "INSERT INTO tidings_partitioning (tbl, last_key, copied) VALUES (%s, %s, %s) "
    "ON CONFLICT (tbl) DO UPDATE SET last_key = excluded.last_key, copied = excluded.copied"
)
#: The SQLSTATE of a lock not granted within lock_timeout.
_LOCK_NOT_AVAILABLE = "55P03"
#: Tries at a lock before giving up: with 500 ms a try and the pauses
#: between them, about two minutes of a transaction that will not end.
_LOCK_TRIES = 120

#: Called after each batch with the table, the rows read so far and the
#: table's estimated size.
Progress = Callable[[str, int, int], None]


@dataclass(slots=True)
class TableCopy:
    """What the migration did to one table."""

    table: str
    #: Rows the copy read from the plain table (the rows the trigger
    #: mirrored first among them).
    rows: int = 0
    seconds: float = 0.0
    #: Already partitioned when the run started: nothing done.
    already: bool = False


@dataclass(slots=True)
class PartitionReport:
    partitions: int
    tables: list[TableCopy] = field(default_factory=list)
    #: The longest a lock that holds writers up was held (the trigger's
    #: creation, the swap), waiting for it included.
    longest_lock_s: float = 0.0
    #: The longest batch transaction (its rows held from deletes).
    longest_batch_s: float = 0.0


class OnlinePartitioning:
    """Partition ``db``'s activities and follows without stopping writers."""

    def __init__(
        self,
        db: Database,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        batch_rows: int = 5000,
        keep_old: bool = False,
        lock_timeout_ms: int = 500,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if db.dialect != "postgresql":
            raise ConfigurationError(
                "partitioning is for PostgreSQL databases; SQLite keeps one table each"
            )
        if not 1 <= batch_rows <= 1_000_000:
            raise ConfigurationError(f"batch_rows must be from 1 to 1000000, not {batch_rows}")
        try:
            self.partitions = check_partitions(partitions)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self.db = db
        self.batch_rows = batch_rows
        self.keep_old = keep_old
        self.lock_timeout_ms = lock_timeout_ms
        self.progress = progress
        self.clock = clock
        self.report = PartitionReport(partitions)

    def run(self) -> PartitionReport:
        """Partition every table not yet partitioned; returns what was done."""
        with self.db.write() as conn:
            conn.execute(text(_PROGRESS))
        for layout in LAYOUTS:
            self.report.tables.append(self._table(layout))
        with self.db.write() as conn:
            conn.execute(text("DROP TABLE IF EXISTS tidings_partitioning"))
        return self.report

    def _table(self, layout: Layout) -> TableCopy:
        done = TableCopy(layout.table)
        with self.db.write() as conn:
            already = is_partitioned(conn, layout.table)
        if already:
            done.already = True
        else:
            started = self.clock()
            self._prepare(layout)
            done.rows = self._copy(layout)
            with self.db.write() as conn:
                # Planner statistics before the first query reaches it.
                conn.execute(text(f"ANALYZE {layout.building}"))
            self._locked(layout.table, "ACCESS EXCLUSIVE", lambda c: _swap(c, layout))
            done.seconds = self.clock() - started
        if not self.keep_old:
            with self.db.write() as conn:
                conn.execute(text(f"DROP TABLE IF EXISTS {layout.retired}"))
        return done

    def _prepare(self, layout: Layout) -> None:
        """The partitioned table (or the one an earlier run began) and the trigger."""
        with self.db.write() as conn:
            have = partition_count(conn, layout.building)
            if have and have != self.partitions:
                raise ConfigurationError(
                    f"{layout.building} was begun with {have} partitions; run again with "
                    f"--partitions {have} to finish it"
                )
            create_building(conn, layout, self.partitions)
            conn.execute(text(_mirror_function(conn, layout)))
        trigger = (
            f"CREATE OR REPLACE TRIGGER {_mirror(layout)} AFTER INSERT OR UPDATE OR DELETE "
            f"ON {layout.table} FOR EACH ROW EXECUTE FUNCTION {_mirror(layout)}()"
        )
        self._locked(layout.table, "SHARE ROW EXCLUSIVE", lambda c: c.execute(text(trigger)))

    def _copy(self, layout: Layout) -> int:
        """Copy every row in batches from where an earlier run stopped, up to
        the highest key there is now (every row above it was written with
        the trigger in place, and mirrored); the rows read."""
        keys = ", ".join(layout.old_key)
        newest = ", ".join(f"{k} DESC" for k in layout.old_key)
        with self.db.read() as conn:
            saved = conn.execute(
                text("SELECT last_key, copied FROM tidings_partitioning WHERE tbl = :t"),
                {"t": layout.table},
            ).one_or_none()
            estimate = conn.execute(
                text("SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = to_regclass(:t)"),
                {"t": layout.table},
            ).scalar_one()
            highest = self.db.fetch_raw(
                conn,
                f"SELECT json_build_array({keys}) FROM {layout.table} ORDER BY {newest} LIMIT 1",
                (),
            )
        if not highest:
            return 0
        bound: list[str] = highest[0][0]
        last: list[str] | None = None if saved is None else json.loads(saved.last_key)
        rows = 0 if saved is None else int(saved.copied)
        while True:
            started = self.clock()
            with self.db.write() as conn:
                read, end = self._batch(conn, layout, last, bound)
                if read:
                    rows += read
                    params = (layout.table, json.dumps(end), rows)
                    self.db.run_raw(conn, _SAVE_PROGRESS, params)
            self.report.longest_batch_s = max(self.report.longest_batch_s, self.clock() - started)
            if self.progress is not None:
                self.progress(layout.table, rows, int(estimate))
            if read:
                last = end
            elif not self._rows_within(layout, last, bound):
                return rows
            # (else every row of the batch was deleted under it: read on)

    def _batch(
        self, conn: Connection, layout: Layout, last: list[str] | None, bound: list[str]
    ) -> tuple[int, list[str]]:
        """One batch after ``last`` up to ``bound``: the rows read and the last
        key read."""
        keys = ", ".join(layout.old_key)
        where, params = _span(layout, last, bound)
        newest = ", ".join(f"{k} DESC" for k in layout.old_key)
        sql = (
            f"WITH batch AS (SELECT * FROM {layout.table} {where} ORDER BY {keys} "
            "LIMIT %s FOR KEY SHARE), "
            f"moved AS (INSERT INTO {layout.building} SELECT * FROM batch ON CONFLICT DO NOTHING) "
            f"SELECT (SELECT count(*) FROM batch), (SELECT json_build_array({keys}) "
            f"FROM batch ORDER BY {newest} LIMIT 1)"
        )
        read, end = self.db.fetch_raw(conn, sql, (*params, self.batch_rows))[0]
        return int(read), end

    def _rows_within(self, layout: Layout, last: list[str] | None, bound: list[str]) -> bool:
        where, params = _span(layout, last, bound)
        with self.db.read() as conn:
            sql = f"SELECT 1 FROM {layout.table} {where} LIMIT 1"
            return bool(self.db.fetch_raw(conn, sql, params))

    def _locked(self, table: str, mode: str, then: Callable[[Connection], object]) -> None:
        """``then`` in a transaction holding ``table`` in ``mode``: each try
        waits for the lock at most ``lock_timeout_ms``, so that writers
        queued behind the request wait no longer than that."""
        pause = 0.05
        for _ in range(_LOCK_TRIES):
            started = self.clock()
            try:
                with self.db.write() as conn:
                    conn.execute(text(f"SET LOCAL lock_timeout = {int(self.lock_timeout_ms)}"))
                    conn.execute(text(f"LOCK TABLE {table} IN {mode} MODE"))
                    then(conn)
            except OperationalError as exc:
                if getattr(exc.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            held = self.clock() - started
            self.report.longest_lock_s = max(self.report.longest_lock_s, held)
            return
        raise ConfigurationError(
            f"could not lock {table} ({mode}) in {_LOCK_TRIES} tries of "
            f"{self.lock_timeout_ms} ms: a long transaction holds it; run again later"
        )


def _span(layout: Layout, last: list[str] | None, bound: list[str]) -> tuple[str, tuple[str, ...]]:
    """The WHERE clause (and its parameters) of the keys after ``last`` (None:
    from the first) up to ``bound`` (inclusive)."""
    keys = ", ".join(layout.old_key)
    marks = ", ".join(["%s"] * len(layout.old_key))
    where = f"WHERE ({keys}) <= ({marks})"
    if last is None:
        return where, tuple(bound)
    return f"{where} AND ({keys}) > ({marks})", (*bound, *last)


def _mirror(layout: Layout) -> str:
    """The name of the trigger and of its function."""
    return f"{layout.table}_mirror"


def _mirror_function(conn: Connection, layout: Layout) -> str:
    """The trigger function repeating each write into the partitioned table.

    An update is a delete of the old row and an upsert of the new one: the
    upsert, not a plain insert, because the copy may have inserted the row
    (uncommitted) in between; it then waits for the copy and overwrites it.
    """
    columns = conn.execute(
        text(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(:t) "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
        ),
        {"t": layout.table},
    ).scalars()
    rest = [c for c in columns if c not in layout.primary]
    match = " AND ".join(f"{c} = OLD.{c}" for c in layout.primary)
    upsert = ", ".join(f"{c} = excluded.{c}" for c in rest)
    return (
        f"CREATE OR REPLACE FUNCTION {_mirror(layout)}() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN "
        f"IF TG_OP <> 'INSERT' THEN DELETE FROM {layout.building} WHERE {match}; END IF; "
        f"IF TG_OP <> 'DELETE' THEN INSERT INTO {layout.building} SELECT NEW.* "
        f"ON CONFLICT ({', '.join(layout.primary)}) DO UPDATE SET {upsert}; END IF; "
        "RETURN NULL; END $$"
    )


def _swap(conn: Connection, layout: Layout) -> None:
    """The swap's transaction, the plain table locked: the trigger goes, the
    partitioned table takes the name."""
    conn.execute(text(f"DROP TRIGGER IF EXISTS {_mirror(layout)} ON {layout.table}"))
    conn.execute(text(f"DROP FUNCTION IF EXISTS {_mirror(layout)}()"))
    swap_in(conn, layout)
    conn.execute(text("DELETE FROM tidings_partitioning WHERE tbl = :t"), {"t": layout.table})
