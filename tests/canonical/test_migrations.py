"""Schema migrations on SQLite and PostgreSQL: older databases reach the latest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, select, text

from tidings.canonical import migrations
from tidings.canonical.db import Database
from tidings.canonical.schema import (
    activities,
    aggregate_marks,
    fanout,
    feed_reads,
    feed_stats,
    follows,
    handles,
    outbox,
    outbox_parts,
    reaction_trash,
    reactions,
    users,
)
from tidings.canonical.users import Users
from tidings.core import ids
from tidings.core.handles import fold


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
    else:
        url = f"sqlite:///{tmp_path / 'm.db'}"
    database = Database(url)
    yield database
    database.close()


def test_v4_adds_fanout_and_starts_existing_follows_at_their_time(db: Database) -> None:
    db.migrate()
    created_ms = 1_767_225_600_123
    with db.write() as conn:
        # Back to v3: no strategy table, follows without history_from.
        conn.execute(text("DROP TABLE tidings_fanout"))
        conn.execute(text("ALTER TABLE tidings_follows DROP COLUMN history_from"))
        conn.execute(
            text(
                "INSERT INTO tidings_follows (follower, source, created_ms) "
                f"VALUES ('timeline:a', 'user:b', {created_ms})"
            )
        )
        conn.execute(migrations.schema_version.update().values(version=3))
    assert db.migrate() == migrations.LATEST - 3  # v4, then the later ones
    with db.read() as conn:
        assert migrations.current_version(conn) == migrations.LATEST
        start = conn.execute(select(follows.c.history_from)).scalar_one()
        assert conn.execute(select(fanout)).all() == []
    assert start == ids.floor_id(created_ms)
    assert db.migrate() == 0


def test_v5_adds_tiers_and_keeps_pending_parts(db: Database) -> None:
    db.migrate()
    with db.write() as conn:
        # Back to v4: follows without tiers, parts keyed by (row, after), no reads.
        conn.execute(text("DROP TABLE tidings_feed_reads"))
        conn.execute(text("DROP TABLE tidings_group_marks"))
        conn.execute(text("ALTER TABLE tidings_activities DROP COLUMN accepted_us"))
        conn.execute(text("DROP INDEX tidings_follows_source_tier_since"))
        conn.execute(text("ALTER TABLE tidings_follows DROP COLUMN tier"))
        conn.execute(text("ALTER TABLE tidings_follows DROP COLUMN tier_ms"))
        conn.execute(
            text(
                "CREATE UNIQUE INDEX tidings_follows_source_follower "
                "ON tidings_follows (source, follower)"
            )
        )
        conn.execute(text("DROP TABLE tidings_outbox_parts"))
        conn.execute(
            text(
                'CREATE TABLE tidings_outbox_parts (row_id INTEGER NOT NULL, "after" VARCHAR(255) '
                'NOT NULL, "last" VARCHAR(255), done INTEGER DEFAULT 0 NOT NULL, '
                'CONSTRAINT tidings_outbox_parts_pkey PRIMARY KEY (row_id, "after"))'
            )
        )
        conn.execute(
            text(
                "INSERT INTO tidings_outbox_parts VALUES (7, '', 'timeline:m', 1), "
                "(7, 'timeline:m', NULL, 0)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO tidings_follows (follower, source, created_ms, history_from) "
                "VALUES ('timeline:a', 'user:b', 1, '')"
            )
        )
        conn.execute(migrations.schema_version.update().values(version=4))
    assert db.migrate() == migrations.LATEST - 4
    with db.read() as conn:
        assert migrations.current_version(conn) == migrations.LATEST
        parts = conn.execute(select(outbox_parts).order_by(outbox_parts.c.after)).all()
        tiers = conn.execute(select(follows.c.tier, follows.c.tier_ms)).all()
        assert conn.execute(select(feed_reads)).all() == []
        assert conn.execute(select(aggregate_marks)).all() == []
        assert conn.execute(select(activities.c.accepted_us)).all() == []
    assert [(p.row_id, p.tier, p.after, p.last, p.done, p.split_ms) for p in parts] == [
        (7, "all", "", "timeline:m", 1, 0),
        (7, "all", "timeline:m", None, 0, 0),
    ]
    assert [tuple(t) for t in tiers] == [(0, 0)]
    assert db.migrate() == 0


_V5_OUTBOX = (
    "CREATE TABLE tidings_outbox (id INTEGER NOT NULL, kind VARCHAR(16) NOT NULL, "
    "activity_id VARCHAR(32) NOT NULL, source VARCHAR(255) NOT NULL, targets BLOB NOT NULL, "
    "doc BLOB, group_keys BLOB, position VARCHAR(255), "
    "lease_until_ms BIGINT DEFAULT '0' NOT NULL, attempts INTEGER DEFAULT '0' NOT NULL, "
    "created_ms BIGINT NOT NULL, PRIMARY KEY (id))"
)


def test_v6_keeps_pending_rows_and_never_reuses_outbox_ids(db: Database) -> None:
    db.migrate()
    with db.write() as conn:
        # Back to v5: no claim tokens; on SQLite, ids a deleted newest row frees.
        if db.dialect == "sqlite":
            conn.execute(text("DROP TABLE tidings_outbox"))
            conn.execute(text(_V5_OUTBOX))
        else:
            conn.execute(text("ALTER TABLE tidings_outbox DROP COLUMN claim_token"))
        conn.execute(
            text(
                "INSERT INTO tidings_outbox (id, kind, activity_id, source, targets, position, "
                "lease_until_ms, attempts, created_ms) "
                "VALUES (7, 'deliver', 'a', 'user:bob', '[]', 'timeline:m', 0, 2, 1)"
            )
        )
        conn.execute(migrations.schema_version.update().values(version=5))
    assert db.migrate() == migrations.LATEST - 5
    with db.read() as conn:
        assert migrations.current_version(conn) == migrations.LATEST
        [row] = conn.execute(select(outbox)).all()
    assert (row.id, row.kind, row.position, row.attempts, row.claim_token) == (
        7,
        "deliver",
        "timeline:m",
        2,
        0,
    )
    new = {"kind": "retract", "activity_id": "b", "source": "s", "targets": b"[]", "created_ms": 2}
    with db.write() as conn:
        first = conn.execute(outbox.insert().values(new).returning(outbox.c.id)).scalar_one()
        conn.execute(outbox.delete().where(outbox.c.id == first))
        second = conn.execute(outbox.insert().values(new).returning(outbox.c.id)).scalar_one()
    assert first != 7  # (on PostgreSQL the sequence never saw the id given by hand)
    assert second > first
    assert db.migrate() == 0


def test_v6_starts_existing_activities_at_version_1(db: Database) -> None:
    db.migrate()
    with db.write() as conn:
        # Back to v5: activities without versions.
        conn.execute(text("ALTER TABLE tidings_activities DROP COLUMN version"))
        conn.execute(
            text(
                "INSERT INTO tidings_activities (id, feed, doc) "
                f"VALUES ('{ids.new_id(1)}', 'user:b', '{{}}')"
            )
        )
        conn.execute(migrations.schema_version.update().values(version=5))
    assert db.migrate() == migrations.LATEST - 5
    with db.read() as conn:
        assert migrations.current_version(conn) == migrations.LATEST
        assert conn.execute(select(activities.c.version)).scalars().all() == [1]
    assert db.migrate() == 0


def test_v9_marks_existing_follows_as_reached_by_every_pending_delivery(db: Database) -> None:
    db.migrate()
    with db.write() as conn:
        # Back to v8: follows without since_row, the v5 covering index.
        conn.execute(text("DROP INDEX tidings_follows_source_tier_since"))
        conn.execute(text("ALTER TABLE tidings_follows DROP COLUMN since_row"))
        conn.execute(
            text(
                "CREATE INDEX tidings_follows_source_tier "
                "ON tidings_follows (source, follower, tier, tier_ms)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO tidings_follows (follower, source, created_ms, history_from) "
                "VALUES ('timeline:a', 'user:b', 1, '')"
            )
        )
        conn.execute(migrations.schema_version.update().values(version=8))
    assert db.migrate() == migrations.LATEST - 8
    with db.read() as conn:
        assert conn.execute(select(follows.c.since_row)).scalars().all() == [0]
        indexes = {i["name"] for i in inspect(conn).get_indexes("tidings_follows")}
    assert "tidings_follows_source_tier_since" in indexes
    assert "tidings_follows_source_tier" not in indexes
    assert db.migrate() == 0


def test_v13_starts_every_followers_version_at_0(db: Database) -> None:
    db.migrate()
    with db.write() as conn:
        # Back to v12: feed stats without follows_version.
        conn.execute(text("ALTER TABLE tidings_feed_stats DROP COLUMN follows_version"))
        conn.execute(text("INSERT INTO tidings_feed_stats (feed, followers) VALUES ('user:b', 3)"))
        conn.execute(migrations.schema_version.update().values(version=12))
    assert db.migrate() == migrations.LATEST - 12
    with db.read() as conn:
        rows = conn.execute(select(feed_stats.c.feed, feed_stats.c.follows_version)).all()
    assert [tuple(r) for r in rows] == [("user:b", 0)]
    assert db.migrate() == 0


def test_v14_leaves_existing_objects_to_the_application(db: Database) -> None:
    """Objects stored before owners were recorded stay readable, owned by nobody
    (the application's: user tokens may not change them)."""
    db.migrate()
    with db.write() as conn:
        # Back to v13: objects without owner.
        conn.execute(text("ALTER TABLE tidings_objects DROP COLUMN owner"))
        conn.execute(
            text(
                "INSERT INTO tidings_objects (ref, data, created_us, updated_us) "
                "VALUES ('photo:1', :data, 5, 5)"
            ),
            {"data": b'{"u": 1}'},
        )
        conn.execute(migrations.schema_version.update().values(version=13))
    assert db.migrate() == migrations.LATEST - 13
    found = Users(db).get_objects(["photo:1"])["photo:1"]
    assert found is not None
    assert (dict(found.data), found.owner) == ({"u": 1}, None)
    assert db.migrate() == 0


def test_v15_recomputes_handle_keys_and_keeps_one_holder_of_each(db: Database) -> None:
    """Keys become skeletons; where two become one, a handle held beats one
    given up, then the user created first keeps it. The other keeps their
    handle for display, and a rename does not release the holder's key."""
    db.migrate()
    accounts = [
        # (user, handle, created_us, given up at ms)
        ("latin", "Alice", 1, None),
        ("cyrillic", "\u0430\u04cf\u0456\u0441\u0435", 2, None),  # all Cyrillic: looks like alice
        ("early", "m0dern", 1, 5),  # gave it up
        ("late", "modern", 2, None),
        ("plain", "Bob", 3, None),
    ]
    with db.write() as conn:
        # Back to v13: keys are NFKC + casefold, users have no replaced_us.
        conn.execute(text("ALTER TABLE tidings_users DROP COLUMN replaced_us"))
        for user_id, handle, created, released in accounts:
            conn.execute(
                text(
                    "INSERT INTO tidings_users (id, handle, profile, created_us, updated_us) "
                    "VALUES (:id, :handle, :profile, :created, :created)"
                ),
                {"id": user_id, "handle": handle, "profile": b"{}", "created": created},
            )
            conn.execute(
                handles.insert().values(hkey=fold(handle), user_id=user_id, released_ms=released)
            )
        conn.execute(migrations.schema_version.update().values(version=13))
    assert db.migrate() == migrations.LATEST - 13
    with db.read() as conn:
        keys = {r.hkey: r.user_id for r in conn.execute(select(handles.c.hkey, handles.c.user_id))}
        shown = dict(conn.execute(select(users.c.id, users.c.handle)).all())
    assert keys == {"allce": "latin", "modem": "late", "bob": "plain"}
    assert shown == {user_id: handle for user_id, handle, _, _ in accounts}
    store = Users(db)
    now_ms = 10_000
    assert store.by_handle("ALICE", now_ms, keep_ms=0) == store.get("latin")
    store.update("cyrillic", handle="carol", profile=None, now_us=now_ms * 1000, keep_ms=0)
    assert store.by_handle("alice", now_ms, keep_ms=0) == store.get("latin")
    assert store.by_handle("carol", now_ms, keep_ms=0) == store.get("cyrillic")
    with db.read() as conn:
        assert conn.execute(select(users.c.replaced_us)).scalars().all() == [None] * 5
    assert db.migrate() == 0


def test_v17_adds_the_reaction_trash_and_keeps_the_reactions(db: Database) -> None:
    db.migrate()
    row = {
        "id": ids.new_id(1),
        "activity_id": ids.new_id(1),
        "parent": "",
        "depth": 1,
        "kind": "like",
        "user_id": "alice",
        "data": b"{}",
        "targets": b"[]",
        "notice": "",
        "notice_feed": "",
        "once": "alice",
        "created_us": 1000,
        "updated_us": 1000,
    }
    with db.write() as conn:
        # Back to v16: no trash.
        conn.execute(text("DROP TABLE tidings_reaction_trash"))
        conn.execute(reactions.insert().values(**row))
        conn.execute(migrations.schema_version.update().values(version=16))
    assert db.migrate() == migrations.LATEST - 16  # v17, then the later ones
    with db.read() as conn:
        assert "tidings_reaction_trash" in inspect(conn).get_table_names()
        assert conn.execute(select(reactions.c.id)).scalars().all() == [row["id"]]
    with db.write() as conn:
        conn.execute(reaction_trash.insert().values(**row, root=row["id"], removed_us=2000))
    assert db.migrate() == 0


def test_v18_adds_the_placed_marks(db: Database) -> None:
    db.migrate()
    with db.write() as conn:
        # Back to v17: no placed activities.
        conn.execute(text("DROP TABLE tidings_placed"))
        conn.execute(migrations.schema_version.update().values(version=17))
    assert db.migrate() == 1
    with db.read() as conn:
        assert "tidings_placed" in inspect(conn).get_table_names()
    assert db.migrate() == 0
