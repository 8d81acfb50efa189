"""A private PostgreSQL server (and streaming replicas of it) for the test suite."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

import psycopg
from psycopg import sql

from server_base import BIND_ERRORS, RunAs, Server, ServerError, free_port, tail

__all__ = ["PostgresServer", "find_postgres_bindir"]


_DB_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def find_postgres_bindir() -> Path:
    """Directory holding ``initdb`` and ``postgres``."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True
            ).stdout
            candidates.append(Path(out.strip()))

    def version(path: str) -> tuple[int, ...]:
        ver = Path(path).parent.name
        return tuple(int(p) for p in ver.split(".") if p.isdigit())

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    candidates.extend(Path(d) for d in found)
    for bindir in candidates:
        if (bindir / "postgres").is_file() and (bindir / "initdb").is_file():
            return bindir
    raise ServerError("PostgreSQL server binaries not found: apt-get install postgresql")


def _unprivileged_user() -> pwd.struct_passwd:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ServerError("running as root and neither a 'postgres' nor a 'nobody' user exists")


class PostgresServer(Server):
    """A private PostgreSQL cluster tuned for speed, not durability.

    When running as root the cluster is owned by and run as the ``postgres``
    system user (or ``nobody``), because postgres refuses to run as root.
    """

    name = "postgres"
    startup_timeout = 30.0
    user = "postgres"  # the database superuser created by initdb

    def __init__(self, bindir: Path | None = None, *, home: Path | None = None) -> None:
        super().__init__(home)
        self.bindir = bindir or find_postgres_bindir()
        self._os_user: pwd.struct_passwd | None = (
            _unprivileged_user() if os.geteuid() == 0 else None
        )

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, dbname: str) -> str:
        """SQLAlchemy URL of database ``dbname`` on this server."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def conninfo(self, dbname: str = "postgres") -> str:
        """libpq conninfo string for psycopg."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={dbname}"

    @property
    def datadir(self) -> Path:
        return self.tmpdir / "data"

    def _run_as(self) -> RunAs:
        """How to run initdb/postgres: as ourselves, or as an unprivileged user when root."""
        env = {**os.environ, "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
        if self._os_user is None:
            return RunAs(env=env)
        env |= {"HOME": str(self.tmpdir), "USER": self._os_user.pw_name}
        return RunAs(
            env=env, user=self._os_user.pw_uid, group=self._os_user.pw_gid, extra_groups=[]
        )

    def start(self) -> Self:
        """A new cluster (initdb), started."""
        return self._start(self._initdb)

    def start_replica(self, primary: PostgresServer) -> Self:
        """A streaming replica of ``primary``, started: a base backup of it with
        the standby settings written in (``pg_basebackup -R``), in hot standby
        (it answers reads). :meth:`streaming` says when it has caught up."""
        return self._start(lambda: self._basebackup(primary))

    def _start(self, make_datadir: Callable[[], None]) -> Self:
        if self.running:
            raise ServerError("postgres is already running")
        try:
            self._tmp = self._workdir("tidings-pg-")
            if self._os_user is not None:
                os.chown(self._tmp, self._os_user.pw_uid, self._os_user.pw_gid)
            make_datadir()
            for attempt in range(5):
                self.port = free_port()
                try:
                    self._start_once()
                    return self
                except ServerError:
                    bind_error = any(e in tail(self.log_path) for e in BIND_ERRORS)
                    if not bind_error or attempt == 4:
                        raise
            raise AssertionError("unreachable")
        except BaseException:
            self.stop()
            raise

    def _initdb(self) -> None:
        # fmt: off
        argv = [
            str(self.bindir / "initdb"),
            "-D", str(self.datadir),
            "-A", "trust",
            "-U", self.user,
            "--no-sync",
            "--locale=C",
            "--encoding=UTF8",
        ]
        # fmt: on
        self._run_tool(argv)

    def _basebackup(self, primary: PostgresServer) -> None:
        # fmt: off
        argv = [
            str(self.bindir / "pg_basebackup"),
            "-h", "127.0.0.1",
            "-p", str(primary.port),
            "-U", self.user,
            "-D", str(self.datadir),
            "-R",  # standby.signal and primary_conninfo: start as its replica
            "-X", "stream",
            "--checkpoint=fast",
            "--no-sync",
        ]
        # fmt: on
        self._run_tool(argv)

    def _run_tool(self, argv: list[str]) -> None:
        """Run a PostgreSQL program to completion as the server's user."""
        run_as = self._run_as()
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=self.tmpdir,
            check=False,
            env=run_as.env,
            user=run_as.user,
            group=run_as.group,
            extra_groups=run_as.extra_groups,
        )
        if proc.returncode != 0:
            name = Path(argv[0]).name
            raise ServerError(f"{name} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")

    def streaming(self) -> bool:
        """Whether this server is a replica receiving its primary's WAL now."""
        with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
            row = conn.execute("SELECT status FROM pg_stat_wal_receiver").fetchone()
        return row is not None and row[0] == "streaming"

    def _start_once(self) -> None:
        self.log_path.write_bytes(b"")
        if self._os_user is not None:
            os.chown(self.log_path, self._os_user.pw_uid, self._os_user.pw_gid)
        # fmt: off
        argv = [
            str(self.bindir / "postgres"),
            "-D", str(self.datadir),
            "-p", str(self.port),
            "-k", str(self.tmpdir),
            "-c", "listen_addresses=127.0.0.1",
            "-c", "fsync=off",
            "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off",
        ]
        # fmt: on
        self._spawn(argv, self._run_as())
        deadline = time.monotonic() + self.startup_timeout
        while True:
            self._check_alive("postgres")
            try:
                with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                pass
            if time.monotonic() > deadline:
                self._reap(signal.SIGKILL, 5)
                raise ServerError(
                    f"postgres on port {self.port} did not accept connections within "
                    f"{self.startup_timeout:.0f}s; log:\n{tail(self.log_path)}"
                )
            time.sleep(0.1)

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(statement)

    def new_database(self, name: str, template: str = "template0") -> str:
        """Create database ``name``, empty or a copy of ``template`` (a database
        nobody is connected to), and return its SQLAlchemy URL."""
        for given in (name, template):
            if not _DB_NAME.match(given):
                raise ValueError(f"invalid database name {given!r}")
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}")
        self._admin(statement.format(sql.Identifier(name), sql.Identifier(template)))
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, disconnecting any clients still using it."""
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def halt(self) -> None:
        """Shut the server down ("fast": sessions are ended, ``pg_ctl stop -m
        fast``) and keep its files: :meth:`resume` starts it again."""
        self._reap(signal.SIGINT, 30)

    def resume(self, port: int | None = None) -> Self:
        """Start again, on its port (or ``port``), the database cluster a halted
        server left in its directory: the same data, the same URL."""
        if self.running:
            raise ServerError("postgres is already running")
        if self._tmp is None:  # (a server this object did not start: its home)
            self._tmp = self._workdir("tidings-pg-")
        self.port = port or self.port
        if not self.port or not (self.datadir / "PG_VERSION").exists():
            raise ServerError(f"no halted PostgreSQL to resume in {self.tmpdir}")
        self._start_once()
        return self

    def stop(self) -> None:
        self._reap(signal.SIGINT, 30)  # SIGINT = "fast" shutdown
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
