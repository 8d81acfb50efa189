"""SQLite's log is checkpointed by a thread of the Database, not by a writer.

The writers' own ``wal_autocheckpoint`` is far above what these tests write,
so the database file grows only if the checkpoint thread copies the log in.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from tidings.canonical.checkpoint import BACKSTOP_PAGES, Checkpointer
from tidings.canonical.db import Database
from tidings.core.errors import ConfigurationError

#: Rows of ~1 KiB: about 500 pages of log, far under the writers' backstop.
ROWS = 2_000


def fill(db: Database) -> None:
    with db.write() as conn:
        conn.execute(text("CREATE TABLE t (a INTEGER PRIMARY KEY, b BLOB)"))
    with db.write() as conn:
        for i in range(ROWS):
            conn.execute(text("INSERT INTO t VALUES (:a, randomblob(1000))"), {"a": i})


def grows_past(path: Path, size: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.stat().st_size >= size:
            return True
        time.sleep(0.02)
    return False


def checkpoint_threads() -> int:
    return sum(t.name == "tidings-checkpoint" for t in threading.enumerate())


def test_writers_leave_checkpoints_to_a_thread(tmp_path: Path) -> None:
    assert ROWS * 1000 < BACKSTOP_PAGES * 4096 // 10
    path = tmp_path / "c.db"
    db = Database(f"sqlite:///{path}")
    try:
        fill(db)
        # Given writes only, the log reaches the database file on its own.
        assert grows_past(path, ROWS * 1000)
    finally:
        db.close()


def test_close_checkpoints_what_was_written_and_ends_the_thread(tmp_path: Path) -> None:
    before = checkpoint_threads()
    path = tmp_path / "c.db"
    db = Database(f"sqlite:///{path}")
    fill(db)
    db.close()
    assert path.stat().st_size >= ROWS * 1000
    assert checkpoint_threads() == before


def test_a_database_that_never_wrote_starts_no_thread(tmp_path: Path) -> None:
    before = checkpoint_threads()
    db = Database(f"sqlite:///{tmp_path / 'c.db'}")
    with db.read() as conn:
        conn.execute(text("SELECT 1"))
    assert checkpoint_threads() == before
    db.close()


def test_a_forked_child_checkpoints_with_a_thread_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    pragmas = ["PRAGMA journal_mode=WAL", "PRAGMA wal_autocheckpoint=0"]
    checkpoints = Checkpointer(str(path), pragmas)
    writer = sqlite3.connect(path, isolation_level=None)
    for pragma in pragmas:
        writer.execute(pragma)
    writer.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b BLOB)")
    checkpoints.wrote()  # the parent's thread runs
    assert grows_past(path, 1)
    writer.close()
    pid = os.fork()
    if pid == 0:  # the child: its own connection, and a write checkpointed
        code = 1
        try:
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("PRAGMA wal_autocheckpoint=0")
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO t VALUES (?, randomblob(1000))", [(i,) for i in range(ROWS)]
            )
            conn.execute("COMMIT")
            checkpoints.wrote()
            code = 0 if grows_past(path, ROWS * 1000) else 2
            checkpoints.close()
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:  # hung (a lock copied held into the child): fail, not hang
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    checkpoints.close()
    assert done[0] == pid, "the child hung"
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_synchronous_is_normal_or_full(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'c.db'}", sqlite_synchronous="full")
    try:
        with db.read() as conn:
            assert conn.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL
    finally:
        db.close()
    with pytest.raises(ConfigurationError, match="must be normal or full, not 'fast'"):
        Database(f"sqlite:///{tmp_path / 'd.db'}", sqlite_synchronous="fast")
