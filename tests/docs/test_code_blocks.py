"""Every code block in the README and the documentation site runs, so a
renamed argument breaks a test rather than a reader.

- ``python`` blocks run in order in one interpreter per page (a page reads
  as one session), in a fresh directory;
- ``bash`` blocks run with ``bash -euo pipefail`` against a ``tidings serve``
  this test starts (``localhost:8000`` in a block is that server), with
  ``$TOKEN``/``$SERVER`` (a server token), ``$ALICE`` (alice's token),
  ``$ID`` (an activity in ``user:bob``) and ``$RID`` (a comment on it) set;
- ``javascript`` blocks run under Node as ES modules against that server;
- ``toml`` blocks are settings files: ``Settings`` must load them.

A block that cannot run says why on the line before it:
``<!-- not run: the reason -->``. ``<!-- run: server -->`` before a python
block gives its page a server too (``TIDINGS_URL``, ``TIDINGS_TOKEN``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from http_server import tidings_serve
from tidings.http.auth import mint

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SECRET = "docs-" + "s" * 40
RUN = {"python", "bash", "javascript", "toml"}
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
_MARK = re.compile(r"<!-- (not run|run): *(.*?) *-->\s*\Z", re.S)
_LOCAL = re.compile(r"(?:https?://)?(?:localhost|127\.0\.0\.1):8000")
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    mark: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.search(before)
        found.append(
            Block(
                page,
                text.count("\n", 0, match.start()) + 1,
                {"sh": "bash", "shell": "bash", "js": "javascript", "py": "python"}.get(
                    match.group(1), match.group(1)
                ),
                match.group(2),
                (mark.group(1), mark.group(2)) if mark else None,
            )
        )
    return found


ALL = [b for page in PAGES for b in blocks(page)]


def to_run(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in RUN and (b.mark or ("",))[0] != "not run"]


def test_the_pages_have_code_to_run() -> None:
    assert len([b for b in ALL if b.lang in RUN]) >= 15


@pytest.mark.parametrize("block", [b for b in ALL if b.mark], ids=lambda b: b.where)
def test_a_block_left_out_says_why(block: Block) -> None:
    kind, reason = block.mark or ("", "")
    if kind == "not run":
        assert len(reason) >= 10, f"{block.where}: say why it is not run"
    else:
        assert reason == "server", f"{block.where}: unknown mark {reason!r}"


@pytest.mark.parametrize("lang", ["bash", "console", "shell", "sh"])
def test_no_other_shell_dialect(lang: str) -> None:
    # Every shell block is bash (or says it is not run): one runner to trust.
    if lang == "bash":
        return
    assert not [b.where for b in ALL if b.lang == lang]


# -- the runs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    url: str
    env: dict[str, str]


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``tidings serve`` on a free port with a fresh SQLite file, an activity
    and a comment in place for the blocks that name them; shared by the pages
    (starting one costs seconds), whose blocks write no ids another names."""
    with tidings_serve(tmp_path_factory.mktemp("docs-server"), secret=SECRET) as served:
        url = served.url
        token = mint(SECRET, "*", server=True)
        auth = {"Authorization": f"Bearer {token}"}
        posted = httpx.post(
            f"{url}/v1/feeds/user/bob/activities",
            headers=auth,
            json={"actor": "bob", "verb": "post", "object": "photo:17"},
        ).json()
        comment = httpx.post(
            f"{url}/v1/activities/{posted['id']}/reactions",
            headers=auth,
            json={"kind": "comment", "user": "alice", "data": {"text": "nice"}},
        ).json()
        yield Server(
            url,
            {
                "TIDINGS_SECRET": SECRET,
                "TIDINGS_URL": url,
                "TIDINGS_TOKEN": token,
                "TOKEN": token,
                "SERVER": token,
                "ALICE": mint(SECRET, "alice", ttl_seconds=3600),
                "ID": posted["id"],
                "RID": comment["id"],
            },
        )


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(extra or {})}
    env.pop("TIDINGS_CONFIG", None)
    return env


_SESSION = """
import json, sys
blocks = json.load(open(sys.argv[1]))
space = {"__name__": "__main__"}
for where, code in blocks:
    exec(compile(code, where, "exec"), space)
"""


# A block's curl fails on an HTTP error, as a reader would notice one; and it
# is quiet but for errors.
_CURL = 'curl() { command curl -sS --fail-with-body "$@"; echo; }\n'


def _needs_server(page: Path) -> bool:
    return any(
        b.lang in ("bash", "javascript") or b.mark == ("run", "server") for b in to_run(page)
    )


@pytest.mark.parametrize(
    "page", [p for p in PAGES if to_run(p)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_the_pages_blocks_run(page: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    run = to_run(page)
    served: Server | None = request.getfixturevalue("server") if _needs_server(page) else None
    extra = served.env if served else {}
    here = tmp_path / "work"
    here.mkdir()

    def local(code: str) -> str:
        return _LOCAL.sub(served.url, code) if served else code

    python = [(b.where, local(b.code)) for b in run if b.lang == "python"]
    if python:
        (tmp_path / "blocks.json").write_text(json.dumps(python))
        (tmp_path / "session.py").write_text(_SESSION)
        done = _run(
            [sys.executable, str(tmp_path / "session.py"), str(tmp_path / "blocks.json")],
            here,
            extra,
        )
        assert done.returncode == 0, (
            f"{page.name}: python blocks failed\n{done.stdout}{done.stderr}"
        )
    for block in run:
        if block.lang == "bash":
            done = _run(["bash", "-euo", "pipefail", "-c", _CURL + local(block.code)], here, extra)
        elif block.lang == "javascript":
            if shutil.which("node") is None:
                pytest.fail("node is needed for the JavaScript blocks (make test installs it)")
            # As `npm install ./clients/js` leaves it, for the bare import.
            modules = here / "node_modules"
            modules.mkdir(exist_ok=True)
            if not (modules / "tidings-client").exists():
                (modules / "tidings-client").symlink_to(ROOT / "clients" / "js")
            script = here / f"block{block.line}.mjs"
            script.write_text(local(block.code))
            done = _run(["node", str(script)], here, extra)
        elif block.lang == "toml":
            (here / "tidings.toml").write_text(block.code)
            done = _run(
                [sys.executable, "-c", "from tidings.settings import Settings; Settings.load()"],
                here,
                {},
            )
        else:
            continue
        assert done.returncode == 0, (
            f"{block.where} ({block.lang}) failed\n{done.stdout}{done.stderr}"
        )


def _run(argv: list[str], cwd: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``argv`` in a session of its own: a block that outlives its time (a
    server started in the foreground, say) is killed with everything it
    started, never left running after the test."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=_env(extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(argv[:2])}: still running after 90 s\n{out}{err}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what it left behind
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
