"""The package as a user installs it: ``pip install tidings`` alone, and with
each extra alone, each in a venv of its own built from this checkout.

The rest of the suite runs in the development venv, which holds every extra:
an import of Redis, psycopg or Celery on the embedded default's path would
pass there and crash a newcomer's first example. Here the drivers are really
absent (not blocked by an import hook), and what a newcomer runs first is run
as a newcomer runs it: the README's example, ``tidings --help``, the demo's
seeding and ``tidings serve --app``.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from http_server import free_port
from tidings.http.auth import mint
from webapp_modules import load_modules

ROOT = Path(__file__).resolve().parents[2]
SECRET = "package-check-secret-0123456789abcdef"
#: The top-level modules of each extra's drivers.
DRIVERS = {"redis": "redis", "postgres": "psycopg", "celery": "celery"}

# Building venvs and installing into them takes a while on two cores.
pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout as a wheel, built once for every test process of this
    run: xdist workers share the parent of their temporary directories (a
    run without workers has its own)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    with (shared / "tidings-wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = sorted((shared / "wheel").glob("tidings-*.whl"))
        if not built:
            into = str(shared / "wheel")
            run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", into, str(ROOT)])
            built = sorted((shared / "wheel").glob("tidings-*.whl"))
    assert len(built) == 1, built
    return built[0]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: none of this suite's Python path,
    venv or tidings settings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("TIDINGS_", "PYTHON", "VIRTUAL_ENV", "PYTEST", "COV_"))
    }
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def run(
    argv: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if check:
        assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


#: uv (a dev dependency) makes and fills the venvs: what ``pip install`` does,
#: in a few seconds rather than half a minute a venv.
UV = Path(sys.executable).parent / "uv"


def make_venv(where: Path, wheel: Path, extra: str | None = None) -> Path:
    """A new venv holding the wheel (with ``extra``) and what it requires, as
    ``pip install tidings[extra]`` makes it; returns its bin directory."""
    run([str(UV), "venv", "-q", "--python", sys.executable, str(where)], timeout=120)
    spec = f"{wheel}[{extra}]" if extra else str(wheel)
    python = str(where / "bin" / "python")
    # Compiled at install, as pip does: with PYTHONDONTWRITEBYTECODE set (CI
    # sets it) every process the test starts would compile its imports again.
    run(
        [str(UV), "pip", "install", "-q", "--compile-bytecode", "--python", python, spec],
        timeout=400,
    )
    return where / "bin"


def importable(bin_dir: Path, module: str) -> bool:
    found = run([str(bin_dir / "python"), "-c", f"import {module}"], check=False)
    return found.returncode == 0


def readme_example() -> str:
    """The README's first library example, as printed there."""
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"## As a library\n\n[^`]*`[^`]*`[^\n]*\n\n```python\n(.*?)```", readme, re.S)
    assert found, "the README's 'As a library' section opens with a python block"
    return found.group(1)


@contextmanager
def serving(bin_dir: Path, cwd: Path, *options: str, **env: str) -> Iterator[str]:
    """``tidings serve`` from ``bin_dir`` on a free port, once ``/healthz``
    answers; it must stop cleanly on Ctrl-C (SIGINT) after."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = cwd / f"serve-{port}.log"
    argv = [str(bin_dir / "tidings"), "serve", "--port", str(port), *options]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=clean_env(TIDINGS_SECRET=SECRET, **env),
        )
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and not _answers(f"{url}/healthz"):
            assert time.monotonic() < deadline, f"no answer in 60 s:\n{log.read_text()}"
            time.sleep(0.1)
        assert proc.poll() is None, f"exited with {proc.returncode}:\n{log.read_text()}"
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    assert code == 0, log.read_text()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def publish_and_read(url: str) -> None:
    """One activity published and read back over HTTP with a server token."""
    headers = {"Authorization": f"Bearer {mint(SECRET, '*', server=True)}"}
    body = {"actor": "bob", "verb": "post", "object": "photo:1", "foreign_id": "p1"}
    added = httpx.post(f"{url}/v1/feeds/user/bob/activities", json=body, headers=headers)
    assert added.status_code in (200, 201), added.text
    page = httpx.get(f"{url}/v1/feeds/user/bob", headers=headers)
    assert page.status_code == 200, page.text
    assert [a["foreign_id"] for a in page.json()["results"]] == ["p1"]


def test_the_package_alone_runs_what_a_newcomer_runs(wheel: Path, tmp_path: Path) -> None:
    bin_dir = make_venv(tmp_path / "venv", wheel)
    for driver in DRIVERS.values():
        assert not importable(bin_dir, driver), f"{driver} came with the package alone"
    # tidings.contrib.django is imported by a Django project alone (tidings[django]).
    assert not importable(bin_dir, "django"), "Django came with the package alone"
    work = tmp_path / "work"
    work.mkdir()

    helped = run([str(bin_dir / "tidings"), "--help"], cwd=work)
    assert "serve" in helped.stdout
    assert "demo" in helped.stdout

    # The README's example prints what the README says, and again on a rerun.
    (work / "example.py").write_text(readme_example())
    for _ in range(2):
        printed = run([str(bin_dir / "python"), "example.py"], cwd=work)
        assert printed.stdout == "bob post photo:17\n", printed.stderr

    # The default runner (background threads), as `Tidings()` gives it.
    threaded = work / "threaded"
    threaded.mkdir()
    (threaded / "threaded.py").write_text(THREADED)
    assert run([str(bin_dir / "python"), "threaded.py"], cwd=threaded).stdout == "delivered\n"

    small = ["--users", "40", "--activities", "400", "--fans", "80"]
    seeded = run(
        [
            str(bin_dir / "tidings"),
            "--database-url",
            "sqlite:///demo.db",
            "demo",
            "--no-serve",
            *small,
        ],
        cwd=work,
        timeout=180,
    )
    assert "curl" in seeded.stdout, seeded.stdout[-2000:]

    served = work / "served"
    served.mkdir()
    with serving(bin_dir, served, "--app") as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        page = httpx.get(f"{url}/")
        assert page.status_code == 200
        assert "text/html" in page.headers["content-type"]
        # The page's ES modules ship in the package (package-data), every one.
        modules = load_modules(url)
        assert len(modules) > 1
        assert {path: got.status_code for path, got in modules.items()} == dict.fromkeys(
            modules, 200
        )
        # The JS client the page imports is the wheel's copy of clients/js's (setup.py).
        client = ROOT / "clients" / "js" / "tidings.mjs"
        assert modules["/static/js/tidings.mjs"].content == client.read_bytes()
        publish_and_read(url)

    # A setting that needs a driver the install lacks says which extra to add.
    for extra, setting in (
        ("redis", {"TIDINGS_REDIS_URL": "redis://127.0.0.1:1/0"}),
        ("postgres", {"TIDINGS_DATABASE_URL": "postgresql+psycopg://u@127.0.0.1:1/x"}),
        ("celery", {"TIDINGS_TASK_RUNNER": "celery"}),
    ):
        refused = run(
            [str(bin_dir / "tidings"), "serve", "--port", str(free_port())],
            cwd=work,
            env=clean_env(TIDINGS_SECRET=SECRET, **setting),
            check=False,
            timeout=60,
        )
        said = " ".join((refused.stdout + refused.stderr).split())  # as rich wrapped it
        assert refused.returncode != 0
        assert f"pip install 'tidings[{extra}]'" in said, said


#: The engine with its default runner, waiting (bounded) for the delivery.
THREADED = """
import time
from tidings import Tidings

with Tidings() as feeds:
    feeds.follow("timeline:alice", "user:bob")
    feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "photo:17"})
    deadline = time.monotonic() + 30
    while not feeds.read("timeline:alice").results:
        assert time.monotonic() < deadline, "not delivered in 30 s"
        time.sleep(0.02)
print("delivered")
"""


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("celery", marks=pytest.mark.redis),
    ],
)
def test_each_extra_alone_serves_with_the_settings_that_need_it(
    extra: str, wheel: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    bin_dir = make_venv(tmp_path / "venv", wheel, extra)
    assert importable(bin_dir, DRIVERS[extra])
    for other, driver in DRIVERS.items():
        # Celery's Redis transport brings the Redis driver with it.
        if other != extra and not (extra == "celery" and other == "redis"):
            assert not importable(bin_dir, driver), f"{driver} came with tidings[{extra}]"
    settings: dict[str, str]
    if extra == "redis":
        settings = {"TIDINGS_REDIS_URL": request.getfixturevalue("redis_url")}
        module = "tidings.stores.redis, tidings.bus.redis"
    elif extra == "postgres":
        settings = {"TIDINGS_DATABASE_URL": request.getfixturevalue("postgres_url")}
        module = "tidings.canonical.db"
    else:
        broker = request.getfixturevalue("redis_url")
        settings = {"TIDINGS_TASK_RUNNER": "celery", "TIDINGS_BROKER_URL": broker}
        module = "tidings.task_runners.celery"
    assert importable(bin_dir, module)
    with serving(bin_dir, tmp_path, **settings) as url:
        publish_and_read(url)
