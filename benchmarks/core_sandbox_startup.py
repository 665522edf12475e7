"""Start-up time the sandbox adds to an external agent (goal: under 100 ms per trial).

Measures, in the same run, the wall time from starting a program to its exit for a program
that does nothing (``/usr/bin/python3 -c pass``):

- baseline: started directly, as ``--sandbox none`` does;
- sandboxed: through :class:`itbench.sandbox.Sandbox` exactly as the command agent starts it
  (workspace handed to a fresh uid, port relay, staged binds, bubblewrap, the in-sandbox port
  bridge), then torn down.

Prints the median of each over several rounds, their difference (the added start-up) and
their ratio.

Run: .venv/bin/python benchmarks/core_sandbox_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from itbench.sandbox import Sandbox

PROGRAM = ["/usr/bin/python3", "-c", "pass"]


def direct(workspace: Path) -> float:
    """Seconds to run the program without a sandbox."""
    start = time.perf_counter()
    subprocess.run(PROGRAM, cwd=workspace, check=True)
    return time.perf_counter() - start


def sandboxed(workspace: Path) -> float:
    """Seconds to build a sandbox, run the program in it and tear it down."""
    start = time.perf_counter()
    box = Sandbox(workspace, [])
    try:
        box.prepare()
        subprocess.run(
            box.argv(PROGRAM),
            env=box.environment(),
            cwd="/",
            preexec_fn=box.preexec,  # noqa: PLW1509 - as the command agent starts it
            pass_fds=box.pass_fds,
            check=True,
        )
    finally:
        box.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    base: list[float] = []
    boxed: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            ws = Path(tmp) / f"ws{i}"
            ws.mkdir()
            base.append(direct(ws))
            boxed.append(sandboxed(ws))
    b, s = statistics.median(base), statistics.median(boxed)
    print(f"direct start-up    median {b * 1000:7.1f} ms over {args.runs} runs")
    print(f"sandboxed start-up median {s * 1000:7.1f} ms over {args.runs} runs")
    print(f"added by the sandbox      {(s - b) * 1000:7.1f} ms (goal < 100 ms); ratio {s / b:.2f}")


if __name__ == "__main__":
    main()
