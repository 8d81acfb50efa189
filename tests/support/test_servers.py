"""The private test servers start, answer, isolate tests and survive restarts."""

from __future__ import annotations

import pytest
import redis
import sqlalchemy

from servers import PostgresServer, RedisServer


@pytest.mark.redis
def test_redis_ping_set_get(redis_url: str, redis_server: RedisServer) -> None:
    assert redis_url == f"redis://127.0.0.1:{redis_server.port}/0"
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.ping() is True
        assert client.dbsize() == 0
        client.set("tidings:test", "hello")
        assert client.get("tidings:test") == b"hello"
    finally:
        client.close()


@pytest.mark.redis
def test_redis_is_flushed_between_tests(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.get("tidings:test") is None
        assert client.dbsize() == 0
    finally:
        client.close()


@pytest.mark.redis
def test_redis_restart_keeps_url() -> None:
    with RedisServer() as server:
        url = server.url
        client = redis.Redis.from_url(url)
        try:
            client.set("k", "v")
            server.restart()
            assert server.url == url
            # The old pooled connection is dead; redis-py reconnects on the same URL.
            assert redis.Redis.from_url(url).ping() is True
            assert client.ping() is True
            assert client.get("k") is None  # no persistence: a restart loses everything
        finally:
            client.close()
    assert not server.running


@pytest.mark.postgres
def test_postgres_select_one(postgres_url: str, postgres_server: PostgresServer) -> None:
    assert postgres_url.startswith(
        f"postgresql+psycopg://postgres@127.0.0.1:{postgres_server.port}/"
    )
    engine = sqlalchemy.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT 1")).scalar_one() == 1
            tables = conn.execute(
                sqlalchemy.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            ).scalar_one()
            assert tables == 0
            conn.execute(sqlalchemy.text("CREATE TABLE t (x int)"))
            conn.commit()
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_databases_are_fresh(postgres_url: str) -> None:
    engine = sqlalchemy.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                sqlalchemy.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            ).scalar_one()
            assert tables == 0
    finally:
        engine.dispose()
