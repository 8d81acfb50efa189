"""The HTTP page bench with each asyncio Redis client for the page script, interleaved.

``python -m bench --only page-client``: the same wrk load as bench 5 (1,000
feeds, 2 uvicorn workers, uvloop + httptools, 32 connections, 10 s), run in
rounds that alternate the client the workers await the page script on (A B B A
B A A B): the hand-written one of ``tidings.stores.redis.aio`` and redis-py's
``redis.asyncio`` (hiredis parser). Both rounds go through the same app factory
(:func:`app`), which swaps only the store's async reader, so the difference is
the client. Each round also runs ``/v1/ping`` first, the ceiling of that
moment: other jobs on the machine shift both, the ratio page/ping less so.
"""

from __future__ import annotations

import contextlib
import gc
import os
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis.asyncio
from fastapi import FastAPI
from redis.exceptions import NoScriptError
from redis.utils import HIREDIS_AVAILABLE
from starlette.concurrency import run_in_threadpool

from bench import http
from bench.harness import RedisServer, Row, engine
from tidings import Settings, Tidings
from tidings.http import auth
from tidings.http.app import create_app
from tidings.stores.redis.stores import RedisTimelineStore

#: Read by :func:`app` in the uvicorn workers (bench only, hence not TIDINGS_*).
CLIENT_VARIABLE = "BENCH_PAGE_CLIENT"
HAND_WRITTEN = "hand-written"
REDIS_ASYNCIO = "redis.asyncio"
#: Counterbalanced, so a drift in the machine's load favours neither.
_ABBA = (HAND_WRITTEN, REDIS_ASYNCIO, REDIS_ASYNCIO, HAND_WRITTEN)
ORDER = _ABBA + _ABBA[::-1]


class RedisAsyncioScripts:
    """``AsyncScripts.call`` on a ``redis.asyncio`` client (one event loop: a worker's)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def call(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return await self.client.evalsha(script.sha, len(keys), *keys, *args)
        except NoScriptError:
            script.sha = (await self.client.script_load(script.script)).decode()
            return await self.client.evalsha(script.sha, len(keys), *keys, *args)

    def close(self) -> None:
        """Closed by :func:`app`'s lifespan, on the loop that opened the connections."""


def app() -> FastAPI:
    """``uvicorn --factory bench.page_client:app``: the app of ``tidings serve``, its
    timeline store's async reader chosen by ``BENCH_PAGE_CLIENT``."""
    settings = Settings.load()
    eng = Tidings(settings)
    swapped: RedisAsyncioScripts | None = None
    if os.environ.get(CLIENT_VARIABLE) == REDIS_ASYNCIO:
        assert HIREDIS_AVAILABLE, "redis.asyncio would parse replies in Python"
        timeline = eng.timeline
        assert isinstance(timeline, RedisTimelineStore)
        assert timeline._async is not None
        assert settings.redis_url is not None
        timeline._async.close()
        swapped = RedisAsyncioScripts(redis.asyncio.Redis.from_url(settings.redis_url))
        timeline._async = swapped  # type: ignore[assignment]
    application = create_app(eng)
    inner = application.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: FastAPI) -> AsyncIterator[Any]:
        async with inner(a) as state:
            yield state
        if swapped is not None:
            await swapped.client.aclose()
        await run_in_threadpool(eng.close)

    application.router.lifespan_context = lifespan
    gc.freeze()  # as tidings.http.server.app does
    return application


@dataclass
class Round:
    client: str
    loadavg: tuple[float, float, float]
    ping: http.WrkResult
    page: http.WrkResult


def run(server: RedisServer, load: http.Load, order: Sequence[str] = ORDER) -> list[Row]:
    wrk = http.wrk_executable()
    if wrk is None:
        print("  page-client: SKIPPED, wrk not found (apt-get install wrk)", flush=True)
        return []
    variant = next(v for v in http.variants() if v.name == "uvloop+httptools")
    secret = secrets.token_urlsafe(32)
    token = auth.mint(secret, "*", server=True)
    tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-page-client-"))
    rounds: list[Round] = []
    try:
        feeds_lua = tmp / "feeds.lua"
        feeds_lua.write_text(http.feeds_script(token, load.feeds))
        ping_lua = tmp / "ping.lua"
        ping_lua.write_text(http._DONE)
        with engine("redis", server) as eng:
            feeds = http.seed(eng, load)
            settings = {
                "TIDINGS_DATABASE_URL": eng.settings.database_url,
                "TIDINGS_REDIS_URL": server.url,
                "TIDINGS_TIMELINE_STORE": "redis",
                "TIDINGS_SECRET": secret,
            }
            redis_pid = {"redis": server.proc.pid} if server.proc is not None else {}
            for n, client in enumerate(order, 1):
                loadavg = os.getloadavg()
                print(f"  round {n} [{client}], load average {loadavg_text(loadavg)}", flush=True)
                env = settings | {CLIENT_VARIABLE: client}
                factory = f"{__name__}:{app.__name__}"
                with http.uvicorn(env, load.workers, variant, tmp, factory=factory) as srv:
                    path = "/v1/feeds/" + feeds[0].replace(":", "/")
                    page = http.get_json(f"{srv.base}{path}?limit={http.PAGE}", token)
                    if len(page["results"]) != http.PAGE or not page["next"]:
                        raise RuntimeError(f"unexpected page from {feeds[0]}: {page}")
                    watch = srv.workers() | redis_pid
                    ping_url = f"{srv.base}/v1/ping"
                    http.run_wrk(wrk, srv.base, feeds_lua, load, load.warmup_seconds, watch)
                    ping = http.run_wrk(wrk, ping_url, ping_lua, load, load.seconds, watch)
                    paged = http.run_wrk(wrk, srv.base, feeds_lua, load, load.seconds, watch)
                    http.report("page", http.Variant(client, ()), paged)
                    rounds.append(Round(client, loadavg, ping, paged))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary(rounds)
    return rows(rounds, load)


def loadavg_text(loadavg: Sequence[float]) -> str:
    return " ".join(f"{x:.2f}" for x in loadavg)


def summary(rounds: Sequence[Round]) -> None:
    print("  | round | client | load avg (1 min) | other CPU | ping req/s | page req/s | p99 ms |")
    for n, r in enumerate(rounds, 1):
        print(
            f"  | {n} | {r.client} | {r.loadavg[0]:.2f} | {r.page.other_share:.0%} | "
            f"{r.ping.rate:,.0f} | {r.page.rate:,.0f} | {r.page.p99_ms:.1f} |"
        )


def rows(rounds: Sequence[Round], load: http.Load) -> list[Row]:
    name = f"http GET page {http.PAGE}, {load.connections} conns, {load.workers} workers"
    out: list[Row] = []
    rates: dict[str, float] = {}
    for client in (HAND_WRITTEN, REDIS_ASYNCIO):
        mine = [r for r in rounds if r.client == client]
        if not mine:
            continue
        size = f"{load.seconds} s, {load.feeds:,} feeds, median of {len(mine)} rounds"
        rate = rates[client] = statistics.median(r.page.rate for r in mine)
        detail = {
            "rounds": [
                {
                    "round": rounds.index(r) + 1,
                    "loadavg": r.loadavg,
                    "other_processes_cpu_share": r.page.other_share,
                    "ping_rate": r.ping.rate,
                    "page_rate": r.page.rate,
                    "p50_ms": r.page.p50_ms,
                    "p99_ms": r.page.p99_ms,
                    "errors": r.page.errors,
                    "worker_cpu_ms_per_request": r.page.worker_cpu_ms,
                }
                for r in mine
            ]
        }
        store = f"redis, {client} client"
        out.append(Row(name, store, size, rate, "requests/s", detail=detail))
        p99 = statistics.median(r.page.p99_ms for r in mine)
        out.append(Row(f"{name}, p99", store, size, p99, "ms"))
        cpu = statistics.median(r.page.worker_cpu_ms for r in mine)
        out.append(Row(f"{name}, worker CPU per request", store, size, cpu, "ms"))
    if len(rates) == 2:
        ratio = rates[HAND_WRITTEN] / rates[REDIS_ASYNCIO]
        out.append(Row("http page req/s, hand-written ÷ redis.asyncio", "redis", "", ratio, ""))
    return out


def timed_run(server: RedisServer, quick: bool) -> list[Row]:
    started = time.perf_counter()
    found = run(server, http.QUICK if quick else http.FULL, ORDER[:2] if quick else ORDER)
    print(f"  page-client: {time.perf_counter() - started:.0f} s", flush=True)
    return found
