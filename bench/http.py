"""Bench 5: the HTTP API under load, with wrk, against the ceiling of the same app.

Seeds 1,000 timeline feeds (each follows a few sources and holds ~150
activities) through the library on the Redis store, starts
``uvicorn --factory tidings.http.server:app --workers 2`` on that data, and
drives it with wrk (32 connections, 10 s): first ``GET /v1/ping`` (a trivial
JSON endpoint of the same app: the ceiling), then ``GET
/v1/feeds/timeline/<random feed>?limit=25`` with a server token. A Lua script
picks the feed per request and reports the latency percentiles.

wrk, the two workers and redis-server share the machine's cores, as in the
spec. The run is repeated per event loop / HTTP parser: asyncio + h11 as
uvicorn runs it, asyncio + h11 with TCP_NODELAY (see NoDelayH11Protocol), and
uvloop + httptools when both are installed. Each run also records the CPU
seconds of every process from /proc, hence the workers' CPU per request,
which (unlike req/s) holds when other jobs share the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from bench.harness import (
    RedisServer,
    Row,
    add_follows,
    at_least,
    at_most,
    engine,
    follower_ids,
    free_port,
)
from tidings import Tidings
from tidings.http import auth

PAGE = 25
#: The issue's targets.
TARGET_RATE = 3_000.0
TARGET_P99_MS = 50.0
TARGET_RATIO = 0.35


@dataclass(frozen=True)
class Load:
    feeds: int
    sources: int
    #: Activities published in all (round-robin over the sources): each feed holds them all.
    activities: int
    seconds: int
    warmup_seconds: int
    connections: int
    threads: int
    workers: int


FULL = Load(
    feeds=1_000,
    sources=4,
    activities=150,
    seconds=10,
    warmup_seconds=3,
    connections=32,
    threads=2,
    workers=2,
)
QUICK = Load(
    feeds=100,
    sources=4,
    activities=40,
    seconds=2,
    warmup_seconds=1,
    connections=32,
    threads=2,
    workers=2,
)


@dataclass(frozen=True)
class Variant:
    name: str
    args: tuple[str, ...]


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with TCP_NODELAY set on each connection.

    With ``--workers N`` uvicorn binds the listening socket itself with
    ``proto`` 0, so asyncio (which only sets TCP_NODELAY when ``proto`` is
    IPPROTO_TCP) leaves Nagle on and every keep-alive response after the
    first waits ~40 ms for the client's delayed ACK (uvicorn issue #3149).
    uvloop sets TCP_NODELAY itself. Given to uvicorn as ``--http
    bench.http:NoDelayH11Protocol`` to measure asyncio without that stall.
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)


def variants() -> list[Variant]:
    """asyncio + h11 as is and with TCP_NODELAY; uvloop + httptools when both are installed."""
    found = [
        Variant("asyncio+h11", ("--loop", "asyncio", "--http", "h11")),
        Variant(
            "asyncio+h11+nodelay",
            ("--loop", "asyncio", "--http", f"{__name__}:{NoDelayH11Protocol.__name__}"),
        ),
    ]
    if all(importlib.util.find_spec(m) is not None for m in ("uvloop", "httptools")):
        found.append(Variant("uvloop+httptools", ("--loop", "uvloop", "--http", "httptools")))
    return found


@dataclass
class WrkResult:
    requests: int
    seconds: float
    errors: dict[str, int]
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    #: CPU seconds used during the run, by process (uvicorn workers, redis, wrk).
    cpu: dict[str, float]
    output: str

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    @property
    def other_share(self) -> float:
        """Share of the machine's CPU that processes outside the bench used meanwhile."""
        capacity = (os.cpu_count() or 1) * self.seconds
        return self.cpu.get("other", 0.0) / capacity

    @property
    def worker_cpu_ms(self) -> float:
        """CPU milliseconds the uvicorn workers spent per request."""
        spent = sum(v for k, v in self.cpu.items() if k.startswith("worker"))
        return spent / max(1, self.requests) * 1000


# -- wrk ------------------------------------------------------------------------

#: Emitted by every script's done(): one JSON line wrk's own report does not give.
_DONE = """
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,'
    .. '"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,'
    .. '"mean_us":%.1f}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean))
end
"""

#: Each wrk thread draws from a random sequence of its own.
SEEDED = """
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("seed", counter * 7919)
end

function init(args)
  math.randomseed(seed)
end
"""

_FEEDS = """
local prefix = "{prefix}"
local feeds = {feeds}
local headers = {{["Authorization"] = "Bearer {token}"}}

function request()
  local path = string.format("%s%07d?limit={page}", prefix, math.random(0, feeds - 1))
  return wrk.format("GET", path, headers)
end
"""


def feeds_script(token: str, n_feeds: int) -> str:
    """Lua: GET a page of a random feed ``timeline:f0000000`` .. ``f<n-1>`` per request."""
    body = _FEEDS.format(prefix="/v1/feeds/timeline/f", feeds=n_feeds, token=token, page=PAGE)
    return SEEDED + body + _DONE


def wrk_executable() -> str | None:
    return shutil.which("wrk")


def run_wrk(
    wrk: str, url: str, script: Path, load: Load, seconds: int, watch: dict[str, int]
) -> WrkResult:
    # fmt: off
    cmd = [
        wrk, f"-t{load.threads}", f"-c{load.connections}", f"-d{seconds}s",
        "--timeout", "5s", "--latency", "-s", str(script), url,
    ]
    # fmt: on
    before, machine = cpu_seconds(watch), machine_cpu()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    # Reaped here rather than by Popen, to get wrk's own CPU time.
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    after = cpu_seconds(watch)
    used = {name: after[name] - before[name] for name in after if name in before}
    used["wrk"] = usage.ru_utime + usage.ru_stime
    spent = {k: v - machine[k] for k, v in machine_cpu().items()}
    # Everything else the machine ran meanwhile (other users' jobs skew the figures);
    # softirq (loopback TCP, partly the bench's own) and hypervisor steal apart.
    if spent:
        used["other"] = max(0.0, spent["busy"] - sum(used.values()))
        used["softirq"], used["steal"] = spent["softirq"], spent["steal"]
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {out.strip()}")
    line = next((x for x in out.splitlines() if x.startswith("WRK_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no WRK_JSON line:\n{out}")
    d = json.loads(line.removeprefix("WRK_JSON "))
    errors = {k: int(d[k]) for k in ("connect", "read", "write", "status", "timeout") if d[k]}
    return WrkResult(
        requests=int(d["requests"]),
        seconds=d["duration_us"] / 1e6,
        errors=errors,
        p50_ms=d["p50_us"] / 1000,
        p90_ms=d["p90_us"] / 1000,
        p99_ms=d["p99_us"] / 1000,
        max_ms=d["max_us"] / 1000,
        mean_ms=d["mean_us"] / 1000,
        cpu=used,
        output=out.replace(line + "\n", ""),
    )


# -- process accounting ---------------------------------------------------------


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """utime + stime of each process from /proc (Linux); missing ones are left out."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = (int(fields[11]) + int(fields[12])) / tick
    return out


def machine_cpu() -> dict[str, float]:
    """CPU seconds of all cores since boot from /proc/stat: busy in processes (user, nice,
    system, irq), softirq and steal; empty where unavailable."""
    try:
        line = Path("/proc/stat").read_text().split("\n", 1)[0]
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, line.split()[1:9])
    except (OSError, ValueError):
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    return {
        "busy": (user + nice + system + irq) / tick,
        "softirq": softirq / tick,
        "steal": steal / tick,
    }


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def is_worker(pid: int) -> bool:
    """A multiprocessing child that runs a server (not the resource tracker)."""
    try:
        return b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


# -- the server -----------------------------------------------------------------


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def workers(self) -> dict[str, int]:
        pids = [pid for pid in children(self.proc.pid) if is_worker(pid)]
        return {f"worker {i + 1}": pid for i, pid in enumerate(pids or [self.proc.pid])}

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""


@contextlib.contextmanager
def uvicorn(
    settings: dict[str, str],
    workers: int,
    variant: Variant,
    tmp: Path,
    factory: str = "tidings.http.server:app",
) -> Iterator[Server]:
    """``uvicorn --factory tidings.http.server:app`` on a free port, until /healthz answers."""
    port = free_port()
    env = dict(os.environ) | settings
    # The workers import this module when a variant names a protocol class in it.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    # fmt: off
    cmd = [
        sys.executable, "-m", "uvicorn", "--factory", factory,
        "--workers", str(workers), "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "warning", "--no-access-log", *variant.args,
    ]
    # fmt: on
    log = tmp / f"uvicorn-{variant.name}.log"
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
        wait_healthy(server, workers)
        yield server
    finally:
        stop(proc)


def wait_healthy(server: Server, workers: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited ({server.proc.returncode}):\n{server.log_tail()}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(server.base + "/healthz", timeout=2) as resp,
        ):
            # One worker: uvicorn serves from its own process, no children.
            if resp.status == 200 and (workers == 1 or len(server.workers()) >= workers):
                return
        time.sleep(0.1)
    raise RuntimeError(f"uvicorn did not answer /healthz in {timeout:.0f} s:\n{server.log_tail()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT uvicorn (it stops its workers), then kill its process group if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Workers that outlived the master (they share its session and process group).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def get_json(url: str, token: str | None = None) -> Any:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"GET {url}: {exc.code} {exc.read()[:500]!r}") from None


# -- the data -------------------------------------------------------------------


def seed(eng: Tidings, load: Load) -> list[str]:
    """Feeds that follow every source, filled by publishing and draining through the engine."""
    feeds = follower_ids(load.feeds)
    sources = [f"user:s{i}" for i in range(load.sources)]
    for source in sources:
        add_follows(eng, source, feeds)
    text = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 2
    for n in range(load.activities):
        source = sources[n % len(sources)]
        actor = source.split(":", 1)[1]
        eng.add_activity(
            source,
            {
                "actor": actor,
                "verb": "post",
                "object": f"post:{n}",
                "foreign_id": f"post:{n}",
                "extra": {"text": text.strip(), "n": n},
            },
        )
    eng.admin.drain()
    for feed in (feeds[0], feeds[-1]):
        held = len(eng.read(feed, limit=100).results)
        if held != min(100, load.activities):
            raise RuntimeError(f"{feed} holds {held} activities after seeding")
    return feeds


# -- the bench --------------------------------------------------------------------


@dataclass
class VariantResult:
    variant: Variant
    ping: WrkResult
    page: WrkResult


def run(server: RedisServer, load: Load) -> list[Row]:
    wrk = wrk_executable()
    if wrk is None:
        # A missing row would read as "not measured": say so and stop instead.
        raise RuntimeError("wrk not found: `make bench` installs it (apt-get install wrk)")
    secret = secrets.token_urlsafe(32)
    token = auth.mint(secret, "*", server=True)
    tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-http-"))
    results: list[VariantResult] = []
    try:
        feeds_lua = tmp / "feeds.lua"
        feeds_lua.write_text(feeds_script(token, load.feeds))
        ping_lua = tmp / "ping.lua"
        ping_lua.write_text(_DONE)
        with engine("redis", server) as eng:
            started = time.perf_counter()
            feeds = seed(eng, load)
            print(
                f"  http: seeded {len(feeds):,} feeds x {load.activities} activities "
                f"in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            settings = {
                "TIDINGS_DATABASE_URL": eng.settings.database_url,
                "TIDINGS_REDIS_URL": server.url,
                "TIDINGS_TIMELINE_STORE": "redis",
                "TIDINGS_SECRET": secret,
            }
            redis_pid = {"redis": server.proc.pid} if server.proc is not None else {}
            for variant in variants():
                with uvicorn(settings, load.workers, variant, tmp) as srv:
                    path = "/v1/feeds/" + feeds[0].replace(":", "/")
                    page = get_json(f"{srv.base}{path}?limit={PAGE}", token)
                    if len(page["results"]) != PAGE or not page["next"]:
                        raise RuntimeError(f"unexpected page from {feeds[0]}: {page}")
                    watch = srv.workers() | redis_pid
                    ping_url, page_url = f"{srv.base}/v1/ping", srv.base
                    run_wrk(wrk, ping_url, ping_lua, load, load.warmup_seconds, watch)
                    run_wrk(wrk, page_url, feeds_lua, load, load.warmup_seconds, watch)
                    ping = run_wrk(wrk, ping_url, ping_lua, load, load.seconds, watch)
                    report("ping", variant, ping)
                    paged = run_wrk(wrk, page_url, feeds_lua, load, load.seconds, watch)
                    report("page", variant, paged)
                    results.append(VariantResult(variant, ping, paged))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows(results, load)


def report(what: str, variant: Variant, r: WrkResult) -> None:
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in r.cpu.items())
    errors = f", ERRORS {r.errors}" if r.errors else ""
    print(
        f"  http {what} [{variant.name}]: {r.rate:,.0f} req/s, p50 {r.p50_ms:.1f} ms, "
        f"p99 {r.p99_ms:.1f} ms{errors}; workers {r.worker_cpu_ms:.2f} cpu-ms/request; "
        f"cpu-s: {cpu}",
        flush=True,
    )
    workers = [v for k, v in r.cpu.items() if k.startswith("worker")]
    if len(workers) > 1 and min(workers) < 0.25 * max(workers):
        print(
            "    WARNING: the workers' loads are lopsided (the kernel handed most of wrk's "
            "connections to one of them); req/s is that of fewer workers",
            flush=True,
        )
    if r.other_share > 0.1:
        print(
            f"    WARNING: other processes took {r.other_share:.0%} of the machine's CPU "
            "during this run; req/s and latencies are understated (cpu-ms/request holds)",
            flush=True,
        )


def details(r: WrkResult, variant: Variant) -> dict[str, Any]:
    return {
        "variant": variant.name,
        "requests": r.requests,
        "seconds": r.seconds,
        "errors": r.errors,
        "p50_ms": r.p50_ms,
        "p90_ms": r.p90_ms,
        "p99_ms": r.p99_ms,
        "max_ms": r.max_ms,
        "mean_ms": r.mean_ms,
        "cpu_seconds": r.cpu,
        "other_processes_cpu_share": r.other_share,
        "worker_cpu_ms_per_request": r.worker_cpu_ms,
        "wrk": r.output,
    }


def rows(results: Sequence[VariantResult], load: Load) -> list[Row]:
    full = load == FULL
    out: list[Row] = []
    name = f"http GET page {PAGE}, {load.connections} conns, {load.workers} workers"
    ping_name = f"http GET /v1/ping (ceiling), {load.connections} conns, {load.workers} workers"
    for vr in results:
        page, ping = vr.page, vr.ping
        size = f"{load.seconds} s, {load.feeds:,} feeds, {vr.variant.name}"
        detail = details(page, vr.variant)
        target, met = at_least(page.rate, TARGET_RATE, full)
        met = met and page.failed == 0
        out.append(Row(name, "redis", size, page.rate, "requests/s", target, met, detail))
        out.append(Row(f"{name}, p50", "redis", size, page.p50_ms, "ms"))
        target, met = at_most(page.p99_ms, TARGET_P99_MS, full)
        out.append(Row(f"{name}, p99", "redis", size, page.p99_ms, "ms", target, met))
        cpu_name = f"http GET page {PAGE}, worker CPU per request"
        out.append(Row(cpu_name, "redis", size, page.worker_cpu_ms, "ms"))
        detail = details(ping, vr.variant)
        out.append(Row(ping_name, "-", size, ping.rate, "requests/s", detail=detail))
        cpu_name = "http GET /v1/ping, worker CPU per request"
        out.append(Row(cpu_name, "-", size, ping.worker_cpu_ms, "ms"))
        ratio = page.rate / ping.rate
        target, met = at_least(ratio, TARGET_RATIO, full)
        out.append(Row("http page / ping req/s", "redis", size, ratio, "", target, met))
    return out
