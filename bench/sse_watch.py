"""Open SSE subscribers beside a Locust run: how late deliveries arrive.

    python -m bench.sse_watch --subscribers 500 --out lag.json

One asyncio process holds ``--subscribers`` streams, one per person of the
seeded graph (``timeline:u0001``... with that person's user token), spread
over the serve ports of ``CLUSTER_SERVE_URLS``. For every ``activity.added``
event whose activity carries ``extra.sent_at`` (the Locust publishes do) it
records the delivery lag: the time of reading the event less the time the
publish was sent, both this machine's wall clock. It prints ``ready N`` once
every stream is open and, on SIGINT or SIGTERM, writes what it saw to
``--out``: streams opened, events, lag samples, streams the server ended
(each is resumed from its last event id) and failures to connect.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from tidings.http.auth import mint

#: Streams opened at once (the servers' listen backlogs).
AT_ONCE = 100


@dataclass
class Seen:
    opened: int = 0
    events: int = 0
    lags: list[float] = field(default_factory=list)
    ended: int = 0
    failed: int = 0
    #: Events of an activity the same stream had already shown.
    repeated: int = 0
    #: ``{person: [activity id, ...]}`` of the posts with ``sent_at`` each saw.
    received: dict[str, list[str]] = field(default_factory=dict)


async def _connect(
    address: tuple[str, int], path: str, token: str, last_id: str | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(*address, limit=1 << 20)
    resume = f"Last-Event-ID: {last_id}\r\n" if last_id else ""
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: {address[0]}\r\nAuthorization: Bearer {token}\r\n"
        f"Accept: text/event-stream\r\n{resume}\r\n".encode()
    )
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        writer.close()
        raise ConnectionError(f"{path}: {status!r}")
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    return reader, writer


class Subscriber:
    """One stream, resumed by event id whenever the server ends it."""

    def __init__(self, address: tuple[str, int], person: str, secret: str, seen: Seen) -> None:
        self.address = address
        self.path = f"/v1/feeds/timeline/{person}/events"
        self.ids: set[str] = set()
        self.received = seen.received.setdefault(person, [])
        self.token = mint(secret, person, ttl_seconds=86_400)
        self.seen = seen
        self.last_id: str | None = None
        self.stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def open(self) -> None:
        try:
            self.stream = await _connect(self.address, self.path, self.token, self.last_id)
            self.seen.opened += 1
        except (OSError, ConnectionError):
            self.seen.failed += 1

    async def listen(self) -> None:
        while True:
            if self.stream is None:
                await asyncio.sleep(1.0)
                await self.open()
                continue
            await self._read(self.stream[0])
            self.stream[1].close()
            self.stream = None
            self.seen.ended += 1

    async def _read(self, reader: asyncio.StreamReader) -> None:
        kind = ""
        while line := await reader.readline():
            if line.startswith(b"id: "):
                self.last_id = line[4:].strip().decode()
            elif line.startswith(b"event: "):
                kind = line[7:].strip().decode()
            elif line.startswith(b"data: ") and kind == "activity.added":
                self._record(line[6:])

    def _record(self, data: bytes) -> None:
        received = time.time()
        self.seen.events += 1
        activity = orjson.loads(data)
        if activity["id"] in self.ids:
            self.seen.repeated += 1
            return
        self.ids.add(activity["id"])
        sent = (activity.get("extra") or {}).get("sent_at")
        if isinstance(sent, (int, float)):
            self.seen.lags.append(received - sent)
            self.received.append(activity["id"])


async def watch(urls: list[str], subscribers: int, secret: str, out: Path) -> None:
    seen = Seen()
    addresses = [(urlsplit(u).hostname or "127.0.0.1", urlsplit(u).port or 80) for u in urls]
    people = [f"u{n:04d}" for n in range(1, subscribers + 1)]
    subs = [
        Subscriber(addresses[i % len(addresses)], p, secret, seen) for i, p in enumerate(people)
    ]
    for start in range(0, len(subs), AT_ONCE):
        await asyncio.gather(*(s.open() for s in subs[start : start + AT_ONCE]))
    print(f"ready {seen.opened}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tasks = [asyncio.create_task(s.listen()) for s in subs]
    await stop.wait()
    for t in tasks:
        t.cancel()
    for s in subs:
        if s.stream is not None:
            s.stream[1].close()
    out.write_text(
        json.dumps(
            {
                "subscribers": subscribers,
                "opened": seen.opened,
                "events": seen.events,
                "ended": seen.ended,
                "failed": seen.failed,
                "repeated": seen.repeated,
                "lags": seen.lags,
                "received": seen.received,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sse_watch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.subscribers + 1024), hard))
    urls = os.environ["CLUSTER_SERVE_URLS"].split()
    asyncio.run(watch(urls, args.subscribers, os.environ["TIDINGS_SECRET"], args.out))


if __name__ == "__main__":
    main()
