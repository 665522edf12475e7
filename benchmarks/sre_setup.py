"""SRE environment: time from setup start to "ready with fault observable", and peak memory.

Prints the median over several runs of setup + inject + wait-until-the-fault's-alert-fires for
one scenario (goal <= 10 s on a 2-core machine), the phases, the teardown time, and the peak
resident memory of all processes of one environment (services, datastores, Prometheus,
supervisord, load generator; goal < 1.5 GiB).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil
from itbench_sre.domain import SreDomain
from itbench_sre.environment import SreEnvironment

from itbench.catalog import ScenarioLoader
from itbench.domain import TrialContext
from itbench.ports import PortAllocator

CATALOG = Path(__file__).resolve().parents[1] / "scenarios" / "sre"


def env_rss(env: SreEnvironment) -> int:
    """Resident memory of every process belonging to the environment, in bytes."""
    marks = [str(env.shop.root)]
    if env.shop.shared is not None:
        marks.append(str(env.shop.shared))
    total = 0
    for proc in psutil.process_iter(["cmdline", "cwd", "memory_info"]):
        try:
            text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["cwd"] or "")
            if any(m in text for m in marks) and proc.info["memory_info"]:
                total += proc.info["memory_info"].rss
        except psutil.Error:
            continue
    return total


def one_run(domain: SreDomain, scenario: str, tmp: Path) -> dict[str, float]:
    """Set up one environment of ``scenario``; returns phase times and peak memory."""
    spec = ScenarioLoader({"sre": domain}).load([CATALOG]).scenarios[scenario]
    block = PortAllocator().acquire(domain.ports_per_trial)
    ctx = TrialContext("bench", 1, tmp / "trial", tmp / "ws", block.base, block.count)
    ctx.trial_dir.mkdir(parents=True)
    env = domain.create_environment(spec, ctx)
    assert isinstance(env, SreEnvironment)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, env_rss(env))
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    out: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        env.setup()
        t1 = time.perf_counter()
        sampler.start()
        env.inject()
        t2 = time.perf_counter()
        env.wait_observable(120)
        t3 = time.perf_counter()
        out = {"setup": t1 - t0, "inject": t2 - t1, "ready": t3 - t2, "total": t3 - t0}
        time.sleep(5)  # let the fault run a little: memory under incident load
    finally:
        stop.set()
        t4 = time.perf_counter()
        env.teardown()
        out["teardown"] = time.perf_counter() - t4
        block.release()
    out["peak_rss_mib"] = peak / 2**20
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="sre/smoke-cart-bad-release")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    domain = SreDomain()
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="sre-bench-") as tmp:
            runs.append(one_run(domain, args.scenario, Path(tmp)))
    print(f"sre setup benchmark: {args.scenario}, {args.runs} runs")
    for key in ("setup", "inject", "ready", "total", "teardown"):
        vals = [r[key] for r in runs]
        print(
            f"  {key:9s} median {statistics.median(vals):6.2f} s  "
            f"(min {min(vals):.2f}, max {max(vals):.2f})"
        )
    peaks = [r["peak_rss_mib"] for r in runs]
    print(
        f"  setup to ready with fault observable: median {statistics.median(r['total'] for r in runs):.2f} s (goal <= 10 s)"
    )
    print(f"  peak RSS of one environment: max {max(peaks):.0f} MiB (goal < 1536 MiB)")


if __name__ == "__main__":
    main()
