"""Calibration of the FinOps catalog: pass rates of reference, honest and extreme agents.

Runs ``itbench evaluate`` over the FinOps catalog for each agent and prints the share of trials
passed per agent, overall and per family (the scenarios' ``family`` facet), with controls
apart. Targets: the heuristic (``agents/finops_heuristic.py``) at most 30 %, ``baseline`` at most
15 % of the problems, ``finops/destroy`` and ``finops/unchanged`` nothing but controls, the
oracle all of them. Every trial draws its own concrete problem, so several trials per scenario
measure a scenario's share rather than one draw of it.

Usage: ``.venv/bin/python benchmarks/finops_calibration.py [--trials N] [--workers W]
[--agents A,B] [--scenarios PATTERN] [--out DIR]``; ``--report DIR`` reprints the table of
an earlier run without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGENTS_DIR = Path(__file__).resolve().parent / "agents"
AGENTS = ["oracle", "baseline", "finops/heuristic", "finops/destroy", "finops/unchanged"]
#: Agents the calibration runs once per scenario (they do not depend on the draw's luck).
ONCE = {"oracle", "finops/destroy", "finops/unchanged"}


def run(agent: str, scenarios: str, trials: int, workers: int, out: Path) -> Path:
    """Evaluate ``agent`` and return its run directory."""
    target = out / agent.replace("/", "-")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(AGENTS_DIR), os.environ.get("PYTHONPATH", "")])
    )
    cmd = [
        str(Path(sys.executable).with_name("itbench")),
        "evaluate",
        "--agent",
        agent,
        "-s",
        scenarios,
        "--trials",
        str(1 if agent in ONCE else trials),
        "--workers",
        str(workers),
        "--plugin",
        "finops_heuristic",
        "--plugin",
        "finops_extremes",
        "--out",
        str(target),
    ]
    subprocess.run(cmd, env=env, cwd=ROOT, check=False)
    return target


def rates(run_dir: Path) -> dict[str, tuple[int, int]]:
    """Passed and finished trials per family (controls as ``control``), and ``all`` problems."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    controls = _controls()
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["status"] == "error":
            continue
        passed = int(r["status"] == "passed")
        family = "control" if r["scenario_id"] in controls else r["facets"].get("family", "?")
        out[family][0] += passed
        out[family][1] += 1
        if family != "control":
            out["all problems"][0] += passed
            out["all problems"][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def _controls() -> set[str]:
    out = subprocess.run(
        [str(Path(sys.executable).with_name("itbench")), "list", "finops/*", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return {s["id"] for s in json.loads(out.stdout) if "control" in s["tags"]}


def table(results: dict[str, dict[str, tuple[int, int]]]) -> str:
    """Pass rates: a row per family, a column per agent."""
    families = sorted({f for r in results.values() for f in r} - {"all problems", "control"})
    rows = ["all problems", *families, "control"]
    agents = list(results)
    lines = ["| family | " + " | ".join(agents) + " |", "|---|" + "---|" * len(agents)]
    for fam in rows:
        cells = []
        for agent in agents:
            passed, total = results[agent].get(fam, (0, 0))
            cells.append(f"{100 * passed / total:.0f} % ({passed}/{total})" if total else "-")
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="trials per scenario (drawn agents)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--scenarios", default="finops/*")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--report", type=Path, default=None, help="reprint an earlier run")
    args = parser.parse_args()
    agents = [a for a in args.agents.split(",") if a]
    if args.report is not None:
        dirs = {a: args.report / a.replace("/", "-") for a in agents}
    else:
        out = args.out or Path(tempfile.mkdtemp(prefix="finops-calibration-"))
        dirs = {a: run(a, args.scenarios, args.trials, args.workers, out) for a in agents}
        print(f"runs in {out}")
    results = {a: rates(d) for a, d in dirs.items() if (d / "results.jsonl").exists()}
    print(table(results))


if __name__ == "__main__":
    main()
