"""CISO calibration: pass rates of the yardstick agents per agent and scenario family.

Runs, over the CISO catalog (or ``--scenarios``), the domain's ``baseline``, the honest
heuristic (``benchmarks/agents/ciso_heuristic.py``, sandboxed through ``--agent command``),
an always-violation and a never-violation agent (``benchmarks/agents/ciso_verdict.py``) and,
with ``--oracle``, the oracle; then prints each agent's pass rate per family and overall.
Targets: heuristic <= 30 %, baseline <= 15 %, always and never 0 %, oracle 100 %.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "benchmarks" / "agents"
TARGETS = {"heuristic": 0.30, "baseline": 0.15, "always": 0.0, "never": 0.0, "oracle": 1.0}


def agent_args(name: str) -> list[str]:
    """The ``itbench evaluate`` options that run agent ``name``."""
    if name in ("baseline", "oracle"):
        return ["--agent", name]
    program = {
        "heuristic": f"python3 {AGENTS / 'ciso_heuristic.py'}",
        "always": f"python3 {AGENTS / 'ciso_verdict.py'} always",
        "never": f"python3 {AGENTS / 'ciso_verdict.py'} never",
    }[name]
    return ["--agent", "command", "--option", f"agent_command={program}"]


def run(name: str, scenarios: list[str], workers: int, out: Path) -> list[dict[str, object]]:
    """Evaluate agent ``name``; its results."""
    itbench = Path(sys.executable).with_name("itbench")
    argv = [str(itbench), "evaluate", *agent_args(name), "--workers", str(workers)]
    for pattern in scenarios:
        argv += ["-s", pattern]
    argv += ["--out", str(out), "--json"]
    subprocess.run(argv, check=False, capture_output=True, text=True)
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenarios", nargs="*", default=["ciso/*"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--agents", nargs="*", default=["baseline", "heuristic", "always", "never"])
    parser.add_argument("--oracle", action="store_true", help="Run the oracle too.")
    parser.add_argument("--out", type=Path, help="Keep the run directories here.")
    args = parser.parse_args()
    agents = [*args.agents, *(["oracle"] if args.oracle else [])]
    base = args.out or Path(tempfile.mkdtemp(prefix="ciso-calibration-"))
    table: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    errors: dict[str, int] = defaultdict(int)
    for name in agents:
        for r in run(name, args.scenarios, args.workers, base / name):
            if r["status"] in ("error", "invalid"):
                errors[name] += 1  # neither counts as a pass or a failure here
                continue
            family = str((r.get("facets") or {}).get("family", "?"))
            table[name][family].append(r["status"] == "passed")
            table[name]["all"].append(r["status"] == "passed")
    families = sorted({f for rows in table.values() for f in rows if f != "all"}) + ["all"]
    print(f"CISO calibration (pass rate per family; runs under {base})")
    print("  " + f"{'agent':<10}" + "".join(f"{f:>15}" for f in families) + "   target")
    for name in agents:
        cells = []
        for f in families:
            rows = table[name].get(f, [])
            cells.append(f"{sum(rows)}/{len(rows)} {100 * sum(rows) / max(1, len(rows)):3.0f}%")
        rate = sum(table[name]["all"]) / max(1, len(table[name]["all"]))
        goal = TARGETS.get(name, 0.0)
        ok = rate >= goal if name == "oracle" else rate <= goal
        extra = f"; {errors[name]} error or invalid trial(s)" if errors[name] else ""
        print(
            "  "
            + f"{name:<10}"
            + "".join(f"{c:>15}" for c in cells)
            + f"   {'>=' if name == 'oracle' else '<='} {goal:.0%} {'ok' if ok else 'MISSED'}{extra}"
        )


if __name__ == "__main__":
    main()
