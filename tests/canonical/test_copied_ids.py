"""The history a follow copies, read for many spans in one query, agrees with
the one-span query on SQLite and PostgreSQL (ranges, limits, empty spans)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tidings import Settings, StoreName, Tidings

LOWEST, HIGHEST = "0" * 32, "f" * 32


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return f"sqlite:///{tmp_path / 'copied.db'}"


@pytest.mark.parametrize("limit", [0, 1, 3, 20, 100])
def test_many_spans_agree_with_one_at_a_time(db_url: str, limit: int) -> None:
    with Tidings(
        Settings(database_url=db_url, timeline_store=StoreName.SQL), task_runner="manual"
    ) as eng:
        for s in range(5):
            eng.activities.publish_many(
                f"user:s{s}",
                [{"actor": "a", "verb": "post", "object": f"note:{n}"} for n in range(30)],
            )
        follows = eng.canonical.follows
        held = {s: follows.copied_ids(f"user:s{s}", LOWEST, HIGHEST, 1000) for s in range(5)}
        rng = random.Random(limit)
        spans = [("user:nobody", LOWEST, HIGHEST)]  # a source with no activities
        for _ in range(60):
            s = rng.randrange(5)
            lo, hi = sorted(rng.sample(held[s], 2))
            spans.append((f"user:s{s}", lo, hi))
            spans.append((f"user:s{s}", hi, lo))  # an empty range
        many = follows.copied_ids_many(spans, limit)
        assert set(many) == set(spans)
        for span in spans:
            one = follows.copied_ids(*span, limit) if limit else []
            assert many[span] == one, span


@pytest.mark.parametrize("limit", [1, 3, 20, 100])
def test_copy_spans_are_each_sources_newest_activities(db_url: str, limit: int) -> None:
    with Tidings(
        Settings(database_url=db_url, timeline_store=StoreName.SQL), task_runner="manual"
    ) as eng:
        for s in range(4):
            eng.activities.publish_many(
                f"user:s{s}",
                [{"actor": "a", "verb": "post", "object": f"note:{n}"} for n in range(s * 10)],
            )
        follows = eng.canonical.follows
        sources = [f"user:s{s}" for s in range(4)] + ["user:nobody"]
        with eng.db.read() as conn:
            spans = follows._copy_spans(conn, sources, limit)
        expected = {}
        for source in sources:
            newest = follows.copied_ids(source, LOWEST, HIGHEST, limit)
            if newest:
                expected[source] = (newest[-1], newest[0])
        assert spans == expected
        assert "user:s0" not in spans  # no activities: nothing to copy
