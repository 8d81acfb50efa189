"""The data of the actstream bench (:mod:`bench.django_actstream`): Django
configured on a private PostgreSQL, django-activity-stream's tables filled
with ``COPY``, and the same actions published into tidings.

Django is configured once per process (``settings.configure``); nothing else
in the bench process uses it.
"""

from __future__ import annotations

import contextlib
import random
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from bench.harness import PostgresServer, RedisServer
from tidings import Settings, StoreName, Tidings
from tidings.core.limits import MAX_BATCH, MAX_COPY_LIMIT

SEED = 30
START = datetime(2025, 1, 1, tzinfo=UTC)
SPAN = timedelta(days=365)
#: Every action names another user as its action_object; "commented" also a target (tidings verbs hold no spaces).
VERBS = ("liked", "shared", "commented")
WITH_TARGET = 2
#: The user whose stream is read.
READER = 1
FOREIGN_PREFIX = "actstream.action:"
#: COPY's text format for NULL.
NULL = "\\N"
#: How long the bench waits for tidings' deliveries before it gives up.
DELIVERY_TIMEOUT_S = 900.0
#: Rows per COPY buffer written at once.
COPY_CHUNK = 50_000


@dataclass(frozen=True)
class Sizes:
    users: int
    actions: int
    #: Users the reader follows.
    following: int
    #: Timed rounds.
    reads: int


@dataclass
class Actions:
    """Action ``i`` (id ``i + 1``): columns as arrays, users by primary key."""

    actors: array[int] = field(default_factory=lambda: array("i"))
    objects: array[int] = field(default_factory=lambda: array("i"))
    #: 0: no target.
    targets: array[int] = field(default_factory=lambda: array("i"))
    verbs: array[int] = field(default_factory=lambda: array("b"))
    #: Microseconds since the epoch, increasing with the id.
    micros: array[int] = field(default_factory=lambda: array("q"))


@dataclass
class Dataset:
    #: The ``User`` whose stream is read.
    reader: Any
    #: Its home feed in tidings (``timeline:1``).
    home_feed: str
    followed: list[int]
    #: Seconds each fill step took.
    seconds: dict[str, float]


def action_id(foreign_id: str | None) -> int:
    """The actstream id a tidings activity was published for."""
    if foreign_id is None or not foreign_id.startswith(FOREIGN_PREFIX):
        raise ValueError(f"not an actstream action's foreign_id: {foreign_id!r}")
    return int(foreign_id.removeprefix(FOREIGN_PREFIX))


def draw(sizes: Sizes) -> tuple[Actions, list[int]]:
    """The actions (actors uniform; one timestamp per slot of ``SPAN / actions``,
    so all distinct) and the users the reader follows."""
    if sizes.following >= sizes.users:
        raise ValueError(f"the reader can follow at most {sizes.users - 1} users")
    rng = random.Random(SEED)
    acts = Actions()
    step = int(SPAN.total_seconds() * 1_000_000) // sizes.actions
    start = int(START.timestamp() * 1_000_000)
    for i in range(sizes.actions):
        actor = rng.randrange(1, sizes.users + 1)
        other = rng.randrange(1, sizes.users)  # a user other than the actor
        verb = rng.randrange(len(VERBS))
        acts.actors.append(actor)
        acts.objects.append(other + 1 if other >= actor else other)
        acts.targets.append(rng.randrange(1, sizes.users + 1) if verb == WITH_TARGET else 0)
        acts.verbs.append(verb)
        acts.micros.append(start + i * step + rng.randrange(step))
    followed = rng.sample(range(READER + 1, sizes.users + 1), sizes.following)
    return acts, sorted(followed)


# -- Django ----------------------------------------------------------------------


@contextlib.contextmanager
def django_and_tidings(postgres: PostgresServer, redis: RedisServer) -> Iterator[tuple[str, str]]:
    """Django on a new database of ``postgres`` with actstream migrated, and its
    TIDINGS on another database of the same server with feeds in ``redis``
    (flushed); yields the names of both databases' URLs: Django's database
    name and tidings' ``database_url``. Closes both at the end."""
    from django.db import connections

    from tidings.contrib.django import close_engine

    redis.flush()
    with postgres.database() as django_url, postgres.database() as tidings_url:
        name = str(make_url(django_url).database)
        configure(postgres, name, {"database_url": tidings_url, "redis_url": redis.url})
        try:
            yield name, tidings_url
        finally:
            close_engine()
            connections.close_all()


@contextlib.contextmanager
def sql_engine(database_url: str, feed: str) -> Iterator[Tidings]:
    """A second engine on the canonical database at ``database_url``, its feeds in
    that PostgreSQL database too (no Redis): what tidings reads on the server
    actstream has alone. Only ``feed`` (the one the bench reads) is rebuilt
    from the canonical store: rebuilding all 20,001 takes minutes here, and a
    page is an index range scan of one feed's entries."""
    engine = Tidings(
        Settings(database_url=database_url, timeline_store=StoreName.SQL), task_runner="manual"
    )
    try:
        t0 = time.perf_counter()
        for _ in engine.admin.rebuild([feed]):
            pass
        print(
            f"  tidings (feeds in PostgreSQL): {feed} rebuilt in {time.perf_counter() - t0:.2f} s",
            flush=True,
        )
        yield engine
    finally:
        engine.close()


def configure(postgres: PostgresServer, name: str, tidings: dict[str, Any]) -> None:
    import django
    from django.conf import settings
    from django.core.management import call_command

    if settings.configured:
        raise RuntimeError("Django is configured already in this process; run the bench alone")
    settings.configure(
        DEBUG=False,
        SECRET_KEY="tidings-bench",
        USE_TZ=True,
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": name,
                "USER": postgres.user,
                "HOST": "127.0.0.1",
                "PORT": str(postgres.port),
            }
        },
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "actstream",
            "tidings.contrib.django",
        ],
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        # The default (thread) runner delivers while the bench publishes.
        TIDINGS=tidings,
    )
    django.setup()
    call_command("migrate", verbosity=0)
    from actstream import registry
    from django.contrib.auth import get_user_model

    registry.register(get_user_model())


# -- actstream's tables ------------------------------------------------------------


def fill(sizes: Sizes, postgres: PostgresServer, database: str) -> Dataset:
    """Both sides filled with the same data; the reader as a ``User``."""
    from django.contrib.auth import get_user_model

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    acts, followed = draw(sizes)
    seconds["draw"] = time.perf_counter() - t0
    with psycopg.connect(postgres.conninfo(database)) as conn:
        seconds["actstream COPY"] = timed(lambda: copy_actstream(conn, sizes, acts, followed))
    with psycopg.connect(postgres.conninfo(database), autocommit=True) as conn:
        seconds["actstream VACUUM ANALYZE"] = timed(lambda: vacuum(conn))
    print(
        f"  drawn in {seconds['draw']:.1f} s; actstream: {sizes.actions:,} actions, {sizes.users:,} users, {len(followed)} follows"
        f" in {seconds['actstream COPY']:.1f} s (+ {seconds['actstream VACUUM ANALYZE']:.1f} s"
        " VACUUM ANALYZE)",
        flush=True,
    )
    from tidings.contrib.django import home_feed

    reader = get_user_model().objects.get(pk=READER)
    seconds |= publish(acts, reader, followed)
    return Dataset(reader, home_feed(reader), followed, seconds)


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def copy_actstream(
    conn: psycopg.Connection[Any], sizes: Sizes, acts: Actions, followed: list[int]
) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType

    user_type = ContentType.objects.get_for_model(get_user_model()).pk
    joined = START - timedelta(days=1)
    with conn.cursor() as cur:
        with cur.copy(
            "COPY auth_user (id, password, is_superuser, username, first_name, last_name,"
            " email, is_staff, is_active, date_joined) FROM STDIN"
        ) as copy:
            for pk in range(1, sizes.users + 1):
                copy.write_row((pk, "!", False, f"u{pk:06d}", "", "", "", False, True, joined))
        with cur.copy(
            "COPY actstream_follow (user_id, content_type_id, object_id, actor_only, flag,"
            " started) FROM STDIN"
        ) as copy:
            for pk in followed:
                copy.write_row((READER, user_type, str(pk), True, "", joined))
        with cur.copy(
            "COPY actstream_action (id, actor_content_type_id, actor_object_id, verb,"
            " action_object_content_type_id, action_object_object_id, target_content_type_id,"
            " target_object_id, timestamp, public) FROM STDIN"
        ) as copy:
            for start in range(0, sizes.actions, COPY_CHUNK):
                copy.write(action_lines(acts, user_type, start, start + COPY_CHUNK))
        for table in ("auth_user", "actstream_action"):
            cur.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table}"
            )


def action_lines(acts: Actions, user_type: int, start: int, stop: int) -> bytes:
    """COPY's text format for actions ``start`` to ``stop`` (ids from ``start + 1``)."""
    lines = []
    for i in range(start, min(stop, len(acts.actors))):
        target = acts.targets[i]
        when = datetime.fromtimestamp(acts.micros[i] / 1_000_000, UTC).isoformat()
        lines.append(
            f"{i + 1}\t{user_type}\t{acts.actors[i]}\t{VERBS[acts.verbs[i]]}\t{user_type}\t"
            f"{acts.objects[i]}\t{user_type if target else NULL}\t{target or NULL}\t{when}\tt\n"
        )
    return "".join(lines).encode()


def vacuum(conn: psycopg.Connection[Any]) -> None:
    # A deployed table has been vacuumed and analysed by autovacuum; right after
    # COPY it has neither statistics nor a visibility map.
    for table in ("auth_user", "actstream_follow", "actstream_action"):
        conn.execute(f"VACUUM ANALYZE {table}")


# -- tidings -------------------------------------------------------------------------


def publish(acts: Actions, reader: Any, followed: list[int]) -> dict[str, float]:
    """Every action into its actor's feed, then the reader's home feed follows the
    followed users' feeds, copying their history; every delivery carried out."""
    from django.contrib.auth import get_user_model

    from tidings.contrib.django import feed_of, get_engine, home_feed, ref

    engine = get_engine()
    if ref(reader) != f"{READER}" or feed_of(reader) != f"user:{READER}":
        raise RuntimeError(f"the naming rule changed: {ref(reader)}, {feed_of(reader)}")
    by_actor: dict[int, list[int]] = {}
    for i, actor in enumerate(acts.actors):
        by_actor.setdefault(actor, []).append(i)
    t0 = time.perf_counter()
    done = 0
    for actor, indexes in by_actor.items():
        for start in range(0, len(indexes), MAX_BATCH):
            chunk = indexes[start : start + MAX_BATCH]
            engine.add_activities(f"user:{actor}", [activity(acts, i) for i in chunk])
        done += len(indexes)
        if done // 100_000 != (done - len(indexes)) // 100_000:
            rate = done / (time.perf_counter() - t0)
            print(f"    tidings: {done:,} published ({rate:,.0f}/s)", flush=True)
    published = time.perf_counter() - t0
    wait_delivered(engine)
    delivered = time.perf_counter() - t0
    users = get_user_model().objects.in_bulk(followed)
    pairs = [(home_feed(reader), feed_of(users[pk])) for pk in followed]
    t1 = time.perf_counter()
    engine.follow_many(pairs, copy_limit=MAX_COPY_LIMIT)
    wait_delivered(engine)
    followed_s = time.perf_counter() - t1
    print(
        f"  tidings: {len(acts.actors):,} published in {published:.1f} s"
        f" ({len(acts.actors) / published:,.0f}/s), all delivered after {delivered:.1f} s;"
        f" {len(pairs)} follows with copies in {followed_s:.2f} s",
        flush=True,
    )
    return {
        "tidings publish": published,
        "tidings delivered": delivered,
        "tidings follow": followed_s,
    }


def wait_delivered(engine: Tidings) -> None:
    """Return once no delivery is pending (the thread runner carries them out)."""
    deadline = time.perf_counter() + DELIVERY_TIMEOUT_S
    while engine.admin.pending():
        if time.perf_counter() > deadline:
            raise RuntimeError(f"deliveries still pending after {DELIVERY_TIMEOUT_S:.0f} s")
        time.sleep(0.05)


def activity(acts: Actions, i: int) -> dict[str, Any]:
    target = acts.targets[i]
    return {
        # Users are named by their key (tidings.contrib.django.refs).
        "actor": f"{acts.actors[i]}",
        "verb": VERBS[acts.verbs[i]],
        "object": f"{acts.objects[i]}",
        "target": f"{target}" if target else None,
        "time": datetime.fromtimestamp(acts.micros[i] / 1_000_000, UTC),
        "foreign_id": f"{FOREIGN_PREFIX}{i + 1}",
    }


def storage(
    postgres: PostgresServer, database: str, tidings_url: str, redis: RedisServer
) -> dict[str, int]:
    """Bytes held: actstream's database (Django's), tidings' canonical database,
    tidings' Redis (``used_memory``: feeds and the activity cache)."""
    names = {"actstream database": database, "tidings database": make_url(tidings_url).database}
    held = {"tidings redis": redis.used_memory()}
    with psycopg.connect(postgres.conninfo()) as conn:
        for label, name in names.items():
            row = conn.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
            held[label] = int(row[0]) if row else 0
    print("  held: " + ", ".join(f"{k} {v / 2**20:,.0f} MiB" for k, v in held.items()), flush=True)
    return held


# -- what actstream does per page ----------------------------------------------------


def in_queries(fn: Callable[[], object], calls: int) -> tuple[int, float]:
    """Queries per call of ``fn``, and the median share of a call's time spent
    inside the database driver's ``execute`` (the round trips and PostgreSQL's
    work; the rest is Django and actstream in Python)."""
    from django.db import connection

    spent = [0.0]
    queries = [0]

    def timer(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent[0] += time.perf_counter() - t0
            queries[0] += 1

    shares = []
    with connection.execute_wrapper(timer):
        for _ in range(calls):
            spent[0] = 0.0
            t0 = time.perf_counter()
            fn()
            shares.append(spent[0] / (time.perf_counter() - t0))
    return queries[0] // calls, sorted(shares)[len(shares) // 2]


def explain_page(reader: Any, n: int, page: int) -> list[str]:
    """PostgreSQL's plan of actstream's main query for page ``n`` (0: the first)
    of ``page`` actions, as run (EXPLAIN ANALYZE)."""
    from actstream.models import user_stream
    from django.db import connection

    sql, params = user_stream(reader)[n * page : (n + 1) * page].query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        return [str(row[0]) for row in cur.fetchall()]
