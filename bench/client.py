"""The Python client (clients/python) against raw httpx, in the same run.

One ``tidings serve`` process on SQLite + the bench's Redis, one feed of 100
activities. **Reads**: ``Client.read(feed, limit=25)`` and a raw
``httpx.Client.get`` of the same URL decoded by the same JSON decoder, in
alternating blocks so both see the same load; p50 and p99 of each, and
their ratio (the client's overhead: goal at most 1.2). **Events**: the feed's
events replayed from its first id (900, several rounds) (``Last-Event-ID``), read through
``Client.events`` and through a raw reader (httpx lines, split by hand,
data decoded); events/s of each, and their ratio (goal at least 0.8).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.harness import (
    RedisServer,
    Row,
    at_least,
    at_most,
    percentile,
    tidings_serving,
    timed_ms,
)
from tidings_client import Client
from tidings_client._core import loads

FEED = "user:bench"
PAGE = 25


@contextmanager
def _serve(redis: RedisServer, tmp: Path) -> Iterator[tuple[str, str]]:
    with tidings_serving(tmp, f"sqlite:///{tmp / 'b.db'}", redis_url=redis.url) as served:
        yield served


def _reads(url: str, token: str, count: int) -> tuple[list[float], list[float]]:
    """Page-read latencies (ms) of the client and of raw httpx, interleaved in blocks."""
    headers = {"authorization": f"Bearer {token}"}
    path = f"/v1/feeds/{FEED.replace(':', '/')}"
    with Client(url, token) as client, httpx.Client(base_url=url, headers=headers) as raw:

        def by_client() -> object:
            return client.read(FEED, limit=PAGE)

        def by_raw() -> object:
            response = raw.get(path, params={"limit": str(PAGE)})
            response.raise_for_status()
            return loads(response.content)

        timed_ms(by_client, 200), timed_ms(by_raw, 200)  # warm-up
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(10):
            ours += timed_ms(by_client, count // 10)
            theirs += timed_ms(by_raw, count // 10)
    return ours, theirs


def _raw_events(raw: httpx.Client, after: str, want: int) -> int:
    """Events read by a bare SSE reader: httpx's lines, fields split by hand."""
    got = 0
    path = f"/v1/feeds/{FEED.replace(':', '/')}/events"
    with raw.stream("GET", path, headers={"last-event-id": after}) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                loads(line[6:].encode())
                got += 1
                if got == want:
                    return got
    return got


def _client_events(client: Client, after: str, want: int) -> int:
    got = 0
    with client.events(FEED, last_event_id=after) as stream:
        for _ in stream:
            got += 1
            if got == want:
                return got
    return got


def _rate(read: Callable[[], int], want: int) -> float:
    """Events/s of one replay (the HTTP clients are made before: making one
    loads the CA certificates, a fifth of a second)."""
    t0 = time.perf_counter()
    if read() != want:
        raise RuntimeError("the stream ended early")
    return want / (time.perf_counter() - t0)


def _seed(url: str, token: str, events: int) -> str:
    """``events`` activities in the feed; the id of the event before the first."""
    headers = {"authorization": f"Bearer {token}"}
    with (
        Client(url, token) as client,
        httpx.Client(timeout=30, headers=headers) as raw,
        raw.stream("GET", f"{url}/v1/feeds/user/bench/events") as response,
    ):
        # The stream is subscribed once its headers came: the first event is in it.
        client.publish(FEED, {"actor": "bench", "verb": "post", "object": "note:first"})
        first = next(line[4:] for line in response.iter_lines() if line.startswith("id: "))
        for start in range(0, events, 100):
            batch = [
                {"actor": "bench", "verb": "post", "object": f"note:{n}", "extra": {"n": n}}
                for n in range(start, min(events, start + 100))
            ]
            client.publish_batch(FEED, batch)  # type: ignore[arg-type]
    return first


def run(redis: RedisServer, quick: bool) -> list[Row]:
    # A replay stays under a subscription's buffer (DEFAULT_BUFFER, 1,000
    # events): beyond it the service ends the stream as a slow consumer's.
    reads, events, rounds = (500, 900, 3) if quick else (5_000, 900, 7)
    redis.flush()
    with (
        tempfile.TemporaryDirectory(prefix="tidings-bench-client-") as tmp,
        _serve(redis, Path(tmp)) as (url, token),
    ):
        after = _seed(url, token, events)
        ours, theirs = _reads(url, token, reads)
        client_rates, raw_rates = [], []
        headers = {"authorization": f"Bearer {token}"}
        with (
            httpx.Client(base_url=url, headers=headers, timeout=60) as raw,
            Client(url, token) as client,
        ):
            for _ in range(rounds):  # alternated; the best of each
                raw_rates.append(_rate(lambda: _raw_events(raw, after, events), events))
                client_rates.append(_rate(lambda: _client_events(client, after, events), events))
    rows: list[Row] = []
    size = f"limit={PAGE}, {reads:,} reads each"
    for name, samples in (("client", ours), ("raw httpx", theirs)):
        for q in (50, 99):
            value = percentile(samples, q)
            rows.append(Row(f"page read p{q}: {name}", "sql+redis", size, value, "ms"))
    for q in (50, 99):
        ratio = percentile(ours, q) / percentile(theirs, q)
        target, met = at_most(ratio, 1.2)
        rows.append(Row(f"client / raw httpx read p{q}", "sql+redis", size, ratio, "", target, met))
    client_rate, raw_rate = max(client_rates), max(raw_rates)
    size = f"{events:,} events replayed"
    rows.append(Row("SSE events: client reader", "sql+redis", size, client_rate, "events/s"))
    rows.append(Row("SSE events: raw reader", "sql+redis", size, raw_rate, "events/s"))
    target, met = at_least(client_rate / raw_rate, 0.8)
    rows.append(
        Row("client / raw SSE events", "sql+redis", size, client_rate / raw_rate, "", target, met)
    )
    return rows
