"""The online partitioning of a large PostgreSQL database (``--only partition``):
1M activities and 5M follows in today's unpartitioned layout, partitioned by
:class:`tidings.canonical.partitioning.OnlinePartitioning` while a publisher
publishes (and follows) without pause.

The data goes straight into the plain tables with ``generate_series`` in the
shape tidings writes (ids that sort by time, the stored JSON, the counts in
``tidings_feed_stats``), secondary indexes built afterwards; tidings reads
then check it. 50,000 sources publish 20 activities each; 250,000 timelines
follow 20 sources each, from the beginning of their history.

Reported: the fill, the migration's time and rows copied per second, the
longest lock it held (writers wait at most that long) and its longest
batch, the publishes acknowledged during it with their p50/p99 (against a
baseline just before), the reads of a sample of feeds compared before and
after (asserted identical: 0 differences), every acknowledged write found
after (0 lost), and lookups of activities by id alone before and after
(they probe every partition after).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.harness import PostgresServer, Row, at_most, percentile
from tidings import Settings, StoreName, Tidings
from tidings.canonical import migrations, schema
from tidings.canonical.db import Database
from tidings.canonical.partitioning import OnlinePartitioning, PartitionReport
from tidings.core.limits import DEFAULT_PARTITIONS


@dataclass(frozen=True)
class Size:
    sources: int
    per_source: int
    timelines: int
    follows_each: int
    sample: int
    baseline_s: float


FULL = Size(
    sources=50_000, per_source=20, timelines=250_000, follows_each=20, sample=200, baseline_s=5
)
QUICK = Size(sources=500, per_source=20, timelines=2_500, follows_each=20, sample=40, baseline_s=1)

#: The first activity's time (ms): 2026-01-01; each next one a millisecond on.
BASE_MS = 1_767_225_600_000
#: Feeds the publisher writes to: none of the sample's, so their reads stay comparable.
PUBLISHED_FEEDS = 1000


def _fill_activities(size: Size) -> str:
    """Activity n (1..N) of ``user:u<n mod sources>``, with a foreign id
    when n is even, as tidings stores it (``Activity.to_json``)."""
    n = size.sources * size.per_source
    return (
        "INSERT INTO tidings_activities (id, feed, foreign_id, doc, group_keys, accepted_us, "
        "version) SELECT a.id, a.feed, a.fid, convert_to(json_build_object('id', a.id, "
        "'actor', a.actor, 'verb', 'post', 'object', 'note:' || a.n, 'time', "
        "to_char(to_timestamp(a.ms / 1000.0) AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), 'target', NULL, 'foreign_id', a.fid, 'to', "
        "json_build_array(), 'extra', json_build_object())::text, 'UTF8'), "
        "decode('7b7d', 'hex'), a.ms * 1000, 1 FROM (SELECT n, "
        f"{BASE_MS} + n AS ms, lpad(to_hex({BASE_MS} + n), 12, '0') || lpad(to_hex(n), 20, '0') "
        f"AS id, 'user:u' || (n %% {size.sources}) AS feed, 'u' || (n %% {size.sources}) AS actor, "
        f"CASE WHEN n %% 2 = 0 THEN 'f' || n END AS fid FROM generate_series(1, {n}) AS n) AS a"
    )


def _fill_follows(size: Size) -> str:
    """Timeline t follows sources (t * follows_each + k) * 7919 mod sources
    (7919 is prime to the source count: a timeline's sources are distinct),
    its history from the start."""
    return (
        "INSERT INTO tidings_follows (follower, source, created_ms, history_from, tier, "
        "tier_ms, since_row) SELECT 'timeline:t' || lpad(t::text, 7, '0'), "
        f"'user:u' || (((t::bigint * {size.follows_each} + k) * 7919) %% {size.sources}), {BASE_MS}, "
        f"'{'0' * 32}', 0, 0, 0 FROM generate_series(0, {size.timelines - 1}) AS t, "
        f"generate_series(0, {size.follows_each - 1}) AS k"
    )


_FILL_STATS = (
    "INSERT INTO tidings_feed_stats (feed, followers, following, activities) "
    "SELECT feed, sum(followers), sum(following), sum(activities) FROM ("
    "SELECT feed, 0 AS followers, 0 AS following, count(*) AS activities "
    "FROM tidings_activities GROUP BY feed UNION ALL "
    "SELECT source, count(*), 0, 0 FROM tidings_follows GROUP BY source UNION ALL "
    "SELECT follower, 0, count(*), 0 FROM tidings_follows GROUP BY follower) AS s GROUP BY feed"
)


def fill(url: str, size: Size) -> None:
    """Today's layout, filled; its secondary indexes built after the rows."""
    db = Database(url)
    with db.write() as conn:
        schema.metadata.create_all(conn)
        migrations.schema_version.create(conn)
        conn.execute(migrations.schema_version.insert().values(version=migrations.LATEST))
        db.run_raw(conn, "SET LOCAL maintenance_work_mem = '512MB'", ())
        later = [i for t in (schema.activities, schema.follows) for i in t.indexes]
        for index in later:
            index.drop(conn)
        db.run_raw(
            conn,
            "ALTER TABLE tidings_activities DROP CONSTRAINT tidings_activities_feed_foreign_id",
            (),
        )
        db.run_raw(conn, _fill_activities(size), ())
        db.run_raw(conn, _fill_follows(size), ())
        db.run_raw(conn, _FILL_STATS, ())
        db.run_raw(
            conn,
            "ALTER TABLE tidings_activities ADD CONSTRAINT tidings_activities_feed_foreign_id "
            "UNIQUE (feed, foreign_id)",
            (),
        )
        for index in later:
            index.create(conn)
    with db.read() as conn:  # (autocommit: VACUUM runs outside a transaction)
        db.run_raw(conn, "VACUUM ANALYZE tidings_activities", ())
        db.run_raw(conn, "VACUUM ANALYZE tidings_follows", ())
    db.close()


def _engine(url: str) -> Tidings:
    """An engine on the database, its feeds in memory (rebuilt from the
    canonical store for each comparison); deliveries left in the outbox."""
    return Tidings(
        Settings(database_url=url, timeline_store=StoreName.MEMORY), task_runner="manual"
    )


def sample_feeds(size: Size) -> list[str]:
    rng = random.Random(31)
    users = [f"user:u{n}" for n in rng.sample(range(size.sources), size.sample // 2)]
    timelines = [f"timeline:t{t:07d}" for t in rng.sample(range(size.timelines), size.sample // 2)]
    return users + timelines


def reads(url: str, feeds: list[str]) -> dict[str, Any]:
    """What tidings reads of ``feeds``: their history (rebuilt from the
    canonical store), followers, following, counts, by id and foreign id."""
    eng = _engine(url)
    try:
        list(eng.admin.rebuild(feeds))
        seen: dict[str, Any] = {}
        for feed in feeds:
            page = eng.read(feed, limit=100)
            seen[f"page {feed}"] = [a.to_dict() for a in page.results]
            seen[f"counts {feed}"] = eng.counts(feed)
            if feed.startswith("user:"):
                seen[f"followers {feed}"] = eng.followers(feed, limit=100).results
                fid = next((a.foreign_id for a in page.results if a.foreign_id), None)
                if fid is not None:
                    seen[f"fid {feed}"] = eng.get_activity((feed, fid)).to_dict()
                if page.results:
                    seen[f"id {feed}"] = eng.get_activity(page.results[-1].id).to_dict()
            else:
                seen[f"following {feed}"] = eng.following(feed, limit=100).results
        return seen
    finally:
        eng.close()


@dataclass
class Publisher:
    """Publishes to ``user:pub<n>`` (and, every tenth, follows one) until
    stopped; notes each acknowledged write and how long it took."""

    eng: Tidings
    stop: threading.Event = field(default_factory=threading.Event)
    published: list[str] = field(default_factory=list)
    followed: list[tuple[str, str]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(7)
        n = len(self.published)
        try:
            while not self.stop.is_set():
                feed = f"user:pub{rng.randrange(PUBLISHED_FEEDS)}"
                item = {"actor": "pub", "verb": "post", "object": f"n:{n}", "foreign_id": f"p{n}"}
                started = time.perf_counter()
                stored = self.eng.add_activity(feed, item)
                if n % 10 == 0:
                    pair = (f"timeline:pub{n}", feed)
                    self.eng.follow(*pair, copy_limit=0)
                    self.followed.append(pair)
                self.latencies.append(time.perf_counter() - started)
                self.published.append(stored.id)
                n += 1
        except BaseException as exc:
            self.error = exc

    def for_seconds(self, seconds: float) -> list[float]:
        """Run in this thread for ``seconds``; the latencies of that stretch."""
        start = len(self.latencies)
        timer = threading.Timer(seconds, self.stop.set)
        timer.start()
        self.run()
        self.stop.clear()
        return self.latencies[start:]


def id_lookups(url: str, feeds: dict[str, str]) -> dict[str, float]:
    """ms per call, for activities picked from ``feeds`` (id: its feed): 50
    hydrated at once (a page), one's feed by id, one updated by id and by
    (feed, id) (what an update by foreign id now passes)."""
    store = _engine(url)
    acts = store.canonical.activities
    ids = sorted(feeds)
    rng = random.Random(5)
    out: dict[str, float] = {}
    try:
        for name, call in (
            ("hydrate 50", lambda: acts.get_versioned_docs(rng.sample(ids, 50))),
            ("by id", lambda: acts.feed_of(rng.choice(ids))),
            ("update by id", lambda: _touch(acts, rng.choice(ids), None)),
            ("update by feed, id", lambda: _touch(acts, (aid := rng.choice(ids)), feeds[aid])),
        ):
            out[name] = _per_call(call, 2000)
    finally:
        store.close()
    return out


def _touch(acts: Any, aid: str, feed: str | None) -> None:
    acts.update_activity(aid, lambda a: a, feed=feed)


def _per_call(call: Callable[[], object], n: int) -> float:
    for _ in range(50):
        call()
    started = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - started) / n * 1000


def run(server: object, size: Size) -> list[Row]:
    """``server`` is the bench's Redis, unused: this bench starts its own PostgreSQL."""
    label = (
        f"{size.sources * size.per_source:,} act., {size.timelines * size.follows_each:,} follows"
    )
    with PostgresServer() as pg, pg.database() as url:
        print(f"  fill ({label})", flush=True)
        started = time.perf_counter()
        fill(url, size)
        filled = time.perf_counter() - started
        feeds = sample_feeds(size)
        before = reads(url, feeds)
        rng = random.Random(3)
        numbers = rng.sample(range(1, size.sources * size.per_source), 500)
        owners = {_activity_id(n): f"user:u{n % size.sources}" for n in numbers}
        plain = id_lookups(url, owners)
        print(f"  migrate ({DEFAULT_PARTITIONS} partitions) while publishing", flush=True)
        migration = migrate(url, size)
        after = reads(url, feeds)
        differences = sum(1 for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert differences == 0, f"{differences} reads differ after the migration"
        lost = _lost(url, migration.publisher, size)
        assert lost == 0, f"{lost} acknowledged writes missing after the migration"
        partitioned = id_lookups(url, owners)
    fill_row = Row(
        "partition: fill (generate_series, indexes after)", "postgres", label, filled, "s"
    )
    compared = f"{size.sample} feeds, {len(before)} reads"
    published = f"{len(migration.publisher.published):,} publishes"
    return [
        fill_row,
        *migration.rows(label),
        Row("partition: reads differing after", "postgres", compared, differences, "",
            *at_most(differences, 0)),
        Row("partition: acknowledged writes lost", "postgres", published, lost, "",
            *at_most(lost, 0)),
        *[
            Row(f"partition: {name} ({layout})", "postgres", label, ms[name], "ms")
            for name in plain
            for layout, ms in (("plain", plain), ("partitioned", partitioned))
        ],
    ]  # fmt: skip


@dataclass
class Migration:
    report: PartitionReport
    seconds: float
    publisher: Publisher
    baseline: list[float]
    during: list[float]

    def rows(self, label: str) -> list[Row]:
        report, pub = self.report, "one publisher thread"
        copied = sum(t.rows for t in report.tables)
        per_table = {t.table: {"rows": t.rows, "seconds": t.seconds} for t in report.tables}
        load = os.getloadavg()
        return [
            Row("partition: online migration, total", "postgres", label, self.seconds, "s",
                detail={"loadavg_at_end": load}),
            Row("partition: rows copied", "postgres", label, copied / self.seconds, "rows/s",
                detail=per_table),
            Row("partition: longest lock held", "postgres", "trigger creation, swap",
                report.longest_lock_s * 1000, "ms"),
            Row("partition: longest copy batch", "postgres", "5,000 rows",
                report.longest_batch_s * 1000, "ms"),
            Row("partition: publishes during the migration", "postgres", pub,
                len(self.during), "acknowledged",
                detail={"follows": len(self.publisher.followed)}),
            Row("partition: publish p99 before", "postgres", pub,
                percentile(self.baseline, 99) * 1000, "ms"),
            Row("partition: publish p99 during", "postgres", pub,
                percentile(self.during, 99) * 1000, "ms"),
        ]  # fmt: skip


def migrate(url: str, size: Size) -> Migration:
    """A baseline of publishes, then the migration while they go on."""
    publisher = Publisher(_engine(url))
    baseline = publisher.for_seconds(size.baseline_s)
    during_from = len(publisher.latencies)
    thread = threading.Thread(target=publisher.run, daemon=True)
    db = Database(url)
    thread.start()
    started = time.perf_counter()
    try:
        report = OnlinePartitioning(db, partitions=DEFAULT_PARTITIONS).run()
    finally:
        took = time.perf_counter() - started
        publisher.stop.set()
        thread.join()
        db.close()
        publisher.eng.close()
    if publisher.error is not None:
        raise publisher.error
    return Migration(report, took, publisher, baseline, publisher.latencies[during_from:])


def _activity_id(n: int) -> str:
    """The id :func:`_fill_activities` gives activity ``n``."""
    return f"{BASE_MS + n:012x}{n:020x}"


def _lost(url: str, publisher: Publisher, size: Size) -> int:
    """Acknowledged publishes and follows not in the database, plus any
    difference in the activity count (a lost or doubled row)."""
    db = Database(url)
    acts = db.fetch_raw
    with db.read() as conn:
        found = 0
        for at in range(0, len(publisher.published), 1000):
            part = publisher.published[at : at + 1000]
            sql = "SELECT count(*) FROM tidings_activities WHERE id = ANY(%s)"
            found += acts(conn, sql, (part,))[0][0]
        total = acts(conn, "SELECT count(*) FROM tidings_activities", ())[0][0]
        follows = 0
        for at in range(0, len(publisher.followed), 1000):
            pairs = publisher.followed[at : at + 1000]
            sql = (
                "SELECT count(*) FROM tidings_follows f JOIN unnest(%s::text[], %s::text[]) "
                "AS p(follower, source) USING (follower, source)"
            )
            follows += acts(conn, sql, ([f for f, _ in pairs], [s for _, s in pairs]))[0][0]
    db.close()
    expected_total = size.sources * size.per_source + len(publisher.published)
    return int(
        len(publisher.published)
        - found
        + len(publisher.followed)
        - follows
        + abs(total - expected_total)
    )
