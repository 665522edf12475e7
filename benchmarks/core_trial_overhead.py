"""Harness overhead per trial on the in-memory toy domain (goal: under 20 ms).

Overhead = a trial's total time minus the time inside the environment's steps and the agent,
measured through the real runner (plans, port block, directories, journal, results store).
Baseline: calling the toy domain's steps directly, in the same process.

Run: .venv/bin/python benchmarks/core_trial_overhead.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from _common import use_toy_plugin

use_toy_plugin()

from itbench.bench import Bench  # noqa: E402
from itbench.models import RunConfig  # noqa: E402
from itbench.runner import Runner  # noqa: E402

TRIALS = 50
REPEAT = 5


def main() -> None:
    bench = Bench(plugins=["itbench_toy.plugin"], autoload=False)
    per_trial: list[float] = []
    inner: list[float] = []
    for _ in range(REPEAT):
        with tempfile.TemporaryDirectory() as tmp:
            config = RunConfig(
                agent="toy/solver", scenarios=["toy/registry-alpha-1"], trials=TRIALS
            )
            start = time.perf_counter()
            outcome = Runner(bench, config, Path(tmp) / "run").run()
            elapsed = time.perf_counter() - start
            assert len(outcome.results) == TRIALS and all(r.passed for r in outcome.results)
            env_and_agent = sum(
                (r.timings.setup or 0)
                + (r.timings.inject or 0)
                + (r.timings.ready or 0)
                + (r.timings.agent or 0)
                + (r.timings.evaluate or 0)
                + (r.timings.teardown or 0)
                for r in outcome.results
            )
            per_trial.append((elapsed - env_and_agent) / TRIALS)
            inner.append(env_and_agent / TRIALS)
    overhead = statistics.median(per_trial)
    print(
        f"harness overhead per trial: median {overhead * 1000:.2f} ms over {REPEAT} runs of {TRIALS} trials"
        f" (goal < 20 ms); environment+agent time per trial {statistics.median(inner) * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
