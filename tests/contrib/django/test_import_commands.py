"""``manage.py tidings_import`` on a database filled through
django-activity-stream's and django-notifications-hq's own APIs (10,100
actions, 1,000 follows, 5,000 notifications): the streams those packages show
are the streams tidings shows, a second run adds nothing, and runs killed
midway and run again end as an uninterrupted one. (On SQLite; on PostgreSQL,
test_importers runs the importers over the ORM.)

The database is filled once for the whole run (xdist workers share it: the
importers only read it) and imported once, uninterrupted, for the tests that
compare with that import.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from legacy import (
    HERE,
    ON_POSTGRES,
    copy_sqlite,
    end_state,
    engine,
    manage,
    project_env,
    shared,
    sqlite_url,
)

from tidings.core.clock import utc_now
from tidings.core.limits import LEASE_MS

pytestmark = [
    # Filling and importing take a while on two cores.
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        ON_POSTGRES,
        reason="whole imports are compared on SQLite; test_importers runs the importers "
        "on PostgreSQL",
    ),
]

SIZES = {"users": 200, "topics": 40, "follows": 1000, "actions": 10_000, "notifications": 5000}
#: Rows a batch of the killed runs; every EVERY-th user and topic compared.
BATCH, EVERY = 500, 10
BOTH = ("tidings_import", "actstream", "notifications")
_SUMMARY = re.compile(
    r"^(?P<table>\S+): read (?P<read>[\d,]+), written (?P<written>[\d,]+), "
    r"already present (?P<present>[\d,]+), skipped (?P<skipped>[\d,]+)",
    re.M,
)


def summary(output: str) -> dict[str, dict[str, int]]:
    """The summary lines of a ``tidings_import``, by table."""
    return {
        m["table"]: {
            k: int(m[k].replace(",", "")) for k in ("read", "written", "present", "skipped")
        }
        for m in _SUMMARY.finditer(output)
    }


@pytest.fixture(scope="session")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of the filled database."""
    fill = [f"--{name}={n}" for name, n in SIZES.items()]
    with shared(tmp_path_factory, "djproject-legacy") as (path, made):
        url = sqlite_url(path / "legacy.db")
        if not made:
            manage("migrate", "-v0", database=url, tidings="sqlite://")
            manage("djproject_fill", *fill, database=url, tidings="sqlite://")
    return url


@pytest.fixture(scope="session")
def imported(legacy: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A tidings database that both imports wrote, uninterrupted, and what they said."""
    with shared(tmp_path_factory, "djproject-imported") as (path, made):
        db = path / "tidings.db"
        if not made:
            said = manage(*BOTH, database=legacy, tidings=sqlite_url(db)).stdout
            (path / "said.txt").write_text(said)
    return db, (path / "said.txt").read_text()


@pytest.fixture(scope="session")
def uninterrupted(imported: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """:func:`end_state` of the uninterrupted import (read on a copy: reads are recorded)."""
    copy = copy_sqlite(imported[0], tmp_path_factory.mktemp("state") / "tidings.db")
    return end_state(sqlite_url(copy))


def test_the_streams_actstream_shows_are_the_streams_tidings_shows(
    legacy: str, imported: tuple[Path, str], tmp_path: Path
) -> None:
    said = summary(imported[1])
    actions, follows = said["actstream.action"], said["actstream.follow"]
    assert actions["read"] == actions["written"] > SIZES["actions"]  # + "started following"
    assert follows["read"] == follows["written"] == SIZES["follows"]
    notes = said["notifications.notification"]
    assert notes["read"] == SIZES["notifications"]
    assert notes["written"] == notes["read"] - notes["skipped"]
    assert "deleted (soft delete)" in imported[1]
    assert actions["present"] == follows["present"] == notes["present"] == 0

    tidings = sqlite_url(copy_sqlite(imported[0], tmp_path / "tidings.db"))
    streams = json.loads(
        manage("djproject_streams", f"--every={EVERY}", database=legacy, tidings=tidings).stdout
    )
    for kind in ("user_stream", "actor_stream", "target_stream", "action_object_stream"):
        assert streams[kind]
        for name, both in streams[kind].items():
            # Item by item, newest first: every action actstream shows, no other.
            assert both["tidings"] == both["actstream"], f"{kind} of {name}"
            if both["first"]:
                assert both["first"]["ours"] == both["first"]["theirs"], f"{kind} of {name}"
    lengths = sorted(len(s["actstream"]) for s in streams["user_stream"].values())
    assert lengths[len(lengths) // 2] > 50
    for user, seen in streams["notifications"].items():
        unread = dict(seen["notifications"])
        members = [pk for *_, pks in seen["aggregates"] for pk in pks]
        assert sorted(members) == sorted(unread), f"user {user}"
        for is_read, is_seen, count, pks in seen["aggregates"]:
            assert count == len(pks)
            assert is_read == is_seen == (not any(unread[pk] for pk in pks)), f"user {user}"


def test_a_second_run_adds_nothing(
    legacy: str, imported: tuple[Path, str], uninterrupted: Any, tmp_path: Path
) -> None:
    tidings = sqlite_url(copy_sqlite(imported[0], tmp_path / "tidings.db"))
    again = summary(manage(*BOTH, database=legacy, tidings=tidings).stdout)
    assert len(again) == 3
    for table, tally in again.items():
        assert tally["written"] == 0, table
        assert tally["present"] == tally["read"] - tally["skipped"], table
    assert end_state(tidings) == uninterrupted


def test_killed_runs_then_a_rerun_end_as_an_uninterrupted_run(
    legacy: str, uninterrupted: Any, tmp_path: Path
) -> None:
    tidings = sqlite_url(tmp_path / "tidings.db")
    # Killed while importing actions, then (run again) while importing follows,
    # copying their history, then while importing notifications.
    for table, batches in [("actstream.action", 2), ("actstream.follow", 1), ("notifications", 2)]:
        _killed(legacy, tidings, table, batches)
    said = summary(manage(*BOTH, "--no-wait", database=legacy, tidings=tidings).stdout)
    # The killed runs had written the actions and follows, and part of the notifications.
    for table in ("actstream.action", "actstream.follow"):
        assert said[table]["written"] == 0
        assert said[table]["present"] == said[table]["read"]
    notes = said["notifications.notification"]
    assert 0 < notes["present"] < notes["read"] - notes["skipped"]
    # Deliveries a killed run had claimed wait for its claim to lapse (the
    # command waits for that without --no-wait): with the clock moved past
    # it, they are made.
    later = utc_now() + timedelta(milliseconds=LEASE_MS + 1000)
    with engine(tidings, clock=lambda: later) as feeds:
        feeds.admin.drain()
        assert feeds.admin.pending() == 0
    assert end_state(tidings) == uninterrupted


def _killed(legacy: str, tidings: str, table: str, batches: int) -> None:
    """Start both imports and SIGKILL them once they have reported ``batches``
    batches of ``table`` done."""
    argv = [sys.executable, str(HERE / "manage.py"), *BOTH, "-v2", f"--batch-size={BATCH}"]
    proc = subprocess.Popen(
        argv,
        env=project_env(legacy, tidings),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # (read with the reports: a pipe left unread fills up)
        text=True,
    )
    seen = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen += line.startswith(table)
            if seen == batches:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the import ended before {batches} of {table}"
