"""Shared plumbing: a private redis-server, throw-away engines, timing, the results table."""

from __future__ import annotations

import contextlib
import gc
import glob
import itertools
import math
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
from psycopg import sql

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


def stop_process(proc: subprocess.Popen[bytes] | None, sig: int, timeout: float) -> None:
    """Send ``sig`` to a server the bench started, then kill it if it lingers."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
        stop_process(self.proc, signal.SIGTERM, 10)
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


def postgres_bindir() -> Path:
    """The directory holding ``initdb`` and ``postgres`` (the newest installed)."""

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(p) for p in Path(path).parent.name.split(".") if p.isdigit())

    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if (Path(bindir) / "postgres").is_file() and (Path(bindir) / "initdb").is_file():
            return Path(bindir)
    raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql")


class PostgresServer:
    """A private PostgreSQL cluster on a free loopback port, tuned for speed, not
    durability (as tests/support/servers.py starts one for the test suite).

    PostgreSQL refuses to run as root, so under root the cluster is owned by
    and run as the ``postgres`` system user. Benches only ever create and drop
    databases on this server.
    """

    user = "postgres"  # the database superuser initdb creates

    def __init__(self) -> None:
        self.bindir = postgres_bindir()
        self.port = 0
        self.tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-pg-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self._names = itertools.count()

    def _run_as(self) -> dict[str, Any]:
        env = {**os.environ, "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
        if self.owner is None:
            return {"env": env}
        env |= {"HOME": str(self.tmp), "USER": self.owner.pw_name}
        return {
            "env": env,
            "user": self.owner.pw_uid,
            "group": self.owner.pw_gid,
            "extra_groups": [],
        }

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={dbname}"

    def start(self) -> PostgresServer:
        if self.owner is not None:
            os.chown(self.tmp, self.owner.pw_uid, self.owner.pw_gid)
        data = self.tmp / "data"
        # fmt: off
        subprocess.run(
            [
                str(self.bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", self.user,
                "--no-sync", "--locale=C", "--encoding=UTF8",
            ],
            stdin=subprocess.DEVNULL, capture_output=True, check=True, cwd=self.tmp,
            **self._run_as(),
        )
        # fmt: on
        for _ in range(5):
            self.port = free_port()
            log = open(self.tmp / "postgres.log", "ab")  # noqa: SIM115 - the child keeps it
            # fmt: off
            self.proc = subprocess.Popen(
                [
                    str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                    "-k", str(self.tmp), "-c", "listen_addresses=127.0.0.1",
                    "-c", "fsync=off", "-c", "synchronous_commit=off",
                    "-c", "full_page_writes=off",
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp,
                start_new_session=True, **self._run_as(),
            )
            # fmt: on
            log.close()
            deadline = time.monotonic() + 30
            while self.proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(psycopg.OperationalError):
                    with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                        conn.execute("SELECT 1")
                    return self
                time.sleep(0.1)
            self._kill()  # most likely the port was taken meanwhile: try another
        raise RuntimeError(f"postgres did not start; log in {self.tmp}")

    def _kill(self) -> None:
        stop_process(self.proc, signal.SIGINT, 30)  # SIGINT: PostgreSQL's "fast" shutdown
        self.proc = None

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(statement)

    @contextlib.contextmanager
    def database(self) -> Iterator[str]:
        """The SQLAlchemy URL of a new, empty database, dropped afterwards."""
        name = f"bench_{next(self._names)}"
        self._admin(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        try:
            yield f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{name}"
        finally:
            self._admin(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def isolate_settings() -> None:
    """No TIDINGS_* variable or tidings.toml of the developer leaks into a bench."""
    for name in list(os.environ):
        if name.startswith("TIDINGS_"):
            del os.environ[name]
    os.environ["TIDINGS_CONFIG"] = str(Path(tempfile.gettempdir()) / "tidings-bench-absent.toml")


@contextlib.contextmanager
def engine(
    store: str,
    server: RedisServer,
    *,
    chunk: int | None = None,
    database_url: str | None = None,
    **settings: Any,
) -> Iterator[Tidings]:
    """A manual-delivery engine over ``store`` with a fresh SQLite file (or the
    empty database at ``database_url``); Redis is flushed. ``settings`` are
    passed on (feed groups, say)."""
    tmp = tempfile.mkdtemp(prefix="tidings-bench-")
    options: dict[str, Any] = {
        "database_url": database_url or f"sqlite:///{tmp}/bench.db",
        "timeline_store": store,
    }
    if store == "redis":
        server.flush()
        options["redis_url"] = server.url
    if chunk is not None:
        options["delivery_chunk_size"] = chunk
    eng = Tidings(Settings(**options, **settings), task_runner="manual")
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
    eng.admin.drain()


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


@contextlib.contextmanager
def tidings_serving(
    tmp: Path, database_url: str, *, redis_url: str | None = None, env: dict[str, str] | None = None
) -> Iterator[tuple[str, str]]:
    """``tidings serve`` on a free port (its log in ``tmp``), until the block
    ends; its URL and a server token for every feed."""
    from tidings.http import auth

    secret, port = secrets.token_urlsafe(32), free_port()
    argv = [sys.executable, "-m", "tidings.cli", "--database-url", database_url]
    argv += [*(["--redis-url", redis_url] if redis_url else []), "serve", "--port", str(port)]
    environment = {**os.environ, **(env or {}), "TIDINGS_SECRET": secret}
    with (tmp / "serve.log").open("wb") as log:
        proc = subprocess.Popen(
            argv, env=environment, stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp / "serve.log").read_text()[-2000:])
            time.sleep(0.1)
        yield url, auth.mint(secret, "*", server=True)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def timed_ms(read: Callable[[], object], count: int) -> list[float]:
    """Milliseconds each of ``count`` calls of ``read`` took."""
    samples = []
    clock = time.perf_counter
    for _ in range(count):
        t0 = clock()
        read()
        samples.append((clock() - t0) * 1000)
    return samples
