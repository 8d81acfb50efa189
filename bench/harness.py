"""Shared plumbing: a private redis-server, throw-away engines, timing, the results table."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from tidings import Settings, Tidings
from tidings.canonical.schema import follows
from tidings.stores.redis.keys import RedisKeys

SOURCE = "user:celeb"
FOLLOWER_GROUP = "timeline"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """A private redis-server (no persistence) on a free loopback port, in its own temp dir.

    Benches only ever flush this server, never another one.
    """

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server not found: apt-get install redis-server")
        self.executable = exe
        self.port = 0
        self.tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.client: Any = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        for _ in range(5):
            self.port = free_port()
            log = open(self.tmp / "redis.log", "ab")  # noqa: SIM115 - the child keeps it
            # fmt: off
            self.proc = subprocess.Popen(
                [
                    self.executable, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", str(self.tmp),
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            # fmt: on
            log.close()
            self.client = redis.Redis(port=self.port)
            deadline = time.monotonic() + 10
            while self.proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(redis.ConnectionError):
                    if self.client.ping():
                        return self
                time.sleep(0.05)
            self._kill()
        raise RuntimeError(f"redis-server did not start; log in {self.tmp}")

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def flush(self) -> None:
        """FLUSHALL this private server (and only it)."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError("the private redis-server is not running")
        self.client.flushall()

    def version(self) -> str:
        return str(self.client.info("server")["redis_version"])

    def used_memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def key_usage(self, key: str) -> int:
        return int(self.client.memory_usage(key, samples=0))

    def server_usec(self, command: str) -> tuple[int, int]:
        """(calls, microseconds inside Redis) of ``command`` since the last CONFIG RESETSTAT."""
        stats = self.client.info("commandstats").get(f"cmdstat_{command}", {})
        return int(stats.get("calls", 0)), int(stats.get("usec", 0))

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def isolate_settings() -> None:
    """No TIDINGS_* variable or tidings.toml of the developer leaks into a bench."""
    for name in list(os.environ):
        if name.startswith("TIDINGS_"):
            del os.environ[name]
    os.environ["TIDINGS_CONFIG"] = str(Path(tempfile.gettempdir()) / "tidings-bench-absent.toml")


@contextlib.contextmanager
def engine(store: str, server: RedisServer, *, chunk: int | None = None) -> Iterator[Tidings]:
    """A manual-delivery engine over ``store`` with a fresh SQLite file; Redis is flushed."""
    tmp = tempfile.mkdtemp(prefix="tidings-bench-")
    options: dict[str, Any] = {"database_url": f"sqlite:///{tmp}/bench.db", "timeline_store": store}
    if store == "redis":
        server.flush()
        options["redis_url"] = server.url
    if chunk is not None:
        options["delivery_chunk_size"] = chunk
    eng = Tidings(Settings(**options), delivery="manual")
    try:
        yield eng
    finally:
        eng.close()
        shutil.rmtree(tmp, ignore_errors=True)


def feed_key(eng: Tidings, feed: str) -> str:
    return RedisKeys(eng.settings.namespace).feed(feed)


def follower_ids(n: int, prefix: str = "f") -> list[str]:
    return [f"{FOLLOWER_GROUP}:{prefix}{i:07d}" for i in range(n)]


def add_follows(eng: Tidings, source: str, followers: Sequence[str]) -> None:
    """Bulk-insert follow rows straight into the canonical table (setup, not measured)."""
    for start in range(0, len(followers), 10_000):
        rows = [
            {"follower": f, "source": source, "created_ms": 0}
            for f in followers[start : start + 10_000]
        ]
        with eng.db.write() as conn:
            conn.execute(follows.insert(), rows)
    # Deliveries size their batches by the counts kept with the follows.
    eng.canonical.follows.recount([source])


def publish(eng: Tidings, source: str, n: int) -> None:
    """Add one activity to ``source`` and carry out its delivery (what is timed)."""
    eng.add_activity(source, {"actor": "celeb", "verb": "post", "object": f"post:{n}"})
    eng.drain()


def warm_up(eng: Tidings) -> None:
    """Exercise every code path (SQL statements, Lua scripts) on feeds no bench measures."""
    add_follows(eng, "user:warm", follower_ids(1000, prefix="w"))
    for n in range(3):
        publish(eng, "user:warm", n)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def settle() -> None:
    gc.collect()


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


@dataclass
class Row:
    bench: str
    store: str
    size: str
    value: float
    unit: str
    target: str = ""
    met: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def result(self) -> str:
        if self.unit.endswith("/s"):
            return f"{self.value:,.0f} {self.unit}"
        if self.unit == "ms":
            return f"{self.value:.3f} ms"
        if self.unit.startswith("bytes/"):
            return f"{self.value:.1f} {self.unit}"
        return f"{self.value:.2f} {self.unit}".rstrip()


def at_least(value: float, bound: float, enabled: bool = True) -> tuple[str, bool | None]:
    return (f"≥ {bound:,g}", value >= bound) if enabled else ("", None)


def at_most(value: float, bound: float, enabled: bool = True) -> tuple[str, bool | None]:
    return (f"≤ {bound:,g}", value <= bound) if enabled else ("", None)


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| Benchmark | Store | Size | Result | Target | Met |",
        "|---|---|---|---:|---|---|",
    ]
    for r in rows:
        met = "" if r.met is None else ("yes" if r.met else "**no**")
        lines.append(f"| {r.bench} | {r.store} | {r.size} | {r.result()} | {r.target} | {met} |")
    return "\n".join(lines)


def human(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)
