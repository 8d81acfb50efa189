"""A feed page read through getstream's own Python client (stream-python,
Stream's v2 protocol) against the same page read from tidings' own ``/v1``
route, in the same run.

One ``tidings serve`` process per deployment (SQLite; PostgreSQL + the
bench's Redis), one feed of 100 activities added through stream-python.
Four reads of the same page, each with its JSON decoded, alternate in blocks
so all see the same load: ``stream.connect(...).feed("user", "bench")
.get(limit=25)``; tidings' own Python client, ``Client.read("user:bench",
limit=25)`` (clients/python: what an application on tidings reads ``/v1``
with); a raw ``httpx`` ``GET /v1/feeds/user/bench?limit=25``; and the same
raw read of Stream's route (``GET /api/v1.0/feed/user/bench/`` with the
client's token). p50 and p99 of each. The ratios: stream-python / raw
``/v1`` (the issue's row: the protocol's cost as an application pays it,
client included against none; goal at most 1.3); stream-python / tidings'
client (client against client, the like-for-like comparison; same goal);
Stream's route / ``/v1``, both by httpx (the server's translation alone).

A fifth read is the floor no server can go below: stream-python reading the
same page from a server that does no work at all (it answers every request
with the bytes Stream's route gave for that page, prepared once). What that
costs over ``/v1`` is the client's alone.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import stream

from bench.harness import (
    PostgresServer,
    RedisServer,
    Row,
    at_most,
    free_port,
    percentile,
    tidings_serving,
    timed_ms,
)
from tidings_client import Client

KEY, STREAM_SECRET = "bench-app", secrets.token_urlsafe(32)
SLUG, USER = "user", "bench"
PAGE = 25


@dataclass(frozen=True)
class Sizes:
    activities: int
    reads: int
    warm_up: int


FULL = Sizes(activities=100, reads=1_000, warm_up=100)
QUICK = Sizes(activities=50, reads=200, warm_up=20)


@contextmanager
def _serve(database_url: str, redis_url: str | None, tmp: Path) -> Iterator[tuple[str, str]]:
    """``tidings serve`` with one Stream key; its URL and a ``/v1`` server token."""
    keys = [{"key": KEY, "secret": STREAM_SECRET, "groups": [SLUG]}]
    env = {"TIDINGS_STREAM_KEYS": json.dumps(keys)}
    with tidings_serving(tmp, database_url, redis_url=redis_url, env=env) as served:
        yield served


@contextmanager
def _prepared(body: bytes) -> Iterator[str]:
    """A server on a free port that answers every GET, on kept-alive
    connections, with ``body`` as JSON and does nothing else; its URL."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
    answer = head + str(len(body)).encode() + b"\r\n\r\n" + body

    async def answer_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):  # (GETs carry no body)
                writer.write(answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    loop = asyncio.new_event_loop()
    port = free_port()
    server = loop.run_until_complete(asyncio.start_server(answer_each, "127.0.0.1", port))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


def _reads(url: str, token: str, sizes: Sizes) -> dict[str, list[float]]:
    """Page-read latencies (ms) through stream-python, through Stream's route
    by httpx, through tidings' client and through ``/v1`` by httpx,
    alternating in ten blocks."""
    # The client calls api.<host> for any host but localhost.
    client = stream.connect(KEY, STREAM_SECRET, base_url=url.replace("127.0.0.1", "localhost"))
    feed = client.feed(SLUG, USER)
    for start in range(0, sizes.activities, 100):
        batch = [
            {"actor": "bench", "verb": "post", "object": f"note:{n}", "n": n}
            for n in range(start, min(sizes.activities, start + 100))
        ]
        feed.add_activities(batch)
    as_stream = {"Authorization": feed.token, "stream-auth-type": "jwt"}
    with (
        httpx.Client(base_url=url, headers={"authorization": f"Bearer {token}"}) as v1,
        httpx.Client(base_url=url, headers=as_stream) as raw,
        Client(url, token) as ours,
        ExitStack() as stack,
    ):
        page = raw.get(
            f"/api/v1.0/feed/{SLUG}/{USER}/", params={"api_key": KEY, "limit": str(PAGE)}
        )
        page.raise_for_status()
        prepared = stack.enter_context(_prepared(page.content))
        floor = stream.connect(KEY, STREAM_SECRET, base_url=prepared).feed(SLUG, USER)

        def by_client_of_nothing() -> object:
            return floor.get(limit=PAGE)["results"]

        def by_client() -> object:
            results = feed.get(limit=PAGE)["results"]
            if len(results) != PAGE:
                raise RuntimeError(f"stream-python read {len(results)} activities, not {PAGE}")
            return results

        def by_route() -> object:
            params = {"api_key": KEY, "limit": str(PAGE)}
            response = raw.get(f"/api/v1.0/feed/{SLUG}/{USER}/", params=params)
            response.raise_for_status()
            return response.json()

        def by_ours() -> object:
            results = ours.read(f"{SLUG}:{USER}", limit=PAGE)["results"]
            if len(results) != PAGE:
                raise RuntimeError(f"tidings' client read {len(results)} activities, not {PAGE}")
            return results

        def by_v1() -> object:
            response = v1.get(f"/v1/feeds/{SLUG}/{USER}", params={"limit": str(PAGE)})
            response.raise_for_status()
            return response.json()

        reads = {
            "stream-python": by_client,
            "stream-python, prepared bytes": by_client_of_nothing,
            "Stream route (httpx)": by_route,
            "tidings client (/v1)": by_ours,
            "/v1 (httpx)": by_v1,
        }
        samples: dict[str, list[float]] = {name: [] for name in reads}
        for read in reads.values():
            timed_ms(read, sizes.warm_up)
        for _ in range(10):
            for name, read in reads.items():
                samples[name] += timed_ms(read, sizes.reads // 10)
    return samples


def _rows(store: str, sizes: Sizes, samples: dict[str, list[float]]) -> list[Row]:
    size = f"limit={PAGE} of {sizes.activities}, {sizes.reads:,} reads each"
    rows = []
    for name, taken in samples.items():
        for q in (50, 99):
            value = percentile(taken, q)
            rows.append(Row(f"getstream page read p{q}: {name}", store, size, value, "ms"))
    comparisons = (
        ("stream-python", "/v1 (httpx)", "stream-python / v1", 1.3),
        ("stream-python", "tidings client (/v1)", "stream-python / tidings client", 1.3),
        ("Stream route (httpx)", "/v1 (httpx)", "Stream route (httpx) / v1", None),
        ("stream-python, prepared bytes", "/v1 (httpx)", "stream-python floor / v1", None),
    )
    for name, against, label, bound in comparisons:
        for q in (50, 99):
            ratio = percentile(samples[name], q) / percentile(samples[against], q)
            target, met = at_most(ratio, bound) if bound else ("", None)
            rows.append(Row(f"{label} read p{q}", store, size, ratio, "", target, met))
    return rows


def run(redis: RedisServer, quick: bool) -> list[Row]:
    sizes = QUICK if quick else FULL
    rows: list[Row] = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tidings-bench-gs-")))
        postgres = stack.enter_context(PostgresServer())
        redis.flush()
        deployments = [
            ("sqlite", f"sqlite:///{tmp / 'b.db'}", None),
            ("postgres+redis", stack.enter_context(postgres.database()), redis.url),
        ]
        for store, database_url, redis_url in deployments:
            print(f"getstream: {store}", flush=True)
            (tmp / store).mkdir()
            with _serve(database_url, redis_url, tmp / store) as (url, token):
                rows += _rows(store, sizes, _reads(url, token, sizes))
    return rows
