"""``python -m scripts.cluster`` refuses what it must, without starting
anything. The cluster itself is started once, in tests/scripts/test_faults.py,
which checks every part of it and runs the fault scenarios on it."""

from __future__ import annotations

from pathlib import Path

from cluster_checks import run


def test_up_refuses_a_directory_that_holds_something_else(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    refused = run("up", "--dir", tmp_path)
    assert refused.returncode == 1
    assert "is not empty and holds no cluster" in refused.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_down_without_a_cluster_says_so(tmp_path: Path) -> None:
    refused = run("down", "--dir", tmp_path)
    assert refused.returncode == 1
    assert f"no cluster recorded in {tmp_path}" in refused.stderr


def test_up_refuses_timeouts_out_of_range(tmp_path: Path) -> None:
    refused = run("up", "--dir", tmp_path / "c", "--redis-node-timeout", "10")
    assert refused.returncode == 2
    assert "--redis-node-timeout must be 1000 to 60000 ms, not 10" in refused.stderr
    refused = run("up", "--dir", tmp_path / "c", "--redispatch-seconds", "0")
    assert refused.returncode == 2
    assert "--redispatch-seconds must be 0.1 to 3600, not 0" in refused.stderr
    assert not (tmp_path / "c").exists()
