"""A private PostgreSQL and redis-server for the JS client's tests on
PostgreSQL + Redis, started with the suite's own classes (tests/support):
prints ``{"database_url": ..., "redis_url": ...}`` as one line once both
answer, and stops both when its standard input closes (the test run ended,
or died)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from servers import PostgresServer, RedisServer


def main() -> None:
    with PostgresServer() as postgres, RedisServer() as redis:
        urls = {"database_url": postgres.new_database("getstream_js"), "redis_url": redis.url}
        print(json.dumps(urls), flush=True)
        sys.stdin.read()  # until the parent closes it


if __name__ == "__main__":
    main()
