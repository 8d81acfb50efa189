"""The ``tidings`` command line, driven in-process with typer's CliRunner.

Every test gets its own SQLite file (conftest clears ``TIDINGS_*`` variables,
so nothing leaks in from the developer's environment). ``serve`` runs for
real once, in a subprocess; elsewhere ``uvicorn.run`` is replaced.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import jwt
import orjson
import pytest
import uvicorn
from sqlalchemy import create_engine, update
from typer.testing import CliRunner, Result

from http_server import tidings_serve
from tidings import Settings, Tidings
from tidings.canonical import migrations
from tidings.canonical.schema import feed_reads
from tidings.cli.app import app
from tidings.cli.demo import DEFAULT_ACTIVITIES, DEFAULT_FANS, DEFAULT_USERS, make_plan
from tidings.cli.render import ago
from tidings.cli.serve import parse_ttl
from tidings.core.errors import ValidationError
from tidings.http.auth import Principal, verify
from tidings.http.server import HttpProtocol, WebSocketProtocol

NOW = datetime(2026, 1, 1, tzinfo=UTC)
runner = CliRunner()


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def cli(db_url: str, *args: str) -> Result:
    return runner.invoke(app, ["--database-url", db_url, *args])


def ok(db_url: str, *args: str) -> Result:
    result = cli(db_url, *args)
    assert result.exit_code == 0, result.output
    return result


def add(db_url: str, feed: str, obj: str, *more: str) -> dict[str, Any]:
    actor = feed.partition(":")[2]
    result = ok(db_url, "add", feed, "--actor", actor, "--verb", "post", "--object", obj, *more)
    stored: dict[str, Any] = orjson.loads(result.stdout)
    return stored


def read_json(db_url: str, feed: str, *more: str) -> dict[str, Any]:
    page: dict[str, Any] = orjson.loads(ok(db_url, "read", feed, "--json", *more).stdout)
    return page


def ids(page: dict[str, Any]) -> list[str]:
    return [a["id"] for a in page["results"]]


# -- add / read / follow / unfollow -------------------------------------------


def test_add_follow_read_unfollow_round_trip(db_url: str) -> None:
    first = add(db_url, "user:bob", "photo:1", "--extra", '{"caption": "dawn"}')
    assert first["actor"] == "bob"
    assert first["extra"] == {"caption": "dawn"}
    assert first["time"].endswith("Z")

    assert (
        "timeline:alice now follows user:bob"
        in ok(db_url, "follow", "timeline:alice", "user:bob").stdout
    )
    assert ids(read_json(db_url, "timeline:alice")) == [first["id"]]  # copied on follow

    second = add(db_url, "user:bob", "photo:2")
    # Sync delivery: the follower has it as soon as `add` returns.
    assert ids(read_json(db_url, "timeline:alice")) == [second["id"], first["id"]]

    assert "already follows" in ok(db_url, "follow", "timeline:alice", "user:bob").stdout
    assert "no longer follows" in ok(db_url, "unfollow", "timeline:alice", "user:bob").stdout
    assert read_json(db_url, "timeline:alice") == {"results": [], "next": None}
    assert "was not following" in ok(db_url, "unfollow", "timeline:alice", "user:bob").stdout


def test_unfollow_keep_history_and_copy_limit(db_url: str) -> None:
    for n in range(3):
        add(db_url, "user:bob", f"photo:{n}")
    ok(db_url, "follow", "timeline:alice", "user:bob", "--copy-limit", "2")
    assert len(ids(read_json(db_url, "timeline:alice"))) == 2
    ok(db_url, "unfollow", "timeline:alice", "user:bob", "--keep-history")
    assert len(ids(read_json(db_url, "timeline:alice"))) == 2


def test_reclassify_moves_sources_between_push_and_pull(db_url: str) -> None:
    for fan in ("alice", "carol", "dave"):
        ok(db_url, "follow", f"timeline:{fan}", "user:bob")
    ok(db_url, "follow", "timeline:alice", "user:erin")
    idle_line = "0 follower feed(s) newly idle (not read for 30 days)"
    assert ok(db_url, "reclassify").stdout.splitlines() == ["0 source(s) reclassified", idle_line]
    out = ok(db_url, "reclassify", "--threshold", "2").stdout
    assert out.splitlines() == ["user:bob: push -> pull", "1 source(s) reclassified", idle_line]
    pulled = add(db_url, "user:bob", "photo:1")
    assert ids(read_json(db_url, "timeline:carol")) == [pulled["id"]]  # merged at read time
    assert "0 source(s)" in ok(db_url, "reclassify", "--threshold", "2").stdout
    ok(db_url, "unfollow", "timeline:dave", "user:bob")
    ok(db_url, "unfollow", "timeline:carol", "user:bob")
    out = ok(db_url, "reclassify", "--threshold", "2").stdout
    assert out.splitlines()[:2] == ["user:bob: pull -> push", "1 source(s) reclassified"]
    assert ids(read_json(db_url, "timeline:alice")) == [pulled["id"]]  # copied back in
    assert cli(db_url, "reclassify", "--threshold", "-1").exit_code == 2


def test_reclassify_idles_followers_who_stopped_reading(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given "inactive" meaning an hour without a read, and alice's last read
    # two hours ago (each command is an engine of its own, on the real clock:
    # her recorded read is moved back instead of waiting)
    monkeypatch.setenv("TIDINGS_INACTIVE_DAYS", str(1 / 24))
    ok(db_url, "follow", "timeline:alice", "user:bob")
    ok(db_url, "follow", "timeline:carol", "user:bob")
    first = add(db_url, "user:bob", "photo:1")
    read_json(db_url, "timeline:alice")
    read_json(db_url, "timeline:carol")
    engine = create_engine(db_url)
    with engine.begin() as conn:
        moved = conn.execute(
            update(feed_reads)
            .where(feed_reads.c.feed == "timeline:alice")
            .values(read_ms=feed_reads.c.read_ms - 2 * 3_600_000)
        )
        assert moved.rowcount == 1
    engine.dispose()
    # When reclassify runs, alice's feed goes idle; carol, who just read, stays
    out = ok(db_url, "reclassify").stdout.splitlines()
    assert out[-1] == f"1 follower feed(s) newly idle (not read for {1 / 24:g} days)"
    # Then what she reads is still complete
    second = add(db_url, "user:bob", "photo:2")
    assert ids(read_json(db_url, "timeline:alice")) == [second["id"], first["id"]]
    assert ids(read_json(db_url, "timeline:carol")) == [second["id"], first["id"]]


def test_add_with_every_option(db_url: str) -> None:
    stored = add(
        db_url,
        "user:bob",
        "comment:1",
        "--target",
        "photo:9",
        "--to",
        "notification:carol",
        "--to",
        "notification:dan",
        "--time",
        "2024-05-01T12:00:00+02:00",
        "--foreign-id",
        "c1",
    )
    assert stored["target"] == "photo:9"
    assert stored["to"] == ["notification:carol", "notification:dan"]
    assert stored["time"] == "2024-05-01T10:00:00Z"
    notified = read_json(db_url, "notification:dan")
    assert [a["id"] for g in notified["results"] for a in g["activities"]] == [stored["id"]]
    assert (notified["unseen"], notified["unread"]) == (1, 1)
    assert notified["results"][0]["group"] == "post:comment:1:2024-05-01"


def test_add_with_a_known_foreign_id_changes_nothing(db_url: str) -> None:
    first = add(db_url, "user:bob", "photo:1", "--foreign-id", "p1")
    again = cli(db_url, "add", "user:bob", "--actor", "bob", "--verb", "post", "--object", "x")
    assert again.exit_code == 0
    edit = ["--actor", "bob", "--verb", "edit", "--object", "photo:1", "--foreign-id", "p1"]
    result = ok(db_url, "add", "user:bob", *edit)
    assert orjson.loads(result.stdout) == first
    assert "nothing changed" in result.stderr
    assert len(ids(read_json(db_url, "user:bob"))) == 2


def test_read_pages_with_the_cursor(db_url: str) -> None:
    made = [add(db_url, "user:bob", f"photo:{n}")["id"] for n in range(3)]
    first = read_json(db_url, "user:bob", "--limit", "2")
    assert ids(first) == made[:0:-1]
    last = read_json(db_url, "user:bob", "--limit", "2", "--cursor", first["next"])
    assert ids(last) == made[:1]
    assert last["next"] is None
    table = ok(db_url, "read", "user:bob", "--limit", "2").stdout
    assert "photo:2" in table
    assert "just now" in table
    assert f"--cursor {first['next']}" in table


def test_read_of_an_empty_feed(db_url: str) -> None:
    assert "no activities" in ok(db_url, "read", "timeline:nobody").stdout


def test_table_output_is_not_rich_markup(db_url: str) -> None:
    add(db_url, "user:bob", "photo:1", "--extra", '{"text": "[bold]hi[/bold]"}')
    assert "[bold]hi[/bold]" in ok(db_url, "read", "user:bob").stdout


# -- settings -----------------------------------------------------------------


def test_database_url_from_the_environment(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDINGS_DATABASE_URL", db_url)
    result = runner.invoke(
        app, ["add", "user:bob", "--actor", "bob", "--verb", "post", "--object", "x"]
    )
    assert result.exit_code == 0, result.output
    assert len(ids(read_json(db_url, "user:bob"))) == 1
    # The option wins over the environment.
    assert read_json(f"sqlite:///{tmp_path / 'other.db'}", "user:bob")["results"] == []


def test_migrate_prints_the_schema_version(db_url: str) -> None:
    latest = migrations.LATEST
    assert f"schema version {latest} (applied {latest} step(s))" in ok(db_url, "migrate").stdout
    assert f"schema version {latest} (already up to date)" in ok(db_url, "migrate").stdout


def test_migrate_partition_says_sqlite_is_not_partitioned(db_url: str) -> None:
    result = cli(db_url, "migrate", "--partition")
    assert result.exit_code == 2
    assert "partitioning is for PostgreSQL databases" in " ".join(result.stderr.split())


# -- errors -------------------------------------------------------------------

LONG_VERB = "v" * 65


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["read", "bob"], "feed id 'bob' must be 'group:key'"),
        (["read", "nope:bob"], "unknown feed group 'nope'"),
        (["read", "user:bob", "--cursor", "garbage!"], "--cursor: cursor is not valid base64url"),
        (["read", "user:bob", "--cursor", "AAAAAAAAAAAAAAAAAAAAAAAA"], "--cursor:"),
        (["read", "user:bob", "--limit", "0"], "--limit: must be an integer from 1 to 100"),
        (
            ["add", "user:b", "--actor", "b", "--verb", LONG_VERB, "--object", "o"],
            "--verb: is 65 characters; the limit is 64",
        ),
        (["add", "user:b", "--actor", " ", "--verb", "v", "--object", "o"], "--actor: must not"),
        (
            ["add", "user:b", "--actor", "b", "--verb", "v", "--object", "o", "--extra", "{x"],
            "--extra: is not valid JSON",
        ),
        (
            ["add", "user:b", "--actor", "b", "--verb", "v", "--object", "o", "--extra", "[1]"],
            "--extra: must be a JSON object",
        ),
        (
            [
                "add",
                "user:b",
                "--actor",
                "b",
                "--verb",
                "v",
                "--object",
                "o",
                "--time",
                "2024-01-01",
            ],
            "--time: naive time",
        ),
        (
            ["add", "user:b", "--actor", "b", "--verb", "v", "--object", "o", "--to", "x"],
            "--to: feed id 'x' must be 'group:key'",
        ),
        (["follow", "timeline:a", "timeline:a"], "a feed cannot follow itself"),
        (["follow", "timeline:a", "user:b", "--copy-limit", "5000"], "--copy-limit: must be"),
        (["unfollow", "timeline:a", "user:bad feed"], "feed key 'bad feed' must be"),
        (["demo", "--users", "3"], "--users: must be at least 10"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(db_url: str, args: list[str], message: str) -> None:
    result = cli(db_url, *args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert message in " ".join(result.stderr.split())  # rich wraps long lines
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_a_cursor_of_another_feed_is_refused(db_url: str) -> None:
    for n in range(2):
        add(db_url, "user:bob", f"photo:{n}")
    cursor = read_json(db_url, "user:bob", "--limit", "1")["next"]
    result = cli(db_url, "read", "user:ann", "--cursor", cursor)
    assert result.exit_code == 2
    assert "made for another feed" in result.stderr


def test_bad_settings_exit_2(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDINGS_DELIVERY_CHUNK_SIZE", "0")
    result = cli(db_url, "read", "user:bob")
    assert result.exit_code == 2
    assert "invalid settings: delivery_chunk_size" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("url", "message"),
    [("not a url", "invalid database URL"), ("mysql://h/db", "unsupported database 'mysql'")],
)
def test_bad_database_url_exits_2(url: str, message: str) -> None:
    result = cli(url, "read", "user:bob")
    assert result.exit_code == 2
    assert message in result.stderr


def test_unreachable_database_exits_1(tmp_path: Path) -> None:
    result = cli(f"sqlite:///{tmp_path / 'missing' / 'dir' / 'x.db'}", "read", "user:bob")
    assert result.exit_code == 1
    assert "store unavailable: unable to open database file" in result.stderr
    assert "Traceback" not in result.output


# -- demo ---------------------------------------------------------------------

SMALL_DEMO = ("demo", "--users", "30", "--activities", "200", "--fans", "60", "--no-serve")


def test_demo_seeds_shows_feeds_and_reuses_its_dataset(db_url: str) -> None:
    first = ok(db_url, *SMALL_DEMO).stdout
    for text in ("what a follower of", "most followed", "a fan's timeline", "notification:"):
        assert text in first
    assert "200 drained" in first
    assert "reused" not in first
    assert "curl -s" in first

    again = ok(db_url, *SMALL_DEMO).stdout
    assert "0 drained" in again
    assert "reused" in again

    plan = make_plan(30, 200, 7, fans=60, now=NOW)
    star = plan.celebrities[0]
    assert read_json(db_url, f"user:{star}")["results"], "the celebrity has activities"
    assert read_json(db_url, f"notification:{star}")["results"]


def test_demo_plan_has_celebrities_with_10000_followers() -> None:
    plan = make_plan(DEFAULT_USERS, DEFAULT_ACTIVITIES, 7, fans=DEFAULT_FANS, now=NOW)
    followers = Counter(source for _, source in plan.follows)
    assert len(plan.users) >= 1_000
    assert len(plan.activities) >= 20_000
    assert len(plan.celebrities) == 3
    assert min(followers[f"user:{c}"] for c in plan.celebrities) >= 10_000
    assert len(set(plan.follows)) == len(plan.follows)
    times = [activity["time"] for _, activity in plan.activities]
    assert times == sorted(times)
    assert NOW - timedelta(days=30) <= times[0]
    assert times[-1] <= NOW
    assert len({a["foreign_id"] for _, a in plan.activities}) == len(plan.activities)
    verbs = Counter(a["verb"] for _, a in plan.activities)
    assert set(verbs) == {"post", "like", "comment", "share"}
    assert any(a.get("to") for _, a in plan.activities)


def test_demo_plan_is_reproducible() -> None:
    one = make_plan(40, 300, 3, fans=50, now=NOW)
    later = make_plan(40, 300, 3, fans=50, now=NOW + timedelta(hours=1))
    assert one.follows == later.follows
    strip = [(f, {k: v for k, v in a.items() if k != "time"}) for f, a in one.activities]
    assert strip == [(f, {k: v for k, v in a.items() if k != "time"}) for f, a in later.activities]
    # Fans have their own random stream: more fans leave the activities as they were.
    assert make_plan(40, 300, 3, fans=80, now=NOW).activities == one.activities


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=10), "just now"),
        (timedelta(seconds=50), "50s ago"),
        (timedelta(minutes=5), "5m ago"),
        (timedelta(hours=3, minutes=59), "3h ago"),
        (timedelta(days=2), "2d ago"),
        (-timedelta(hours=2), "in 2h"),
        (timedelta(days=400), "2024-11-27"),
    ],
)
def test_ago(delta: timedelta, text: str) -> None:
    assert ago(NOW - delta, NOW) == text


# -- tokens -------------------------------------------------------------------

SECRET = "s" * 40


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TIDINGS_SECRET", SECRET)
    return SECRET


def claims(token: str) -> dict[str, Any]:
    decoded: dict[str, Any] = jwt.decode(token, SECRET, algorithms=["HS256"])
    return decoded


def test_user_token_round_trips_and_expires_in_an_hour(db_url: str, secret: str) -> None:
    token = ok(db_url, "token", "alice").stdout.strip()
    principal = verify(secret, f"Bearer {token}")
    assert (principal.subject, principal.server) == ("alice", False)
    got = claims(token)
    assert got["exp"] - got["iat"] == 3_600


def test_server_token_round_trips_and_does_not_expire(db_url: str, secret: str) -> None:
    token = ok(db_url, "token", "--server").stdout.strip()
    principal = verify(secret, f"Bearer {token}")
    assert (principal.subject, principal.server) == ("*", True)
    assert "exp" not in claims(token)


@pytest.mark.parametrize(
    ("args", "seconds"),
    [
        (["alice", "--ttl", "30s"], 30),
        (["alice", "--ttl", "15m"], 900),
        (["--server", "--ttl", "7d"], 7 * 86_400),
        (["alice", "--ttl", "none"], None),
    ],
)
def test_token_ttl(db_url: str, secret: str, args: list[str], seconds: int | None) -> None:
    got = claims(ok(db_url, "token", *args).stdout.strip())
    assert (got["exp"] - got["iat"] if "exp" in got else None) == seconds


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("15m", 900), ("1h", 3_600), ("7d", 604_800), ("none", None)]
)
def test_parse_ttl(text: str, seconds: int | None) -> None:
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", ["1_0s", "\u0665s", "+5s", "5 s", "0s", "1y", ""])
def test_parse_ttl_takes_ascii_digits_only(text: str) -> None:
    with pytest.raises(ValidationError, match="not a duration"):
        parse_ttl(text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["token", "alice"], "no secret to sign tokens with: set TIDINGS_SECRET"),
        (["token"], "give either USER or --server"),
        (["token", "alice", "--server"], "give either USER or --server"),
        (["token", "bad user"], "USER: must be a feed key"),
        (["token", "alice", "--ttl", "1y"], "--ttl: '1y' is not a duration like 30s"),
        (["token", "alice", "--ttl", "0s"], "--ttl: '0s' is not a duration"),
    ],
)
def test_token_bad_input_exits_2(db_url: str, args: list[str], message: str) -> None:
    result = cli(db_url, *args)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())
    assert result.stdout == ""


def test_a_short_secret_is_refused(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDINGS_SECRET", "too-short")
    result = cli(db_url, "token", "--server")
    assert result.exit_code == 2
    assert "is 9 characters; it must be at least 32" in " ".join(result.stderr.split())


# -- serve --------------------------------------------------------------------


@pytest.fixture
def uvicorn_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """What ``uvicorn.run`` was called with (it serves nothing), with the
    ``TIDINGS_*`` variables it would hand to workers; those are undone after."""
    before = {k: v for k, v in os.environ.items() if k.startswith("TIDINGS_")}
    calls: list[dict[str, Any]] = []

    def run(app: str, **options: Any) -> None:
        env = {k: v for k, v in os.environ.items() if k.startswith("TIDINGS_")}
        calls.append({"app": app, **options, "env": env})

    monkeypatch.setattr(uvicorn, "run", run)
    yield calls
    for name in [k for k in os.environ if k.startswith("TIDINGS_")]:
        del os.environ[name]
    os.environ.update(before)


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        (None, "no secret to sign tokens with: set TIDINGS_SECRET"),
        ("x" * 31, "is 31 characters; it must be at least 32"),
    ],
)
def test_serve_refuses_without_a_good_secret(
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    uvicorn_calls: list[dict[str, Any]],
    secret: str | None,
    message: str,
) -> None:
    if secret is not None:
        monkeypatch.setenv("TIDINGS_SECRET", secret)
    result = cli(db_url, "serve")
    assert result.exit_code == 2
    stderr = " ".join(result.stderr.split())
    assert message in stderr
    assert "Traceback" not in result.output
    assert uvicorn_calls == []
    if secret is None:
        assert "tidings serve --dev" in stderr


def test_serve_without_an_access_log(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    # Given --no-access-log (a log line per request costs a worker CPU under load)
    result = cli(db_url, "serve", "--no-access-log")
    # Then uvicorn is told to write none
    assert result.exit_code == 0, result.output
    [call] = uvicorn_calls
    assert call["access_log"] is False


def test_serve_hands_its_settings_to_the_workers(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    redis_url = "redis://localhost:1/0"  # never connected to: the store is SQL
    options = ["--database-url", db_url, "--redis-url", redis_url]
    serve = ["serve", "--workers", "2", "--port", "8123", "--host", "0.0.0.0"]
    result = runner.invoke(app, [*options, *serve], env={"TIDINGS_TIMELINE_STORE": "sql"})
    assert result.exit_code == 0, result.output
    [call] = uvicorn_calls
    env = call.pop("env")
    protocol = call.pop("http")
    assert call == {
        "app": "tidings.http.server:app",
        "factory": True,
        "host": "0.0.0.0",
        "port": 8123,
        "workers": 2,
        "log_level": "info",
        "access_log": True,
        "timeout_keep_alive": 5.0,
        "limit_concurrency": 1000,
        "timeout_graceful_shutdown": 10.0,
        "timeout_worker_healthcheck": 30,
        "ws": WebSocketProtocol,
    }
    limits = {"header_timeout": 10.0, "max_header_bytes": 65_536}
    assert (protocol.func, protocol.keywords) == (HttpProtocol, limits)
    assert env["TIDINGS_DATABASE_URL"] == db_url
    assert env["TIDINGS_REDIS_URL"] == redis_url
    assert env["TIDINGS_SECRET"] == secret
    assert "serving http://127.0.0.1:8123 (2 workers)" in result.stdout
    assert secret not in result.stdout
    assert Path(db_url.removeprefix("sqlite:///")).exists(), "migrated before the workers start"


def test_serve_connection_limits_come_from_options_over_settings(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDINGS_HTTP_KEEPALIVE_SECONDS", "7")
    monkeypatch.setenv("TIDINGS_HTTP_MAX_CONNECTIONS", "50")
    monkeypatch.setenv("TIDINGS_HTTP_MAX_HEADER_BYTES", "4096")
    ok(db_url, "serve", "--header-timeout", "2.5", "--max-connections", "20")
    ok(db_url, "serve", "--max-header-bytes", "8192")
    from_env, from_option = uvicorn_calls
    assert (from_env["timeout_keep_alive"], from_env["limit_concurrency"]) == (7.0, 20)
    assert from_env["http"].keywords == {"header_timeout": 2.5, "max_header_bytes": 4096}
    assert from_option["http"].keywords["max_header_bytes"] == 8192


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--keepalive", "0"),
        ("--header-timeout", "3601"),
        ("--max-connections", "0"),
        ("--max-header-bytes", "1000"),
    ],
)
def test_serve_refuses_connection_limits_out_of_range(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]], option: str, value: str
) -> None:
    result = cli(db_url, "serve", option, value)
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.stderr
    assert uvicorn_calls == []


def test_serve_dev_generates_a_secret_for_the_workers(
    db_url: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    result = ok(db_url, "serve", "--dev")
    [call] = uvicorn_calls
    generated = call["env"]["TIDINGS_SECRET"]
    assert len(generated) >= 32
    assert f"secret        {generated}" in result.stdout
    assert f"TIDINGS_SECRET={generated} tidings token alice --ttl 1h" in result.stdout
    token = re.search(r"server token\s+(\S+)", result.stdout)
    assert token is not None
    assert verify(generated, f"Bearer {token[1]}").server


def test_serve_dev_keeps_a_configured_secret(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    result = ok(db_url, "serve", "--dev")
    assert uvicorn_calls[0]["env"]["TIDINGS_SECRET"] == secret
    assert secret not in result.stdout
    assert "tidings token alice --ttl 1h" in result.stdout


@pytest.mark.timeout(60)
def test_serve_dev_serves_the_api_until_interrupted(tmp_path: Path) -> None:
    with tidings_serve(tmp_path) as served:
        token = re.search(r"server token\s+(\S+)", served.stdout.read_text())
        assert token is not None, served.stdout.read_text()
        feed = f"{served.url}/v1/feeds/timeline/alice"
        page = httpx.get(feed, headers={"Authorization": f"Bearer {token[1]}"}, timeout=5)
        assert page.status_code == 200, page.text
        assert page.json() == {"results": [], "next": None}
        assert httpx.get(feed, timeout=5).status_code == 401
    assert "Application shutdown complete" in served.stderr.read_text()


# -- demo and the API ---------------------------------------------------------

DEMO_WITH_SERVER = SMALL_DEMO[:-1]


def bearer_tokens(text: str) -> list[str]:
    return re.findall(r"Authorization: Bearer ([\w.-]+)", text)


def test_demo_prints_curl_lines_with_real_tokens(
    db_url: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    output = ok(db_url, *SMALL_DEMO).stdout
    assert uvicorn_calls == [], "--no-serve serves nothing"
    found = re.search(r"TIDINGS_SECRET=(\S+) tidings --database-url=\S+ serve --port 8000", output)
    assert found is not None, output
    generated = found[1]
    curls = [line for line in output.splitlines() if line.startswith("curl ")]
    assert len(curls) >= 4
    assert all("http://127.0.0.1:8000/v1/feeds/" in line for line in curls)
    principals = {verify(generated, f"Bearer {t}") for t in bearer_tokens(output)}
    users = {p.subject for p in principals if not p.server}
    assert len(users) == 1
    assert Principal("*", server=True) in principals
    [user] = users
    assert f"/v1/feeds/timeline/{user}?limit=3" in output
    assert f'"actor":"{user}"' in output
    assert "-X POST" in output


def test_demo_serves_the_api_with_the_secret_of_its_tokens(
    db_url: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    output = ok(db_url, *DEMO_WITH_SERVER, "--port", "8123").stdout
    [call] = uvicorn_calls
    assert (call["host"], call["port"], call["workers"]) == ("127.0.0.1", 8123, 1)
    assert call["env"]["TIDINGS_DATABASE_URL"] == db_url
    generated = call["env"]["TIDINGS_SECRET"]
    tokens = bearer_tokens(output)
    assert tokens
    for token in tokens:
        verify(generated, f"Bearer {token}")
    assert "http://127.0.0.1:8123/v1/feeds/" in output
    assert "serving until Ctrl-C" in output


def test_demo_uses_a_configured_secret(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    output = ok(db_url, *SMALL_DEMO).stdout
    assert secret not in output
    for token in bearer_tokens(output):
        verify(secret, f"Bearer {token}")
    assert "tidings --database-url=" in output
    assert "TIDINGS_SECRET=" not in output


def test_rebuild_restores_feeds_from_the_canonical_store(db_url: str) -> None:
    ok(db_url, "follow", "timeline:alice", "user:bob")
    first = add(db_url, "user:bob", "photo:1")
    out = ok(db_url, "rebuild", "--all").stdout
    # user:bob and timeline:alice: the feeds the canonical store knows of.
    assert "2 feed(s) rebuilt" in out
    assert ids(read_json(db_url, "timeline:alice")) == [first["id"]]
    assert "1 feed(s) rebuilt" in ok(db_url, "rebuild", "timeline:alice").stdout
    refused = cli(db_url, "rebuild")
    assert refused.exit_code == 2
    assert "--all" in refused.output
    # --since: the feeds written to lately (both, written a moment ago)
    assert "2 feed(s) rebuilt" in ok(db_url, "rebuild", "--since", "10m").stdout
    assert ids(read_json(db_url, "timeline:alice")) == [first["id"]]
    wrong = cli(db_url, "rebuild", "--since", "a while")
    assert wrong.exit_code != 0
    assert "not a duration like 30s" in wrong.output
    assert cli(db_url, "rebuild", "--all", "--since", "1h").exit_code == 2


# -- the web app ------------------------------------------------------------------


def test_demo_creates_its_people_and_ranked_timelines(db_url: str) -> None:
    ok(db_url, *SMALL_DEMO)
    plan = make_plan(30, 200, 7, fans=60, now=NOW)
    reader = plan.first_follower(f"user:{plan.celebrities[0]}", "timeline:u")
    assert reader is not None
    user = reader.partition(":")[2]
    assert read_json(db_url, f"timeline_ranked:{user}")["results"], "seeded like the flat one"
    handles = {p.handle for p in plan.people}
    assert len(handles) == len(plan.people) == 30, "one distinct handle each"
    person = plan.people[0]
    assert person.profile["avatar"] == f"/app/avatars/{person.id}.svg"
    assert " " in person.name
    # The newest posts carry likes and comments, as reactions with counts.
    assert {kind for _, kind, _, _ in plan.reactions} == {"like", "comment"}
    with Tidings(Settings(database_url=db_url), task_runner="manual") as engine:
        n = plan.reactions[-1][0]
        feed, post = plan.activities[n]
        held = engine.get_activity((feed, post["foreign_id"]))
        counts = engine.reactions.counts([held.id])[held.id]
        wanted = Counter(kind for m, kind, _, _ in plan.reactions if m == n)
        assert counts == dict(wanted)


def test_demo_serves_the_web_app_with_its_development_sign_in(
    db_url: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    output = ok(db_url, *DEMO_WITH_SERVER, "--port", "8123").stdout
    [call] = uvicorn_calls
    env = call["env"]
    assert env["TIDINGS_WEB_APP"] == "true"
    assert env["TIDINGS_WEB_APP_DEV_SIGN_IN"] == "true"
    offered = env["TIDINGS_WEB_APP_USERS"].split(",")
    plan = make_plan(30, 200, 7, fans=60, now=NOW)
    assert plan.celebrities[0] in offered
    assert set(offered) <= set(plan.users)
    assert "open http://127.0.0.1:8123/ in a browser" in output


@pytest.mark.parametrize(
    ("options", "dev_sign_in"), [(("--app",), "false"), (("--app", "--dev"), "true")]
)
def test_serve_app_serves_the_web_app_and_mints_tokens_only_with_dev(
    db_url: str,
    secret: str,
    uvicorn_calls: list[dict[str, Any]],
    options: tuple[str, ...],
    dev_sign_in: str,
) -> None:
    output = ok(db_url, "serve", *options).stdout
    [call] = uvicorn_calls
    assert call["env"]["TIDINGS_WEB_APP"] == "true"
    assert call["env"]["TIDINGS_WEB_APP_DEV_SIGN_IN"] == dev_sign_in
    assert "web app       http://127.0.0.1:8000/" in output


def test_serve_without_app_serves_no_web_app(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]]
) -> None:
    ok(db_url, "serve")
    assert "TIDINGS_WEB_APP" not in uvicorn_calls[0]["env"]


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
def test_the_development_sign_in_serves_only_on_loopback(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]], host: str
) -> None:
    result = cli(db_url, "serve", "--app", "--dev", "--host", host)
    assert result.exit_code == 2
    assert "loopback" in result.output
    assert uvicorn_calls == []


def test_the_development_sign_in_from_the_environment_is_held_to_loopback_too(
    db_url: str, secret: str, uvicorn_calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDINGS_WEB_APP", "true")
    monkeypatch.setenv("TIDINGS_WEB_APP_DEV_SIGN_IN", "true")
    refused = cli(db_url, "serve", "--host", "0.0.0.0")
    assert refused.exit_code == 2
    assert "loopback" in refused.output
    served = ok(db_url, "serve", "--host", "127.0.0.1").stdout
    assert "development sign-in: anyone reaching it may act as any user" in served
