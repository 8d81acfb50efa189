"""Activities and follows partitioned by hash of their source feed on
PostgreSQL: a new database is created so when ``postgres_partitions`` asks
for it; an existing one is partitioned online (``OnlinePartitioning``)
while a writer publishes, follows, updates and removes, and every read is
the same after as before; a run interrupted midway resumes and ends in the
state an uninterrupted one reaches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from tidings import Settings, StoreName, Tidings
from tidings.canonical import migrations, schema
from tidings.canonical.db import Database
from tidings.canonical.partition_layout import LAYOUTS, is_partitioned, partition_count
from tidings.canonical.partitioning import OnlinePartitioning
from tidings.cli.app import app
from tidings.core.errors import ActivityNotFound, ConfigurationError
from tidings.core.limits import MAX_BATCH, MAX_FOLLOW_BATCH

pytestmark = pytest.mark.postgres

USERS = [f"user:u{n}" for n in range(8)]
TIMELINES = [f"timeline:t{n}" for n in range(10)]


def plain_database(url: str) -> None:
    """A database at the latest schema version in today's unpartitioned
    layout, as every database created before partitioning is."""
    db = Database(url)
    with db.write() as conn:
        schema.metadata.create_all(conn)
        migrations.schema_version.create(conn)
        conn.execute(migrations.schema_version.insert().values(version=migrations.LATEST))
    db.close()


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Tidings]:
    plain_database(postgres_url)
    made = Tidings(
        Settings(database_url=postgres_url, timeline_store=StoreName.SQL), task_runner="sync"
    )
    yield made
    made.close()


def fill(engine: Tidings, per_user: int, extra_follows: int) -> None:
    """Each timeline follows two users before they publish (small deliveries);
    ``extra_follows`` more follows after, copying nothing (follows rows)."""
    engine.follow_many(
        [(t, USERS[(n + k) % len(USERS)]) for n, t in enumerate(TIMELINES) for k in (0, 3)],
        copy_limit=0,
    )
    for n, user in enumerate(USERS):
        actor = user.partition(":")[2]
        items = [
            {
                "actor": actor,
                "verb": "post",
                "object": f"note:{n}-{i}",
                **({"foreign_id": f"{actor}-{i}"} if i % 5 == 0 else {}),
            }
            for i in range(per_user)
        ]
        for at in range(0, per_user, MAX_BATCH):
            engine.add_activities(user, items[at : at + MAX_BATCH])
    pairs = [(f"timeline:f{i}", USERS[i % len(USERS)]) for i in range(extra_follows)]
    for at in range(0, extra_follows, MAX_FOLLOW_BATCH):
        engine.follow_many(pairs[at : at + MAX_FOLLOW_BATCH], copy_limit=0)


def walk(read: Callable[..., Any]) -> list[Any]:
    """Every page of a paged read (``read(cursor=…)``), in order."""
    out: list[Any] = []
    cursor = None
    while True:
        page = read(cursor=cursor)
        out += page.results
        cursor = page.next
        if cursor is None:
            return out


def reads(engine: Tidings) -> dict[str, Any]:
    """What readers see of the data filled in: pages of every feed, follower
    and following lists, counts, activities by foreign id and by id."""
    seen: dict[str, Any] = {}
    for feed in USERS + TIMELINES:
        items = walk(partial(engine.read, feed, 100))
        seen[f"page {feed}"] = [a.to_dict() for a in items]
        seen[f"counts {feed}"] = engine.counts(feed)
    for user in USERS:
        seen[f"followers {user}"] = walk(partial(engine.followers, user, limit=50))
        actor = user.partition(":")[2]
        seen[f"fid {user}"] = engine.get_activity((user, f"{actor}-5")).to_dict()
        first = seen[f"page {user}"][-1]["id"]
        seen[f"id {user}"] = engine.get_activity(first).to_dict()
    seen["following"] = walk(partial(engine.following, "timeline:t3", limit=1))
    return seen


class Writer(threading.Thread):
    """Publishes, follows, updates and removes until stopped, noting what
    was acknowledged; ``done`` counts its operations."""

    def __init__(self, engine: Tidings, doomed: list[str]) -> None:
        super().__init__(daemon=True)
        self.engine = engine
        #: Activities filled in before the migration, updated or removed
        #: during it (the copy may not have reached them yet).
        self.doomed = doomed
        self.stop = threading.Event()
        self.moved = threading.Condition()
        self.done = 0
        self.published: list[str] = []
        self.removed: set[str] = set()
        self.updated: dict[str, int] = {}
        self.followers: set[str] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.step(self.done)
                with self.moved:
                    self.done += 1
                    self.moved.notify_all()
        except BaseException as exc:
            self.error = exc
            with self.moved:
                self.moved.notify_all()

    def step(self, i: int) -> None:
        stored = self.engine.add_activity(
            "user:w", {"actor": "w", "verb": "post", "object": f"n:{i}", "foreign_id": f"w{i}"}
        )
        self.published.append(stored.id)
        if i % 3 == 0:
            self.engine.follow(f"timeline:w{i}", "user:w", copy_limit=0)
            self.followers.add(f"timeline:w{i}")
        if i % 4 == 3:
            self._update(self.published[i // 2])
        if i % 5 == 4:
            self._remove("user:w", self.published[i // 3])
        if self.doomed:
            target = self.doomed.pop()
            if i % 2:
                self._update(target)
            else:
                self._remove("user:gone", target)

    def _update(self, aid: str) -> None:
        if aid not in self.removed:
            self.engine.update_activity(aid, set={"n": self.done})
            self.updated[aid] = self.done

    def _remove(self, feed: str, aid: str) -> None:
        if aid not in self.removed:
            self.engine.remove_activity(feed, aid)
            self.removed.add(aid)

    def wait_for(self, count: int) -> None:
        """Until ``count`` operations are done (or the writer failed)."""
        with self.moved:
            if not self.moved.wait_for(lambda: self.done >= count or self.error, timeout=30):
                raise AssertionError("the writer stopped moving")
        if self.error is not None:
            raise self.error


def leftovers(db: Database) -> list[str]:
    """What a finished migration must not leave: its tables and triggers."""
    with db.read() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT relname FROM pg_class WHERE relname IN ('tidings_partitioning', "
                    "'tidings_activities_partitioned', 'tidings_follows_partitioned', "
                    "'tidings_activities_unpartitioned', 'tidings_follows_unpartitioned') "
                    "UNION ALL SELECT tgname FROM pg_trigger WHERE tgname LIKE 'tidings_%' "
                    "UNION ALL SELECT proname FROM pg_proc WHERE proname LIKE 'tidings_%'"
                )
            ).scalars()
        )


def layout_of(db: Database) -> dict[str, int]:
    with db.read() as conn:
        return {
            layout.table: partition_count(conn, layout.table)
            for layout in LAYOUTS
            if is_partitioned(conn, layout.table)
        }


def test_a_new_postgres_database_has_plain_tables_unless_partitions_are_asked(
    postgres_url: str,
) -> None:
    # (Lookups of activities by id alone probe every partition: opt-in.)
    db = Database(postgres_url)
    db.migrate()
    assert layout_of(db) == {}
    db.close()


def test_a_new_postgres_database_is_created_partitioned_when_asked(postgres_url: str) -> None:
    db = Database(postgres_url, postgres_partitions=4)
    db.migrate()
    assert layout_of(db) == {"tidings_activities": 4, "tidings_follows": 4}
    with db.read() as conn:
        keys = conn.execute(
            text(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conname = 'tidings_activities_pkey'"
            )
        ).scalar_one()
    assert keys == "PRIMARY KEY (feed, id)"
    assert leftovers(db) == []
    # Already partitioned: a run changes nothing.
    report = OnlinePartitioning(db, partitions=4).run()
    assert [t.already for t in report.tables] == [True, True]
    db.close()


def test_partitioning_online_loses_nothing_and_every_read_stays_the_same(
    engine: Tidings,
) -> None:
    # Given a plain database with activities and follows, and a feed whose
    # activities a writer updates or removes while the copy runs.
    fill(engine, per_user=250, extra_follows=1500)
    doomed = [
        engine.add_activity("user:gone", {"actor": "g", "verb": "post", "object": f"o:{i}"}).id
        for i in range(60)
    ]
    before = reads(engine)
    writer = Writer(engine, list(doomed))
    batches = 0

    def between_batches(_table: str, _rows: int, _total: int) -> None:
        # At least one write lands between every two batches.
        nonlocal batches
        batches += 1
        writer.wait_for(batches)

    # When the database is partitioned while the writer runs.
    db = engine.canonical.db
    writer.start()
    try:
        report = OnlinePartitioning(
            db, partitions=4, batch_rows=200, progress=between_batches
        ).run()
    finally:
        writer.stop.set()
        writer.join()
    if writer.error is not None:
        raise writer.error

    # Then both tables are partitioned, nothing of the migration is left...
    assert layout_of(db) == {"tidings_activities": 4, "tidings_follows": 4}
    assert leftovers(db) == []
    assert [t.rows > 0 for t in report.tables] == [True, True]
    assert writer.done > batches > 10
    # ...every read of the data from before is the same...
    assert reads(engine) == before
    # ...every acknowledged write is there, and nothing removed came back.
    kept = [a for a in writer.published if a not in writer.removed]
    shown = [a.id for a in walk(partial(engine.read, "user:w", 100))]
    assert shown == sorted(kept, reverse=True)
    for aid in writer.removed:
        with pytest.raises(ActivityNotFound):
            engine.get_activity(aid)
    for aid, n in writer.updated.items():
        if aid not in writer.removed:
            assert engine.get_activity(aid).extra == {"n": n}
    followers = walk(partial(engine.followers, "user:w", limit=100))
    assert {f.follower for f in followers} == writer.followers
    gone = {a.id for a in walk(partial(engine.read, "user:gone", 100))}
    assert gone == set(doomed) - writer.removed
    # The canonical history (what a rebuild reads) gives the same pages too.
    list(engine.admin.rebuild(USERS + TIMELINES))
    assert reads(engine) == before


class Interrupted(Exception):
    pass


def rows_of(db: Database, table: str, order: str) -> list[tuple[Any, ...]]:
    with db.read() as conn:
        return [
            tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
            for row in conn.execute(text(f"SELECT * FROM {table} ORDER BY {order}"))
        ]


def test_an_interrupted_run_resumes_and_ends_as_an_uninterrupted_one(engine: Tidings) -> None:
    fill(engine, per_user=40, extra_follows=300)
    db = engine.canonical.db
    calls = 0

    def die_midway(_table: str, _rows: int, _total: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Interrupted

    # Given a run killed after its third batch of activities...
    with pytest.raises(Interrupted):
        OnlinePartitioning(db, partitions=3, batch_rows=50, progress=die_midway).run()
    assert layout_of(db) == {}
    # ...and writes made while no migration runs: the trigger stayed.
    # (Ids sort by time: user:u0 published first, user:u7 last.)
    early = walk(partial(engine.read, "user:u0", 100))
    engine.remove_activity("user:u0", early[-1].id)  # copied before the kill
    late = walk(partial(engine.read, "user:u7", 100))
    engine.remove_activity("user:u7", late[0].id)  # not copied yet
    engine.update_activity(early[-2].id, set={"late": True})
    engine.add_activity("user:u1", {"actor": "u1", "verb": "post", "object": "late"})
    engine.follow("timeline:late", "user:u2", copy_limit=0)
    expected = {
        "tidings_activities": rows_of(db, "tidings_activities", "feed, id"),
        "tidings_follows": rows_of(db, "tidings_follows", "follower, source"),
    }
    with pytest.raises(ConfigurationError, match="begun with 3 partitions"):
        OnlinePartitioning(db, partitions=5).run()

    # When it is run again (keeping the plain tables), then again.
    OnlinePartitioning(db, partitions=3, batch_rows=50, keep_old=True).run()
    assert layout_of(db) == {"tidings_activities": 3, "tidings_follows": 3}
    assert rows_of(db, "tidings_activities", "feed, id") == expected["tidings_activities"]
    assert rows_of(db, "tidings_follows", "follower, source") == expected["tidings_follows"]
    assert (
        rows_of(db, "tidings_activities_unpartitioned", "feed, id")
        == (expected["tidings_activities"])
    )
    report = OnlinePartitioning(db, partitions=3).run()

    # Then it finished, and the run after it only dropped the kept tables.
    assert [t.already for t in report.tables] == [True, True]
    assert leftovers(db) == []
    assert rows_of(db, "tidings_activities", "feed, id") == expected["tidings_activities"]


def test_tidings_migrate_partition_reports_what_it_did(postgres_url: str) -> None:
    plain_database(postgres_url)
    args = ["--database-url", postgres_url, "migrate", "--partition", "--partitions", "2"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "tidings_activities: 0 row(s) copied into 2 partitions" in first.stdout
    assert "longest lock held" in first.stdout
    again = CliRunner().invoke(app, args)
    assert "tidings_follows: already partitioned" in again.stdout
