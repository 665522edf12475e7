"""Trial throughput: 1 against 2 local workers (threads and processes), and Ray against local.

For each domain (CISO and FinOps by default: their trials are short and CPU-light, goal: 2
workers >= 1.7x the trials per minute of 1), runs the same set of oracle trials through the
real CLI with ``--workers 1``, ``--workers 2`` (threads of one process) and ``--workers 2
--executor processes``, in the same run, and prints trials per minute and the ratios. Two
figures each: the wall time of the whole command (start-up included), and the span from the
first trial's start to the last one's end as the results record it (the rate a long run keeps).
With ``--ray`` it also runs them on the Ray executor with a local 2-CPU instance (started by the
run itself), against the local executor with 2 workers.

Run: .venv/bin/python benchmarks/core_throughput.py [--domain ciso --domain finops] [--trials N]
[--runs R] [--ray]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ITBENCH = [sys.executable, "-m", "itbench.cli"]


def timed_run(args: list[str], out: Path) -> tuple[float, float]:
    """Seconds of one ``itbench evaluate`` (exit 0 or 1 accepted), and of its trials' span."""
    start = time.perf_counter()
    proc = subprocess.run(
        [*ITBENCH, "evaluate", *args, "--out", str(out), "--json"], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"itbench evaluate failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    first = min(datetime.fromisoformat(r["started_at"]) for r in rows)
    last = max(datetime.fromisoformat(r["finished_at"]) for r in rows)
    return elapsed, (last - first).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--domain", action="append", dest="domains")
    parser.add_argument("--trials", type=int, default=8, help="Trials per scenario pattern.")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ray", action="store_true", help="Also the Ray executor (itbench[ray]).")
    args = parser.parse_args()
    domains = args.domains or ["ciso", "finops"]
    for domain in domains:
        select = ["--agent", "oracle", "--tag", "smoke", "--domain", domain]
        select += ["--trials", str(args.trials)]
        variants = {
            "1 worker": ["--workers", "1"],
            "2 workers": ["--workers", "2"],
            "2 processes": ["--workers", "2", "--executor", "processes"],
        }
        if args.ray:
            variants["ray, 2 CPUs"] = ["--workers", "2", "--executor", "ray"]
        walls: dict[str, list[float]] = {name: [] for name in variants}
        spans: dict[str, list[float]] = {name: [] for name in variants}
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                for name, extra in variants.items():
                    out = Path(tmp) / f"{name.replace(' ', '-').replace(',', '')}-{i}"
                    wall, span = timed_run([*select, *extra], out)
                    walls[name].append(wall)
                    spans[name].append(span)
        for label, samples in (("wall", walls), ("trials' span", spans)):
            rate = {n: 60 * args.trials / statistics.median(s) for n, s in samples.items()}
            line = ", ".join(f"{n}: {v:.1f} trials/min" for n, v in rate.items())
            print(
                f"{domain} ({label}): {line} (median of {args.runs} runs of {args.trials} trials)"
            )
            for name in ("2 workers", "2 processes"):
                ratio = rate[name] / rate["1 worker"]
                print(f"{domain} ({label}): {name} / 1 worker = {ratio:.2f}x (goal >= 1.7x)")
            if args.ray:
                ray_ratio = rate["ray, 2 CPUs"] / rate["2 workers"]
                print(f"{domain} ({label}): ray / local, 2 CPUs each = {ray_ratio:.2f}x")


if __name__ == "__main__":
    main()
