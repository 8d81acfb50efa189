from pathlib import Path

import pytest
from pydantic import ValidationError

from tidings.core.feeds import FeedKind
from tidings.settings import Settings, SqliteSynchronous, StoreName


def test_defaults() -> None:
    s = Settings.load()
    assert s.database_url == "sqlite:///tidings.canonical.db"
    assert s.store == "sql"
    assert set(s.groups) == {
        "user",
        "timeline",
        "timeline_aggregated",
        "timeline_ranked",
        "notification",
    }
    assert s.groups["notification"].kind is FeedKind.NOTIFICATION
    assert s.groups["user"].max_length == 800


def test_redis_url_selects_redis_store() -> None:
    assert Settings.load(redis_url="redis://127.0.0.1:1/0").store == "redis"


def test_named_choices_are_enums_of_the_same_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDINGS_TIMELINE_STORE", "redis")
    monkeypatch.setenv("TIDINGS_SQLITE_SYNCHRONOUS", "full")
    s = Settings.load()
    assert s.timeline_store is StoreName.REDIS
    assert s.store is StoreName.REDIS
    assert s.sqlite_synchronous is SqliteSynchronous.FULL
    assert Settings.load(timeline_store="memory").store == "memory"  # plain strings too
    assert Settings.load(timeline_store="auto").store is StoreName.SQL


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("timeline_store", "'auto', 'memory', 'sql' or 'redis'"),
        ("sqlite_synchronous", "'normal' or 'full'"),
    ],
)
def test_a_bad_choice_names_the_allowed_ones(name: str, allowed: str) -> None:
    with pytest.raises(ValidationError, match=f"{name}\n  Input should be {allowed}"):
        Settings.load(**{name: "fast"})


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDINGS_DATABASE_URL", "sqlite:///x.db")
    monkeypatch.setenv("TIDINGS_GROUPS", '{"site": {"max_length": 50, "ttl_days": 7}}')
    s = Settings.load()
    assert s.database_url == "sqlite:///x.db"
    assert s.groups["site"].max_length == 50
    assert s.groups["site"].ttl_ms == 7 * 86_400_000
    assert "user" in s.groups  # defaults are kept


def test_toml_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "tidings.toml"
    path.write_text('namespace = "shop"\n[groups.timeline]\nmax_length = 200\n')
    monkeypatch.setenv("TIDINGS_CONFIG", str(path))
    s = Settings.load()
    assert s.namespace == "shop"
    assert s.groups["timeline"].max_length == 200


@pytest.mark.parametrize(
    "bad",
    [
        {"groups": {"Bad-Name": {}}},
        {"groups": {"x": {"max_length": 0}}},
        {"groups": {"x": {"kind": "weird"}}},
        {"delivery_chunk_size": 0},
        {"namespace": "has space"},
        {"unknown_setting": 1},
    ],
)
def test_invalid_settings(bad: dict[str, object]) -> None:
    with pytest.raises((ValidationError, ValueError)):
        Settings.load(**bad)
