"""SRE oracle trials: median wall time of one oracle trial, and optionally the whole catalog.

``python benchmarks/sre_oracle.py`` runs the smoke scenario with the oracle several times
through the real runner and prints the median trial time and its phases. ``--all`` also runs
every SRE scenario with the oracle on 2 workers and prints the wall time (long).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from itbench.bench import Bench
from itbench.models import RunConfig, TrialStatus
from itbench.runner import Runner


def run(scenarios: list[str], workers: int, out: Path) -> tuple[float, list]:  # type: ignore[type-arg]
    """Run the oracle; returns the wall time and the results."""
    bench = Bench()
    start = time.perf_counter()
    outcome = Runner(
        bench, RunConfig(agent="oracle", scenarios=scenarios, workers=workers), out
    ).run()
    return time.perf_counter() - start, outcome.results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="sre/smoke-cart-bad-release")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--all", action="store_true", help="Also run every SRE scenario.")
    args = parser.parse_args()
    totals = []
    phases: dict[str, list[float]] = {}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="sre-oracle-") as tmp:
            _, results = run([args.scenario], 1, Path(tmp) / "run")
        r = results[0]
        assert r.status is TrialStatus.passed, (r.status, r.error)
        totals.append(r.timings.total or 0.0)
        for key in ("setup", "inject", "ready", "agent", "evaluate", "teardown"):
            phases.setdefault(key, []).append(getattr(r.timings, key) or 0.0)
    print(f"sre oracle trial: {args.scenario}, {args.runs} runs")
    print(f"  trial total median {statistics.median(totals):.2f} s (min {min(totals):.2f})")
    for key, vals in phases.items():
        print(f"  {key:9s} median {statistics.median(vals):6.2f} s")
    if args.all:
        with tempfile.TemporaryDirectory(prefix="sre-oracle-all-") as tmp:
            wall, results = run(["sre/*"], 2, Path(tmp) / "run")
        passed = sum(r.status is TrialStatus.passed for r in results)
        print(
            f"  all SRE scenarios with the oracle on 2 workers: {wall:.0f} s wall, "
            f"{passed}/{len(results)} passed"
        )


if __name__ == "__main__":
    main()
