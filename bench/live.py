"""Live events: SSE latency under 1,000 subscribers, 10,000 idle SSE
connections, and the firehose matcher.

- **Latency**: one ``uvicorn`` worker (``tidings.http.server:app``) on SQLite +
  Redis with its in-process runner; 1,000 SSE connections (raw asyncio
  sockets, this process), one a timeline; each timeline follows one of 100
  sources, so an activity reaches 10 subscribers. Activities are published
  over HTTP at a steady rate; a sample is the time from sending the POST to
  a subscriber reading the event.
- **Idle**: 10,000 SSE connections to one worker, one feed each, held past
  a heartbeat period (15 s): the worker's RSS, and the longest gap between
  heartbeats any connection saw.
- **Firehose**: 1,000 in-process firehose subscriptions with mixed filters
  (track phrases, followed actors, boxes, a few samples), activities
  published with ``publish_many`` on SQLite; matched activities/s end to
  end, and the matcher's CPU per activity measured alone over the same
  activities.
"""

from __future__ import annotations

import asyncio
import random
import resource
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.harness import RedisServer, Row, at_least, at_most, percentile
from bench.http import Variant, uvicorn, variants
from tidings import Settings, StoreName, Tidings
from tidings.core.firehose import Filter, FirehoseIndex
from tidings.http import auth

HEARTBEAT_S = 15.0


@dataclass(frozen=True)
class Sizes:
    subscribers: int
    sources: int
    rate: float
    seconds: float
    idle: int
    firehose_clients: int
    firehose_activities: int
    targets: bool


FULL = Sizes(1000, 100, 50.0, 20.0, 10_000, 1000, 50_000, True)
QUICK = Sizes(100, 10, 20.0, 3.0, 500, 100, 5_000, False)


def _raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, need))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


async def _open_sse(port: int, path: str, token: str) -> tuple[Any, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"{path}: {status!r}")
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    return reader, writer


async def _open_many(
    port: int, streams: list[tuple[str, str]], at_once: int = 250
) -> list[tuple[Any, Any]]:
    """SSE connections for ``(path, token)`` pairs, ``at_once`` at a time (the
    server's listen backlog)."""
    connections: list[tuple[Any, Any]] = []
    for start in range(0, len(streams), at_once):
        batch = streams[start : start + at_once]
        connections += await asyncio.gather(*(_open_sse(port, p, t) for p, t in batch))
    return connections


@contextmanager
def _workspace(redis: RedisServer, prefix: str, files: int) -> Iterator[tuple[str, Path]]:
    """A secret, an empty temporary directory, an emptied Redis, and room for
    ``files`` open descriptors; the directory is removed after."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    _raise_fd_limit(files + 1024)
    redis.flush()
    try:
        yield secrets.token_urlsafe(32), tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _variant() -> Variant:
    """uvloop + httptools when installed, as in the HTTP benches."""
    return next((v for v in variants() if "uvloop" in v.name), variants()[-1])


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _server_env(tmp: Path, redis: RedisServer, secret: str) -> dict[str, str]:
    return {
        "TIDINGS_DATABASE_URL": f"sqlite:///{tmp / 'live.db'}",
        "TIDINGS_REDIS_URL": redis.url,
        "TIDINGS_SECRET": secret,
        "TIDINGS_HTTP_MAX_CONNECTIONS": "30000",
        "TIDINGS_SSE_HEARTBEAT_SECONDS": str(HEARTBEAT_S),
    }


# -- latency ---------------------------------------------------------------------------------


async def _latency(port: int, sizes: Sizes, secret: str) -> list[float]:
    server_token = auth.mint(secret, "*", server=True)
    sent: dict[str, float] = {}
    samples: list[float] = []
    connections = await _open_many(
        port,
        [
            (f"/v1/feeds/timeline/s{i:04d}/events", auth.mint(secret, f"s{i:04d}"))
            for i in range(sizes.subscribers)
        ],
    )
    await asyncio.sleep(2.0)  # every process sees the watched feeds (read once a second)

    async def listen(reader: Any) -> None:
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b"data: "):
                obj = orjson.loads(line[6:]).get("object")
                if obj in sent:
                    samples.append(time.perf_counter() - sent[obj])

    listeners = [asyncio.create_task(listen(r)) for r, _ in connections]
    headers = {"authorization": f"Bearer {server_token}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
        n, begin = 0, time.perf_counter()
        total = int(sizes.rate * sizes.seconds)
        while n < total:
            due = begin + n / sizes.rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            source = f"p{n % sizes.sources:03d}"
            obj = f"note:{n}"
            sent[obj] = time.perf_counter()
            body = {"actor": source, "verb": "post", "object": obj}
            r = await client.post(f"/v1/feeds/user/{source}/activities", json=body)
            r.raise_for_status()
            n += 1
        await asyncio.sleep(2.0)
    for task in listeners:
        task.cancel()
    for _, writer in connections:
        writer.close()
    return samples


def latency(redis: RedisServer, sizes: Sizes) -> list[Row]:
    with _workspace(redis, "tidings-bench-live-", 4 * sizes.subscribers) as (secret, tmp):
        env = _server_env(tmp, redis, secret)
        with Tidings(
            Settings(database_url=env["TIDINGS_DATABASE_URL"], redis_url=redis.url),
            task_runner="manual",
        ) as eng:
            eng.follow_many(
                [
                    (f"timeline:s{i:04d}", f"user:p{i % sizes.sources:03d}")
                    for i in range(sizes.subscribers)
                ],
                copy_limit=0,
            )
        with uvicorn(env, 1, _variant(), tmp) as server:
            samples = asyncio.run(_latency(server.port, sizes, secret))
        expected = int(sizes.rate * sizes.seconds) * sizes.subscribers // sizes.sources
        p50, p99 = percentile(samples, 50) * 1000, percentile(samples, 99) * 1000
        print(
            f"  SSE latency: {len(samples)}/{expected} events, p50 {p50:.1f} ms,"
            f" p99 {p99:.1f} ms ({sizes.subscribers} subscribers, {sizes.rate:g} publishes/s)",
            flush=True,
        )
        target, met = at_most(p99, 50, sizes.targets and len(samples) == expected)
        return [
            Row(
                "publish → SSE event, p99",
                "sqlite+redis",
                f"{sizes.subscribers} subscribers, {sizes.rate:g}/s",
                p99,
                "ms",
                target,
                met,
                {"p50_ms": p50, "events": len(samples), "expected": expected},
            )
        ]


# -- idle connections ---------------------------------------------------------------------------


async def _idle(port: int, n: int, secret: str) -> tuple[int, float, int]:
    token = auth.mint(secret, "*", server=True)
    connections = await _open_many(
        port, [(f"/v1/feeds/timeline/i{i:05d}/events", token) for i in range(n)]
    )
    opened = len(connections)
    gaps: list[float] = []

    async def watch(reader: Any) -> None:
        last = time.monotonic()
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b": heartbeat"):
                now = time.monotonic()
                gaps.append(now - last)
                last = now

    tasks = [asyncio.create_task(watch(r)) for r, _ in connections]
    await asyncio.sleep(HEARTBEAT_S * 2 + 2)
    for task in tasks:
        task.cancel()
    for _, writer in connections:
        writer.close()
    beats = len(gaps)
    return opened, max(gaps, default=float("inf")), beats


def idle(redis: RedisServer, sizes: Sizes) -> list[Row]:
    with _workspace(redis, "tidings-bench-idle-sse-", 2 * sizes.idle) as (secret, tmp):
        with uvicorn(_server_env(tmp, redis, secret), 1, _variant(), tmp) as server:
            pid = next(iter(server.workers().values()))
            before = _rss_kb(pid)
            result: dict[str, Any] = {}

            async def scenario() -> None:
                task = asyncio.create_task(_idle(server.port, sizes.idle, secret))
                await asyncio.sleep(HEARTBEAT_S * 1.5)
                result["rss_kb"] = _rss_kb(pid)
                result["opened"], result["max_gap"], result["beats"] = await task

            asyncio.run(scenario())
        rss_mb = result["rss_kb"] / 1024
        print(
            f"  idle SSE: {result['opened']:,} connections, worker RSS {rss_mb:.0f} MB"
            f" (idle {before / 1024:.0f} MB), {result['beats']:,} heartbeats,"
            f" longest gap {result['max_gap']:.1f} s",
            flush=True,
        )
        ok = sizes.targets and result["opened"] == sizes.idle
        on_time = result["max_gap"] <= HEARTBEAT_S + 2
        target, met = at_most(rss_mb, 1024, ok)
        return [
            Row(
                "idle SSE connections, one worker: RSS",
                "sqlite+redis",
                f"{result['opened']:,} connections",
                rss_mb,
                "MB",
                target,
                met if met is None else met and on_time,
                {
                    "idle_rss_mb": before / 1024,
                    "heartbeats": result["beats"],
                    "longest_gap_s": result["max_gap"],
                },
            )
        ]


# -- firehose ------------------------------------------------------------------------------------

WORDS = [f"w{n}" for n in range(3000)]
ACTORS = [f"a{n}" for n in range(20_000)]


def _filters(rng: random.Random, n: int) -> list[Filter]:
    out = []
    for i in range(n):
        kind = i % 10
        if kind < 5:
            phrases = [" ".join(rng.sample(WORDS, rng.choice([1, 1, 2]))) for _ in range(20)]
            out.append(Filter.parse(track=",".join(phrases)))
        elif kind < 8:
            out.append(Filter.parse(follow=",".join(rng.sample(ACTORS, 100))))
        elif kind < 9:
            w, s = rng.uniform(-180, 170), rng.uniform(-90, 80)
            out.append(Filter.parse(locations=f"{w},{s},{w + 5},{s + 5}"))
        else:
            out.append(Filter.parse(sample="1"))
    return out


def _activities(rng: random.Random, n: int) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for k in range(n):
        actor = rng.choice(ACTORS)
        text = " ".join(rng.sample(WORDS, 8))
        extra = {"text": text, "lng": rng.uniform(-180, 180), "lat": rng.uniform(-90, 90)}
        out.append((actor, {"actor": actor, "verb": "post", "object": f"note:{k}", "extra": extra}))
    return out


def firehose(sizes: Sizes) -> list[Row]:
    rng = random.Random(11)
    filters = _filters(rng, sizes.firehose_clients)
    activities = _activities(rng, sizes.firehose_activities)
    tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-firehose-"))
    try:
        with Tidings(
            Settings(database_url=f"sqlite:///{tmp / 'f.db'}", timeline_store=StoreName.SQL),
            task_runner="manual",
        ) as eng:
            subs = [
                eng.live.firehose(
                    track=",".join(" ".join(p) for p in f.track) or None,
                    follow=",".join(sorted(f.follow)) or None,
                    locations=",".join(",".join(map(str, b)) for b in f.locations) or None,
                    sample=f.sample,
                )
                for f in filters
            ]
            delivered = 0
            start = time.perf_counter()
            for at in range(0, len(activities), 100):  # (the batch limit)
                chunk = activities[at : at + 100]
                eng.activities.publish_many("user:firehose", [a for _, a in chunk])
                for sub in subs:
                    while sub.get(0) is not None:
                        delivered += 1
            seconds = time.perf_counter() - start
            for sub in subs:
                sub.close()
        # The matcher alone, on the same activities (their JSON as published).
        index = FirehoseIndex()
        for n, flt in enumerate(filters):
            index.add(n, flt)
        docs = [dict(a, id=f"{k:032x}", target=None) for k, (_, a) in enumerate(activities)]
        cpu = time.thread_time()
        matches = sum(len(index.match(d)) for d in docs)
        per_activity_us = (time.thread_time() - cpu) / len(docs) * 1e6
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rate = len(activities) / seconds
    print(
        f"  firehose: {sizes.firehose_clients} clients, {rate:,.0f} activities/s published and"
        f" matched, {delivered:,} events delivered; matching {per_activity_us:.1f} µs CPU an"
        f" activity ({matches / len(docs):.1f} matches each)",
        flush=True,
    )
    target, met = at_least(rate, 5000, sizes.targets)
    return [
        Row(
            "firehose: published and matched",
            "sqlite",
            f"{sizes.firehose_clients} filtered clients",
            rate,
            "activities/s",
            target,
            met,
            {"match_cpu_us": per_activity_us, "events": delivered},
        )
    ]


def run(redis: RedisServer, quick: bool) -> list[Row]:
    sizes = QUICK if quick else FULL
    print("live events", flush=True)
    return [*latency(redis, sizes), *idle(redis, sizes), *firehose(sizes)]
