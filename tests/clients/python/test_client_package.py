"""The client's distribution as a caller installs it: its wheel, alone in a
fresh venv, imports and calls a service without the server's dependencies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from client_services import SERVER_TOKEN, Service

CLIENT = Path(__file__).resolve().parents[3] / "clients" / "python"
UV = Path(sys.executable).parent / "uv"
#: What the server needs and a caller must not have to install.
SERVER_ONLY = ("fastapi", "sqlalchemy", "uvicorn", "starlette", "pydantic", "tidings")

pytestmark = pytest.mark.timeout(300)


def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_wheel_alone_imports_and_calls_a_service(
    tmp_path: Path, tidings_service: Service
) -> None:
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path, CLIENT)
    (wheel,) = tmp_path.glob("tidings_client-*.whl")
    venv = tmp_path / "venv"
    run(UV, "venv", "-q", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    run(UV, "pip", "install", "-q", "--python", python, wheel)
    probe = (
        "import importlib.util, pathlib, sys, tidings_client\n"
        "from tidings_client import Client\n"
        f"absent = [m for m in {SERVER_ONLY!r} if importlib.util.find_spec(m)]\n"
        "typed = (pathlib.Path(tidings_client.__file__).parent / 'py.typed').exists()\n"
        f"with Client({tidings_service.url!r}, {SERVER_TOKEN!r}) as client:\n"
        "    print(absent, typed, client.health()['status'])\n"
    )
    assert run(python, "-c", probe).stdout == "[] True ok\n"
