"""Start-up time the sandbox adds to an external agent (goal: under 100 ms per trial).

Measures, in the same run, the wall time from starting a program to its exit for a program
that does nothing (``/usr/bin/python3 -c pass``):

- baseline: started directly, as ``--sandbox none`` does;
- sandboxed: through :class:`itbench.sandbox.Sandbox` without bounds (workspace handed to a
  fresh uid, port relay, staged binds, seccomp filter, bubblewrap, the in-sandbox port
  bridge), then torn down;
- bounded: the same with the default bounds, exactly as the command agent starts it (control
  groups made, joined and removed, the workspace's tmpfs mounted, filled with the workspace's
  files, copied back and unmounted).

Prints the median of each over several interleaved rounds, what the sandbox adds to the
program and what the bounds add to the sandbox (goal: each under 100 ms), with their ratios.

Run: .venv/bin/python benchmarks/core_sandbox_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from itbench.bounds import Bounds, bounds_problem
from itbench.sandbox import Sandbox

PROGRAM = ["/usr/bin/python3", "-c", "pass"]


def direct(workspace: Path) -> float:
    """Seconds to run the program without a sandbox."""
    start = time.perf_counter()
    subprocess.run(PROGRAM, cwd=workspace, check=True)
    return time.perf_counter() - start


def sandboxed(workspace: Path, bounds: Bounds | None = None) -> float:
    """Seconds to build a sandbox, run the program in it and tear it down."""
    start = time.perf_counter()
    box = Sandbox(workspace, [], bounds=bounds)
    try:
        box.prepare()
        subprocess.run(
            box.argv(PROGRAM),
            env=box.environment(),
            cwd="/",
            preexec_fn=box.preexec,  # as the command agent starts it
            pass_fds=box.pass_fds,
            check=True,
        )
    finally:
        box.close()
    if bounds is not None and box.unbounded is not None:
        raise SystemExit(box.unbounded)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    if problem := bounds_problem():
        raise SystemExit(problem)
    bounds = Bounds.from_options({})
    base: list[float] = []
    plain: list[float] = []
    bounded: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            ws = Path(tmp) / f"ws{i}"
            ws.mkdir()
            (ws / "task.json").write_text("{}" + " " * 4000)  # what a trial's workspace holds
            base.append(direct(ws))
            plain.append(sandboxed(ws))
            bounded.append(sandboxed(ws, bounds))
    b, p, s = (statistics.median(x) for x in (base, plain, bounded))
    print(f"direct start-up    median {b * 1000:7.1f} ms over {args.runs} runs")
    print(f"sandboxed start-up median {p * 1000:7.1f} ms over {args.runs} runs")
    print(f"bounded start-up   median {s * 1000:7.1f} ms over {args.runs} runs")
    print(f"added by the sandbox      {(p - b) * 1000:7.1f} ms (goal < 100 ms); ratio {p / b:.2f}")
    print(f"added by the bounds       {(s - p) * 1000:7.1f} ms (goal < 100 ms); ratio {s / p:.2f}")


if __name__ == "__main__":
    main()
