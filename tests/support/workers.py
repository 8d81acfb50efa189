"""``tidings worker`` subprocesses for the Celery tests (any broker)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

TIDINGS = str(Path(sys.executable).with_name("tidings"))


class Worker:
    """``tidings worker`` as a child process in a session of its own, so a
    SIGKILL takes its pool processes down with it, as a crashed machine would."""

    def __init__(
        self,
        settings: dict[str, Any],
        log: Path,
        concurrency: int = 2,
        queues: str | None = None,
    ) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
        env.update({f"TIDINGS_{k.upper()}": str(v) for k, v in settings.items()})
        env["TIDINGS_CONFIG"] = str(log.with_name("absent.toml"))
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [
                TIDINGS,
                "worker",
                f"--concurrency={concurrency}",
                *([f"--queues={queues}"] if queues else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=15)
        self.kill()
