"""``python -m scripts.faults <scenario|all> [--dir .cluster] [--seconds N]``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from scripts import cluster
from scripts.faults.report import Report
from scripts.faults.scenarios import SCENARIOS, run_scenario

#: Seconds of load per scenario, and publishes a second, by default.
SECONDS = 20.0
RATE = 40.0


def run_all(
    names: Sequence[str], directory: Path, seconds: float = SECONDS, rate: float = RATE
) -> list[Report]:
    """Run the scenarios ``names`` in turn on the cluster in ``directory``
    (started there, and stopped after, if none runs); their reports."""
    directory = directory.resolve()
    started = not (directory / cluster.STATE).exists()
    if started:
        print(f"no cluster in {directory}: starting one", flush=True)
        state = cluster.up(directory)
    else:
        state = cluster.State.load(directory)
    try:
        reports = []
        for name in names:
            print(f"{name}: {SCENARIOS[name].about}", flush=True)
            report = run_scenario(SCENARIOS[name], state, seconds, rate, log=_say)
            print(report.text(), flush=True)
            reports.append(report)
        return reports
    finally:
        if started:
            cluster.down(directory)


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.faults",
        description=sys.modules["scripts.faults"].__doc__,
        epilog="scenarios:\n" + "\n".join(f"  {n}: {s.about}" for n, s in SCENARIOS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("scenario", choices=[*SCENARIOS, "all"])
    parser.add_argument(
        "--dir", type=Path, default=cluster.DEFAULT_DIR, help="the cluster's state directory"
    )
    parser.add_argument("--seconds", type=float, default=SECONDS, help="load per scenario (≥ 8)")
    parser.add_argument("--rate", type=float, default=RATE, help="publishes a second")
    parser.add_argument("--json", type=Path, help="also write the reports here")
    args = parser.parse_args(argv)
    if args.seconds < 8 or args.rate <= 0:
        parser.error("--seconds must be at least 8 and --rate above 0")
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    try:
        reports = run_all(names, args.dir, args.seconds, args.rate)
    except (cluster.ClusterError, RuntimeError) as exc:
        print(f"faults: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.json:
        args.json.write_text(json.dumps([r.as_dict() for r in reports], indent=2) + "\n")
    failed = [r.scenario for r in reports if r.failures]
    print(
        f"{len(reports) - len(failed)} of {len(reports)} scenarios passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
