"""Publishing over HTTP to ``tidings serve --workers 2``: PostgreSQL + Redis against SQLite.

Starts ``tidings serve --workers 2`` as an operator would (uvloop and
httptools, the in-process delivery runner in each worker) on a private
PostgreSQL with a private redis-server as timeline store, then on a SQLite
file with the SQL timeline store, and drives ``POST
/v1/feeds/user/<random user>/activities`` with wrk: 32 connections, one
activity a request, each with an object of its own. Only a ``201`` is an
acknowledgement: wrk's script writes the id in its body to a file per wrk
thread, and afterwards every acknowledged id must be stored once in the
canonical store (no id missing, no activity stored twice) and every
delivery done.

While wrk runs, ``/metrics`` is scraped twice a second apart: no total may go
down between the two, and the per-process files of the server's metrics
directory must show requests served by both workers (the issue's check of a
scrape under load).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

from bench.harness import PostgresServer, RedisServer, Row, at_least, free_port
from bench.http import _DONE as WRK_DONE
from bench.http import Load as WrkLoad
from bench.http import Server, WrkResult, children, run_wrk, stop, wait_healthy, wrk_executable
from bench.http_publish import Load
from tidings.http import auth

#: The issue's target for PostgreSQL + Redis, acknowledged activities a second.
TARGET = 3_000.0
ROUTE = "/v1/feeds/{group}/{key}/activities"
REQUESTS = "tidings_http_requests_total"
#: Series that only grow: counters and the parts of histograms.
GROWING = ("_total", "_bucket", "_count", "_sum")

# Each wrk thread writes the id of every activity acknowledged (201) to a file
# of its own, line-buffered: wrk has no per-thread hook at the end to flush it.
_POST = """
local counter = 0
local headers = {{["Authorization"] = "Bearer {token}", ["Content-Type"] = "application/json"}}
local n = 0
local acked = nil

function setup(thread)
  counter = counter + 1
  thread:set("seed", counter * 7919)
  thread:set("acked_path", "{acked}" .. counter)
end

function init(args)
  math.randomseed(seed)
  acked = io.open(acked_path, "w")
  acked:setvbuf("line")
end

function request()
  n = n + 1
  local user = string.format("u%04d", math.random(0, {users} - 1))
  local body = string.format(
    '{{"actor":"%s","verb":"post","object":"note:{phase}-%d-%d","extra":{{"text":"hello"}}}}',
    user, seed, n)
  return wrk.format("POST", "/v1/feeds/user/" .. user .. "/activities", headers, body)
end

function response(status, headers, body)
  if status == 201 then
    acked:write(string.match(body, '"id":"(%x+)"'), "\\n")
  end
end
"""


FULL = Load(users=2_000, seconds=10, warmup_seconds=3, connections=32, threads=2, workers=2)
QUICK = Load(users=200, seconds=3, warmup_seconds=1, connections=32, threads=2, workers=2)


@dataclass
class Outcome:
    """What one measured run acknowledged, stored and reported."""

    result: WrkResult
    acknowledged: int
    stored: int
    pending_after: int
    scrapes: str


def run(redis: RedisServer, load: Load) -> list[Row]:
    """PostgreSQL + Redis, then SQLite, each behind ``tidings serve --workers N``."""
    wrk = wrk_executable()
    if wrk is None:
        raise RuntimeError("wrk not found: `make bench` installs it (apt-get install wrk)")
    rows: list[Row] = []
    with PostgresServer() as postgres, postgres.database() as url:
        redis.flush()
        settings = {
            "TIDINGS_DATABASE_URL": url,
            "TIDINGS_REDIS_URL": redis.url,
            "TIDINGS_TIMELINE_STORE": "redis",
        }
        extra = {"postgres": postgres.proc.pid if postgres.proc else 0, "redis": _pid(redis)}
        rows.append(measure(wrk, "PostgreSQL + Redis", settings, load, extra))
    with tempfile.TemporaryDirectory(prefix="tidings-bench-serve-") as tmp:
        settings = {
            "TIDINGS_DATABASE_URL": f"sqlite:///{tmp}/tidings.canonical.db",
            "TIDINGS_TIMELINE_STORE": "sql",
        }
        rows.append(measure(wrk, "SQLite", settings, load, {}))
    pg, lite = rows
    size = _size(load)
    rows.append(
        Row("HTTP publish, PostgreSQL + Redis / SQLite", "-", size, pg.value / lite.value, "")
    )
    return [*rows, cost_row("PostgreSQL + Redis", load, pg), cost_row("SQLite", load, lite)]


def _pid(redis: RedisServer) -> int:
    return redis.proc.pid if redis.proc is not None else 0


def _size(load: Load) -> str:
    return f"{load.connections} clients, {load.workers} workers, {load.seconds} s"


def measure(
    wrk: str, store: str, settings: dict[str, str], load: Load, servers: dict[str, int]
) -> Row:
    secret = secrets.token_urlsafe(32)
    token = auth.mint(secret, "*", server=True)
    with tempfile.TemporaryDirectory(prefix="tidings-bench-publish-") as where:
        tmp = Path(where)
        print(f"http publish: {load.connections} clients, {store}, tidings serve", flush=True)
        with tidings_serve(settings | {"TIDINGS_SECRET": secret}, load.workers, tmp) as server:
            warm = script(tmp, "warm", token, load)
            wrk_load = WrkLoad(1, 1, 0, load.seconds, load.warmup_seconds, load.connections,
                               load.threads, load.workers)  # fmt: skip
            watch = server.workers()
            run_wrk(wrk, server.base + "/", warm, wrk_load, load.warmup_seconds, watch)
            # The database's backends (opened by now) and Redis, for where the CPU goes.
            for name, pid in servers.items():
                for i, child in enumerate(children(pid) or [pid]):
                    watch[f"{name} {i + 1}"] = child
            url = settings["TIDINGS_DATABASE_URL"]
            outcome = measured(wrk, server, url, token, load, wrk_load, watch)
            outcome.pending_after = wait_delivered(url)
    return report(store, load, outcome)


def measured(
    wrk: str,
    server: Server,
    url: str,
    token: str,
    load: Load,
    wrk_load: WrkLoad,
    watch: dict[str, int],
) -> Outcome:
    """The timed run, scraped twice meanwhile; then every acknowledgement checked."""
    tmp = server.log.parent
    lua = script(tmp, "run", token, load)
    scrapes: list[str] = []
    scraper = threading.Thread(
        target=_two_scrapes, args=(server.base, load.seconds, scrapes), daemon=True
    )
    scraper.start()
    result = run_wrk(wrk, server.base + "/", lua, wrk_load, load.seconds, watch)
    scraper.join()
    verdict = check_scrapes(scrapes, tmp)
    acked = [
        line
        for path in sorted(tmp.glob("run.acked.*"))
        for line in path.read_text().splitlines()
        if line
    ]
    stored = check_stored(url, acked)
    return Outcome(result, len(acked), stored, -1, verdict)


def script(tmp: Path, name: str, token: str, load: Load) -> Path:
    path = tmp / f"{name}.lua"
    acked = str(tmp / f"{name}.acked.")
    lua = _POST.format(token=token, users=load.users, acked=acked, phase=name)
    path.write_text(lua + WRK_DONE)
    return path


def _two_scrapes(base: str, seconds: int, out: list[str]) -> None:
    """``/metrics`` twice a second apart, in the middle of a run of ``seconds``."""
    time.sleep(max(0.0, seconds / 2 - 0.5))
    for i in range(2):
        if i:
            time.sleep(1.0)
        with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
            out.append(resp.read().decode())


def _samples(text_: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text_):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def check_scrapes(scrapes: list[str], tmp: Path) -> str:
    """Raises unless the second scrape's totals are all at least the first's and
    both workers served publishes; says what the scrapes showed."""
    if len(scrapes) != 2:
        raise RuntimeError(f"/metrics was scraped {len(scrapes)} times under load, not 2")
    first, second = (_samples(s) for s in scrapes)
    down = [k for k, v in first.items() if k[0].endswith(GROWING) and second.get(k, 0.0) < v]
    if down:
        raise RuntimeError(f"totals went down between two scrapes a second apart: {down[:5]}")
    posts = (REQUESTS, (("method", "POST"), ("route", ROUTE), ("status", "201")))
    grew = second.get(posts, 0.0) - first.get(posts, 0.0)
    [shared] = tmp.glob("tidings-metrics-*")
    per_worker = publishes_by_process(shared)
    if len([n for n in per_worker.values() if n]) < 2:
        raise RuntimeError(f"publishes counted by one process only: {per_worker}")
    return f"+{grew:,.0f} publishes between the scrapes; by process {sorted(per_worker.values())}"


def publishes_by_process(shared: Path) -> dict[int, float]:
    """Each process's own count of acknowledged publishes, from its file."""
    counts = {}
    for path in shared.glob("counter_*.db"):
        families = MultiProcessCollector.merge([str(path)])
        counts[int(path.stem.rpartition("_")[2])] = sum(
            s.value
            for family in families
            for s in family.samples
            if s.name == REQUESTS and s.labels["route"] == ROUTE and s.labels["status"] == "201"
        )
    return counts


def check_stored(url: str, acked: list[str]) -> int:
    """Raises unless every acknowledged id is stored, and no activity twice;
    returns the activities stored."""
    if len(set(acked)) != len(acked):
        raise RuntimeError(f"{len(acked) - len(set(acked))} ids acknowledged twice")
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, doc FROM tidings_activities")).all()
    finally:
        engine.dispose()
    ids = {row[0] for row in rows}
    missing = set(acked) - ids
    if missing:
        raise RuntimeError(f"{len(missing)} of {len(acked)} acknowledged activities not stored")
    objects = [orjson.loads(bytes(row[1]))["object"] for row in rows]
    if len(set(objects)) != len(objects):
        raise RuntimeError(f"{len(objects) - len(set(objects))} activities stored twice")
    return len(rows)


def wait_delivered(url: str, timeout: float = 120) -> int:
    """Outbox rows left once they are all done or ``timeout`` has passed."""
    engine = create_engine(url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with engine.connect() as conn:
                left = int(conn.execute(text("SELECT count(*) FROM tidings_outbox")).scalar_one())
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)
    finally:
        engine.dispose()


@contextlib.contextmanager
def tidings_serve(settings: dict[str, str], workers: int, tmp: Path) -> Iterator[Server]:
    """``tidings serve --workers N`` on a free port, until both workers answer."""
    port = free_port()
    env = dict(os.environ) | settings | {"TMPDIR": str(tmp), "TIDINGS_CONFIG": str(tmp / "no")}
    cmd = [sys.executable, "-m", "tidings.cli", "serve", "--workers", str(workers)]
    cmd += ["--port", str(port), "--no-access-log"]
    log = tmp / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(proc, port, log)
    try:
        wait_healthy(server, workers, timeout=120)
        started = time.monotonic() + 90
        while log.read_text(errors="replace").count("Application startup complete") < workers:
            if time.monotonic() > started:
                raise RuntimeError(f"the workers did not all start:\n{server.log_tail()}")
            time.sleep(0.1)
        yield server
    finally:
        stop(proc)


#: CPU the machine spent outside the processes of the run.
_NOT_OURS = ("other", "softirq", "steal")


def by_process(cpu: dict[str, float]) -> dict[str, float]:
    """CPU seconds by kind of process: the database's backends added up."""
    out: dict[str, float] = {}
    for name, seconds in cpu.items():
        kind = name if name.startswith("worker") else name.split(" ")[0]
        out[kind] = out.get(kind, 0.0) + seconds
    return out


def deployment_cpu_ms(r: WrkResult, acknowledged: int) -> float:
    """CPU milliseconds an acknowledged publish cost the whole deployment
    (workers, database, Redis, wrk): unlike the rate, it holds when other
    jobs share the machine."""
    ours = sum(v for k, v in r.cpu.items() if k not in _NOT_OURS)
    return ours / max(1, acknowledged) * 1000


def report(store: str, load: Load, outcome: Outcome) -> Row:
    r = outcome.result
    rate = outcome.acknowledged / r.seconds
    cost = deployment_cpu_ms(r, outcome.acknowledged)
    cores = os.cpu_count() or 1
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in sorted(by_process(r.cpu).items()))
    print(
        f"  {store}: {rate:,.0f} publishes/s acknowledged, p50 {r.p50_ms:.1f} ms, "
        f"p99 {r.p99_ms:.1f} ms; {outcome.acknowledged:,} acknowledged, all stored once; "
        f"workers {r.worker_cpu_ms:.2f} cpu-ms/request, whole deployment {cost:.2f} "
        f"(so {cores} idle cores would carry ~{cores * 1000 / cost:,.0f}/s); cpu-s: {cpu}\n"
        f"  /metrics under load: {outcome.scrapes}; outbox rows left {outcome.pending_after}",
        flush=True,
    )
    if r.other_share > 0.1:
        print(
            f"    WARNING: other processes took {r.other_share:.0%} of the machine's CPU "
            "during this run; the rate and latencies are understated (CPU per publish holds)",
            flush=True,
        )
    detail: dict[str, Any] = {
        "acknowledged": outcome.acknowledged,
        "stored": outcome.stored,
        "errors": r.errors,
        "p50_ms": r.p50_ms,
        "p90_ms": r.p90_ms,
        "p99_ms": r.p99_ms,
        "cpu_seconds": r.cpu,
        "worker_cpu_ms_per_request": r.worker_cpu_ms,
        "deployment_cpu_ms_per_publish": cost,
        "other_processes_cpu_share": r.other_share,
        "scrapes_under_load": outcome.scrapes,
        "pending_after_2_min": outcome.pending_after,
        "loadavg": os.getloadavg(),
    }
    target, met = at_least(rate, TARGET) if store != "SQLite" else ("", None)
    name = "HTTP publish, each acknowledged, tidings serve"
    return Row(name, store, _size(load), rate, "activities/s", target, met, detail)


def cost_row(store: str, load: Load, row: Row) -> Row:
    """The CPU an acknowledged publish cost the whole deployment, from ``row``'s run."""
    name = "HTTP publish, CPU per acknowledged publish (workers, database, Redis, wrk)"
    return Row(name, store, _size(load), row.detail["deployment_cpu_ms_per_publish"], "ms")
