"""The importers' tests' world: a database that django-activity-stream's and
django-notifications-hq's own APIs filled (``manage.py djproject_fill``), the
test project's ``manage.py`` run against it, and tidings' end state read
whole."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tidings import Settings, Tidings
from tidings.contrib.django.actstream import ACTSTREAM_GROUPS

HERE = Path(__file__).resolve().parent
#: The test project's feed groups (djproject/settings.py), for engines opened here.
GROUPS: dict[str, Any] = {**ACTSTREAM_GROUPS, "djproject_topic": {}}

#: Django's database for the Django tests; set, it is PostgreSQL (test_on_postgres).
ON_POSTGRES = "DJPROJECT_DATABASE_URL" in os.environ


def manage(
    *args: str, database: str, tidings: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``manage.py *args`` of the test project on Django's ``database`` and
    tidings' ``tidings`` (URLs), run to its end."""
    done = subprocess.run(
        [sys.executable, str(HERE / "manage.py"), *args],
        env=project_env(database, tidings),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if check:
        assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def project_env(database: str, tidings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "djproject.settings",
        "DJPROJECT_DATABASE_URL": database,
        "DJPROJECT_TIDINGS_URL": tidings,
        "PYTHONUNBUFFERED": "1",
    }


@contextmanager
def shared(factory: pytest.TempPathFactory, name: str) -> Iterator[tuple[Path, bool]]:
    """A directory ``name`` shared by this run's test processes (xdist workers
    share the parent of their temporary directories), held under a lock:
    yields it and whether it was made already (by another process)."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = root / name
        made = (path / ".made").exists()
        path.mkdir(exist_ok=True)
        yield path, made
        (path / ".made").touch()


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def copy_sqlite(source: Path, target: Path) -> Path:
    """A copy of the SQLite database ``source`` (through SQLite: consistent
    whatever its journal holds)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return target


def engine(url: str, **kwargs: Any) -> Tidings:
    """An engine on the tidings database ``url`` with the project's feed groups."""
    return Tidings(Settings(database_url=url, groups=GROUPS), task_runner="manual", **kwargs)


def end_state(url: str) -> dict[str, list[Any]]:
    """Everything every feed of the tidings database ``url`` shows, by feed:
    activities by what they say (their ids are minted by each run), aggregates
    with their state; each feed's items sorted, as copies of an action that
    share its millisecond come in the order of their random ids."""
    out: dict[str, list[Any]] = {}
    with engine(url) as feeds:
        for feed in feeds.admin.known_feeds():
            if feeds.feed_groups[feed.partition(":")[0]].aggregated:
                out[feed] = sorted(_aggregates(feeds, feed))
            else:
                out[feed] = sorted(_activities(feeds, feed))
    return out


def _pages(read: Callable[[str | None], Any]) -> Iterator[Any]:
    cursor = None
    while True:
        page = read(cursor)
        yield from page.results
        if page.next is None:
            return
        cursor = page.next


def _described(a: Any) -> tuple[Any, ...]:
    extra = sorted(a.extra.items(), key=repr)
    return (a.time.isoformat(), a.foreign_id, a.actor, a.verb, a.object, a.target, repr(extra))


def _activities(feeds: Tidings, feed: str) -> Iterator[tuple[Any, ...]]:
    for a in _pages(lambda cursor: feeds.read(feed, limit=100, cursor=cursor)):
        yield _described(a)


def _aggregates(feeds: Tidings, feed: str) -> Iterator[tuple[Any, ...]]:
    for g in _pages(lambda cursor: feeds.read_aggregates(feed, limit=100, cursor=cursor)):
        members = sorted(_described(a) for a in g.activities)
        yield (g.key, g.is_seen, g.is_read, g.activity_count, repr(members))
