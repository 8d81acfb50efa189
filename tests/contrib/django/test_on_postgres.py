"""The Django tests (this directory) with Django's database on PostgreSQL:
run again, in a pytest of their own, with the test project's
``DJPROJECT_DATABASE_URL`` naming a database on the suite's private server.
The rest of the suite's run has Django on SQLite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from legacy import HERE, ON_POSTGRES

ROOT = HERE.parents[2]


@pytest.mark.postgres
@pytest.mark.skipif(ON_POSTGRES, reason="this is the run on PostgreSQL")
@pytest.mark.timeout(600)
def test_the_django_tests_pass_with_django_on_postgres(postgres_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TIDINGS_"))}
    env["DJPROJECT_DATABASE_URL"] = postgres_url
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(HERE),
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-q",
            # Those start a PostgreSQL server of their own for tidings' database:
            # they ran in this run already.
            "-m",
            "not postgres",
            f"--basetemp={tmp_path / 'run'}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    counts = re.search(r"(\d+) passed", done.stdout)
    assert counts, tail
    assert int(counts.group(1)) >= 20, tail
    assert "failed" not in done.stdout.splitlines()[-1], tail
