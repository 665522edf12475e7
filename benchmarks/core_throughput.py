"""Trial throughput: 1 against 2 local workers, and Ray against the local executor.

For each domain (CISO and FinOps by default: their trials are short and CPU-light, goal: 2
workers >= 1.7x the trials per minute of 1), runs the same set of oracle trials through the
real CLI with ``--workers 1`` and ``--workers 2``, in the same run, and prints trials per
minute and the ratio. With ``--ray`` it also runs them on the Ray executor with a local
2-CPU instance (started by the run itself), against the local executor with 2 workers.

Run: .venv/bin/python benchmarks/core_throughput.py [--domain ciso --domain finops] [--trials N]
[--runs R] [--ray]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ITBENCH = [sys.executable, "-m", "itbench.cli"]


def timed_run(args: list[str], out: Path) -> float:
    """Seconds of one ``itbench evaluate`` (exit 0 or 1 accepted: errors are counted apart)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [*ITBENCH, "evaluate", *args, "--out", str(out), "--json"], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"itbench evaluate failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed


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
        variants = {"1 worker": ["--workers", "1"], "2 workers": ["--workers", "2"]}
        if args.ray:
            variants["ray, 2 CPUs"] = ["--workers", "2", "--executor", "ray"]
        samples: dict[str, list[float]] = {name: [] for name in variants}
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                for name, extra in variants.items():
                    out = Path(tmp) / f"{name.replace(' ', '-').replace(',', '')}-{i}"
                    samples[name].append(timed_run([*select, *extra], out))
        per_minute = {n: 60 * args.trials / statistics.median(s) for n, s in samples.items()}
        line = ", ".join(f"{n}: {v:.1f} trials/min" for n, v in per_minute.items())
        print(f"{domain}: {line} (median of {args.runs} runs of {args.trials} trials)")
        ratio = per_minute["2 workers"] / per_minute["1 worker"]
        print(f"{domain}: 2 workers / 1 worker = {ratio:.2f}x (goal >= 1.7x)")
        if args.ray:
            ray_ratio = per_minute["ray, 2 CPUs"] / per_minute["2 workers"]
            print(f"{domain}: ray / local, 2 CPUs each = {ray_ratio:.2f}x (run start included)")


if __name__ == "__main__":
    main()
