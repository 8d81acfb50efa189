from pathlib import Path

import pytest
from pydantic import ValidationError

from tidings.core.feeds import FeedKind
from tidings.settings import Settings


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
