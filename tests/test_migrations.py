"""Schema migrations on SQLite and PostgreSQL: a v3 database reaches v4."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, text

from tidings import ids, migrations
from tidings.db import Database
from tidings.schema import fanout, follows


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
    assert db.migrate() == 1
    with db.read() as conn:
        assert migrations.current_version(conn) == migrations.LATEST == 4
        start = conn.execute(select(follows.c.history_from)).scalar_one()
        assert conn.execute(select(fanout)).all() == []
    assert start == ids.floor_id(created_ms)
    assert db.migrate() == 0
