"""Publishing over HTTP: 32 clients at once, SQLite only, each publish acknowledged.

Starts ``uvicorn --factory tidings.http.server:app`` on the embedded default
(SQLite canonical and timeline store, the in-process runner delivering in the
same worker) and drives ``POST /v1/feeds/user/<random user>/activities`` with
wrk: 32 connections, a server token, one activity a request. A response is
an acknowledgement: the activity and its outbox row are committed. Concurrent
requests share commits (group commit). Afterwards the bench checks that every
acknowledged activity is stored (``201`` count against the database) and
waits for the deliveries to finish.
"""

from __future__ import annotations

import secrets
import sqlite3
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from bench.harness import Row, at_least
from bench.http import _DONE as WRK_DONE
from bench.http import SEEDED, run_wrk, uvicorn, variants, wrk_executable
from bench.http import Load as HttpLoad
from tidings.http import auth

#: The issue's target, activities a second.
TARGET = 2_000.0

_POST = """
local headers = {{["Authorization"] = "Bearer {token}", ["Content-Type"] = "application/json"}}
local n = 0

function request()
  n = n + 1
  local user = string.format("u%04d", math.random(0, {users} - 1))
  local body = string.format(
    '{{"actor":"%s","verb":"post","object":"note:%d","extra":{{"text":"hello"}}}}', user, n)
  return wrk.format("POST", "/v1/feeds/user/" .. user .. "/activities", headers, body)
end
"""


@dataclass(frozen=True)
class Load:
    users: int
    seconds: int
    warmup_seconds: int
    connections: int
    threads: int
    workers: int


FULL = Load(users=2_000, seconds=10, warmup_seconds=2, connections=32, threads=2, workers=1)
QUICK = Load(users=200, seconds=2, warmup_seconds=1, connections=32, threads=2, workers=1)


def stored(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        n: int = conn.execute("SELECT count(*) FROM tidings_activities").fetchone()[0]
    return n


def pending(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        n: int = conn.execute("SELECT count(*) FROM tidings_outbox").fetchone()[0]
    return n


def run(load: Load) -> list[Row]:
    wrk = wrk_executable()
    if wrk is None:
        # A missing row would read as "not measured": say so and stop instead.
        raise RuntimeError("wrk not found: `make bench` installs it (apt-get install wrk)")
    secret = secrets.token_urlsafe(32)
    token = auth.mint(secret, "*", server=True)
    tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-publish-"))
    db = tmp / "tidings.canonical.db"
    script = tmp / "post.lua"
    script.write_text(SEEDED + _POST.format(token=token, users=load.users) + WRK_DONE)
    settings = {
        "TIDINGS_DATABASE_URL": f"sqlite:///{db}",
        "TIDINGS_TIMELINE_STORE": "sql",
        "TIDINGS_SECRET": secret,
    }
    variant = next((v for v in variants() if "uvloop" in v.name), variants()[-1])
    wrk_load = HttpLoad(
        feeds=1,
        sources=1,
        activities=0,
        seconds=load.seconds,
        warmup_seconds=load.warmup_seconds,
        connections=load.connections,
        threads=load.threads,
        workers=load.workers,
    )
    print(f"http publish: {load.connections} clients, SQLite, {variant.name}", flush=True)
    with uvicorn(settings, load.workers, variant, tmp) as server:
        url = server.base + "/"
        watch = server.workers()
        run_wrk(wrk, url, script, wrk_load, load.warmup_seconds, watch)
        before = stored(db)
        result = run_wrk(wrk, url, script, wrk_load, load.seconds, watch)
        written = stored(db) - before
        deadline = time.monotonic() + 120
        while pending(db) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = pending(db)
    acknowledged = result.requests - result.failed
    if written < acknowledged:
        raise RuntimeError(f"{acknowledged} publishes acknowledged, {written} stored")
    rate = acknowledged / result.seconds
    target, met = at_least(rate, TARGET)
    detail = {
        "acknowledged": acknowledged,
        "stored": written,
        "errors": result.errors,
        "p50_ms": result.p50_ms,
        "p99_ms": result.p99_ms,
        "variant": variant.name,
        "worker_cpu_ms_per_request": result.worker_cpu_ms,
        "pending_after_2_min": left,
    }
    print(
        f"  {rate:,.0f} publishes/s acknowledged, p50 {result.p50_ms:.1f} ms, "
        f"p99 {result.p99_ms:.1f} ms; {written:,} stored",
        flush=True,
    )
    size = f"{load.connections} clients, {load.seconds} s"
    return [
        Row(
            "HTTP publish, each acknowledged",
            "SQLite",
            size,
            rate,
            "activities/s",
            target,
            met,
            detail,
        )
    ]
