"""SRE test-retest: does a fixed correct answer get the same diagnosis verdict trial after trial?

For every incident problem (or those given), one draw of the problem (targets, parameters,
noise, decoys) is fixed and run ``--trials`` times with the oracle through the real runner
(detection, localization and diagnosis only: mitigation does not move the measurement). Each
trial's evaluation keeps the spread the environment measured at handover. The fixed answer is
the ground truth's roots and fault type with the *consensus* spread: the edges measured
degrading in more than half of the trials. Its diagnosis verdict is then judged against every
trial's own measurement with the evaluator's own function, and the benchmark reports per
problem how many trials agree with the majority verdict (goal: at least 19 of 20), how many
pass, how often the spread was empty, whether the propagation was scored, and the readiness
time (fault injected to observable with the spread's window filled: median and slowest).

``python benchmarks/sre_retest.py -s 'sre/wrong-upstream' --trials 20`` (one problem);
without ``-s``: the whole catalog (long: about 25 s per trial on 2 workers).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from itbench_sre.retest import fixed_draw, judge, reliable
from itbench_sre.spec import SreSpec

from itbench.bench import Bench
from itbench.models import RunConfig
from itbench.runner import Runner

ROOT = Path(__file__).resolve().parents[1]


def fixed_draws(patterns: list[str], seed: int, catalog: Path) -> dict[str, SreSpec]:
    """One fixed draw of each incident problem matching ``patterns``, written under ``catalog``."""
    out: dict[str, SreSpec] = {}
    for path in sorted((ROOT / "scenarios" / "sre").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not any(fnmatch.fnmatch(data["id"], p) for p in patterns):
            continue
        spec = SreSpec.model_validate(data)
        if spec.faults:
            drawn = fixed_draw(spec, seed, catalog)
            out[drawn.id] = drawn
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-s", "--scenarios", action="append", default=[])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="Run directory (default: a temporary one).")
    parser.add_argument("--json", type=Path, help="Write the per-problem figures here.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sre-retest-") as tmp:
        catalog = Path(tmp) / "catalog"
        catalog.mkdir()
        specs = fixed_draws(args.scenarios or ["sre/*"], args.seed, catalog)
        out = args.out or Path(tmp) / "run"
        start = time.perf_counter()
        Runner(
            Bench(scenario_paths=[catalog]),
            RunConfig(
                agent="oracle",
                scenarios=list(specs),
                trials=args.trials,
                workers=args.workers,
                scenario_paths=[str(catalog)],
            ),
            out,
        ).run()
        wall = time.perf_counter() - start
        records: dict[str, list[dict[str, Any] | None]] = {sid: [] for sid in specs}
        ready: dict[str, list[float]] = {sid: [] for sid in specs}
        for line in (out / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            timings = row.get("timings") or {}
            if timings.get("ready") is not None:
                ready.setdefault(row["scenario_id"], []).append(
                    float(timings["ready"]) + float(timings.get("inject") or 0)
                )
            evaluation = out / "trials" / row["handle"] / "evaluation.json"
            spread = None
            if evaluation.exists():
                spread = json.loads(evaluation.read_text())["details"].get("spread")
            records.setdefault(row["scenario_id"], []).append(spread)
    figures = {sid: judge(specs[sid], records[sid], ready[sid]) for sid in specs}
    print(f"sre test-retest: {len(specs)} problems x {args.trials} trials, {wall:.0f} s wall")
    print(
        f"{'problem':32s} {'agree':>7s} {'pass':>5s} {'empty':>5s} {'scored':>6s} "
        f"{'window':>6s} {'ready':>6s} {'slowest':>7s}"
    )
    for sid, f in figures.items():
        n = f["measured"]
        print(
            f"{sid.removeprefix('sre/retest-'):32s} {f['agree']:>3d}/{n:<3d} {f['passed']:>5d} "
            f"{f['empty']:>5d} {f['scored']:>6d} {f['window_s'] or 0:>6.1f} "
            f"{f['ready_median_s'] or 0:>6.1f} {f['ready_max_s'] or 0:>7.1f}"
        )
    print(f"reliable (>= 95 % agree): {sum(map(reliable, figures.values()))}/{len(figures)}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
