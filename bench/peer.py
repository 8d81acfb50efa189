"""Peer bench: Stream Framework (getstream's unmaintained Python feed library) on a given graph.

Stream Framework runs in a venv of its own, ``bench/.peer-venv/`` (made on
first use, git-ignored): its last release, 1.4.0, needs ``redis==2.10.6`` (its
sorted-set writes use the ``zadd(key, score, member, ...)`` form that
redis-py 3 dropped) and runs on Python 3.11 with a Celery 5 in eager mode and
``six``. ``bench/peers/stream_framework_run.py`` runs there against a private
redis-server and reports one JSON line, read here.

Other benches call ``run_stream_framework(follows, publishers)`` with their
own graph. ``python -m bench --only peer`` runs it on a power-law graph of
2,000 users and ~100k follows with publishers drawn by popularity;
``self_test()`` on a small one, for development.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.harness import RedisServer, Row

PEER_VENV = Path(__file__).resolve().with_name(".peer-venv")
RUNNER = Path(__file__).resolve().with_name("peers") / "stream_framework_run.py"
# The last PyPI release; GitHub HEAD differs from it only in fixes the runner
# does not need or makes itself (see its import_manager_module). Celery and
# six are pinned to what the project's venv has, for a run that repeats.
REQUIREMENTS = ("stream-framework==1.4.0", "redis==2.10.6", "celery==5.7.0", "six==1.17.0")
PEER_PYTHON = (3, 11)


@dataclass(frozen=True)
class GraphSpec:
    users: int
    follows: int
    mean_fanout: float
    publishes: int
    seed: int = 20_240_611


# The workload the project issue measured Stream Framework on.
FULL = GraphSpec(users=2_000, follows=100_000, mean_fanout=570, publishes=500)
# For development and ``--quick``: seconds, not minutes.
SMALL = GraphSpec(users=200, follows=5_000, mean_fanout=60, publishes=200)


def peer_python() -> Path:
    """The peer venv's python, the venv made (or remade) when its pins changed."""
    python = PEER_VENV / "bin" / "python"
    stamp = PEER_VENV / "requirements.txt"
    wanted = "\n".join(REQUIREMENTS) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    shutil.rmtree(PEER_VENV, ignore_errors=True)
    print(f"  making {PEER_VENV} ({', '.join(REQUIREMENTS)})", flush=True)
    subprocess.run([base_python(), "-m", "venv", str(PEER_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *REQUIREMENTS], check=True)
    # Written last, so an install that failed half-way is redone next time.
    stamp.write_text(wanted)
    return python


def base_python() -> str:
    if sys.version_info[:2] == PEER_PYTHON:
        return sys.executable
    name = "python{}.{}".format(*PEER_PYTHON)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"the Stream Framework peer venv needs {name}")
    return found


def run_peer(follows: list[tuple[str, str]], publishers: list[str]) -> dict[str, Any]:
    """The runner's whole report (numbers and the versions it ran with)."""
    python = peer_python()
    tmp = Path(tempfile.mkdtemp(prefix="tidings-bench-peer-"))
    try:
        workload = tmp / "workload.json"
        workload.write_text(json.dumps({"follows": follows, "publishers": publishers}))
        # -I: no PYTHONPATH or user site of ours reaches the peer's interpreter.
        command = [str(python), "-I", str(RUNNER), str(workload)]
        with RedisServer() as server:
            proc = subprocess.run([*command, server.url], capture_output=True, text=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"Stream Framework run failed ({proc.returncode}):\n{proc.stderr}")
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def run_stream_framework(follows: list[tuple[str, str]], publishers: list[str]) -> dict[str, float]:
    """Stream Framework publishing one activity per entry of ``publishers``, timed.

    ``follows`` are (follower, source) pairs; they are set up untimed. Each
    publish is ``Manager.add_user_activity`` with its fan-out done (eager
    Celery). Returns activities, seconds, activities_per_s, entries (timeline
    entries written: the publishers' follower counts summed), entries_per_s
    and cpu_seconds (the Stream Framework process's CPU time in the timed part).
    """
    report = run_peer(follows, publishers)
    return {key: float(value) for key, value in report.items() if isinstance(value, int | float)}


def power_law_graph(spec: GraphSpec) -> tuple[list[tuple[str, str]], list[str]]:
    """Follows whose follower counts fall off as a power of popularity rank, and publishers.

    User ``r`` (by rank) has about ``spec.follows * (r + 1) ** -alpha / norm``
    followers, at most every other user, drawn uniformly; alpha is chosen so
    that a publisher drawn with probability proportional to its follower
    count has ``spec.mean_fanout`` followers on average. Fixed by ``spec.seed``.
    """
    counts = follower_counts(spec.users, spec.follows, solve_alpha(spec))
    rng = random.Random(spec.seed)
    names = [f"user:{i:05d}" for i in range(spec.users)]
    follows: list[tuple[str, str]] = []
    for source, count in enumerate(counts):
        others = rng.sample(range(spec.users - 1), count)
        follows += [(names[o + (o >= source)], names[source]) for o in others]
    publishers = rng.choices(names, weights=counts, k=spec.publishes)
    return follows, publishers


def follower_counts(users: int, follows: int, alpha: float) -> list[int]:
    """``follows`` split over ``users`` in proportion to ``(rank + 1) ** -alpha``.

    A user can have at most ``users - 1`` followers; what the most popular
    ones cannot take is spread over the rest in the same proportions, so the
    total stays ``follows`` (give or take rounding).
    """
    cap = users - 1
    weights = [(rank + 1) ** -alpha for rank in range(users)]
    rest = sum(weights)
    capped = 0
    # The first ``capped`` users (the heaviest weights) are at the cap.
    while capped < users and (follows - capped * cap) * weights[capped] / rest > cap:
        rest -= weights[capped]
        capped += 1
    scale = (follows - capped * cap) / rest if rest else 0.0
    return [cap if rank < capped else round(scale * w) for rank, w in enumerate(weights)]


def expected_fanout(counts: list[int]) -> float:
    """Mean follower count of a publisher drawn with probability proportional to it."""
    return sum(c * c for c in counts) / sum(counts)


def solve_alpha(spec: GraphSpec) -> float:
    """The exponent that gives ``spec.mean_fanout``, by bisection.

    The expected fan-out grows with alpha, from ``follows / users`` at 0
    (everyone equally followed) towards ``users - 1`` as popularity
    concentrates on a few users.
    """
    if spec.follows > spec.users * (spec.users - 1):
        raise ValueError(f"{spec.users} users cannot make {spec.follows} follows")

    def fanout(alpha: float) -> float:
        return expected_fanout(follower_counts(spec.users, spec.follows, alpha))

    low, high = 0.0, 8.0
    if not fanout(low) <= spec.mean_fanout <= fanout(high):
        raise ValueError(f"a mean fan-out of {spec.mean_fanout} is out of reach for {spec}")
    for _ in range(40):
        mid = (low + high) / 2
        if fanout(mid) < spec.mean_fanout:
            low = mid
        else:
            high = mid
    return high


def self_test() -> dict[str, float]:
    """Stream Framework on the small graph: ``python -c 'from bench.peer import self_test; print(self_test())'``."""
    return run_stream_framework(*power_law_graph(SMALL))


def run(quick: bool) -> list[Row]:
    """``--only peer``: Stream Framework on the power-law graph, as bench rows."""
    spec = SMALL if quick else FULL
    follows, publishers = power_law_graph(spec)
    report = run_peer(follows, publishers)
    versions = report["versions"]
    fanout = report["entries"] / report["activities"]
    print(
        f"  Stream Framework {versions['stream-framework']}: "
        f"{report['activities_per_s']:.1f} activities/s, {report['entries_per_s']:,.0f} entries/s "
        f"({report['activities']} publishes, mean fan-out {fanout:.0f}, {report['seconds']:.1f} s, "
        f"{report['cpu_seconds']:.1f} s CPU)",
        flush=True,
    )
    size = f"{spec.users:,} users, {len(follows):,} follows, mean fan-out {fanout:.0f}"
    detail = {"graph": asdict(spec), "versions": versions, "requirements": list(REQUIREMENTS)}
    detail |= {key: value for key, value in report.items() if key != "versions"}
    return [
        Row(
            "peer: Stream Framework publish + fan-out",
            "redis",
            size,
            report["activities_per_s"],
            "activities/s",
            detail=detail,
        ),
        Row(
            "peer: Stream Framework timeline entries written",
            "redis",
            size,
            report["entries_per_s"],
            "entries/s",
            detail=detail,
        ),
    ]
