"""A private RabbitMQ node for the test suite (the AMQP broker tests)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

from server_base import RunAs, Server, ServerError, free_port, tail

__all__ = ["RabbitMQServer"]


class RabbitMQServer(Server):
    """A private RabbitMQ node (Debian's ``rabbitmq-server``), no plugins.

    Everything it owns is private: its AMQP port, its Erlang distribution
    port, and an epmd of its own on a third free port, so it never meets a
    system node. ``url`` is ``amqp://guest:guest@127.0.0.1:PORT//``.
    """

    name = "rabbitmq"
    startup_timeout = 60.0
    executable = "/usr/lib/rabbitmq/bin/rabbitmq-server"

    def __init__(self) -> None:
        super().__init__()
        if not os.path.exists(self.executable):
            raise ServerError("rabbitmq-server not found: apt-get install rabbitmq-server")
        self.epmd_port = 0

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def start(self) -> Self:
        if self.running:
            raise ServerError("rabbitmq-server is already running")
        self._tmp = Path(tempfile.mkdtemp(prefix="tidings-rabbitmq-"))
        self.port, dist, self.epmd_port = free_port(), free_port(), free_port()
        tmp = self.tmpdir
        (tmp / "enabled_plugins").write_text("[].\n")
        (tmp / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),  # the Erlang cookie goes here
            "RABBITMQ_NODENAME": f"tidings{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(dist),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_CONFIG_FILE": str(tmp / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(tmp / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(tmp / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(tmp / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(tmp / "plugins"),
            "RABBITMQ_GENERATED_CONFIG_DIR": str(tmp / "generated"),
            "RABBITMQ_MNESIA_BASE": str(tmp / "mnesia"),
            "RABBITMQ_LOG_BASE": str(tmp / "log"),
            "RABBITMQ_PID_FILE": str(tmp / "rabbitmq.pid"),
            "RABBITMQ_LOGS": "-",
        }
        self._spawn([self.executable], RunAs(env=env))
        try:
            deadline = time.monotonic() + self.startup_timeout
            while b"Server startup complete" not in self.log_path.read_bytes():
                self._check_alive("rabbitmq-server")
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"rabbitmq-server did not start within {self.startup_timeout:.0f}s; "
                        f"log:\n{tail(self.log_path)}"
                    )
                time.sleep(0.1)
        except BaseException:
            self.stop()  # the node, its epmd and its directory
            raise
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            # The node and its script share a process group of their own (only
            # while its leader lives is the group id surely still ours).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self._reap(signal.SIGKILL, 10)
        if self.epmd_port:
            self._stop_epmd()
            self.epmd_port = 0
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _stop_epmd(self) -> None:
        """Stop the epmd this node started on its private port (it daemonises,
        so it left the node's process group): asked to stop on that port, the
        way epmd is meant to be stopped, once the node is gone from it."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                answer = subprocess.run(
                    ["epmd", "-port", str(self.epmd_port), "-kill"],
                    capture_output=True,
                    timeout=5,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired):
                return
            text = answer.stdout + answer.stderr
            if b"Killed" in text or b"Cannot connect" in text or b"not running" in text:
                return
            time.sleep(0.1)  # "living nodes": the node's socket is not closed yet
