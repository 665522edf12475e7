"""SRE calibration: pass rates of reference and probe agents over the whole SRE catalog.

Runs, through the real runner on 2 workers, ``baseline``, the honest heuristic
(``benchmarks/agents/sre_heuristic.py`` as a sandboxed external program), ``probe/constant``
and the "every entity, every edge" lister (``benchmarks/agents/sre_lister.py``), and
optionally ``oracle``; prints each agent's pass rate over the problems (one trial each) and per
mechanism. Targets (issue 12): heuristic <= 30 %, baseline <= 15 %, constant and lister 0 %
of the non-control problems, oracle 100 %.

``python benchmarks/sre_calibration.py [--agents baseline,heuristic,...] [--scenarios PAT]
[--out DIR]`` (long: about an hour for four agents).
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from itbench.bench import Bench
from itbench.models import RunConfig, TrialResult, TrialStatus
from itbench.runner import Runner

AGENTS = Path(__file__).resolve().parent / "agents"
#: Agent name -> (itbench agent, options).
KNOWN = {
    "oracle": ("oracle", {}),
    "baseline": ("baseline", {}),
    "heuristic": ("command", {"agent_command": f"python3 {AGENTS / 'sre_heuristic.py'}"}),
    "constant": ("probe/constant", {}),
    "lister": ("command", {"agent_command": f"python3 {AGENTS / 'sre_lister.py'}"}),
}
#: Agents whose rate is counted without the controls (they answer "incident" blindly).
BLIND = ("constant", "lister")


def run(agent: str, pattern: str, out: Path) -> tuple[float, list[TrialResult]]:
    """Run one agent over the pattern; returns its wall time and results."""
    name, options = KNOWN[agent]
    config = RunConfig(agent=name, scenarios=[pattern], workers=2, options=options)
    start = time.perf_counter()
    outcome = Runner(Bench(), config, out).run()
    return time.perf_counter() - start, outcome.results


def rates(agent: str, results: list[TrialResult]) -> tuple[str, dict[str, str]]:
    """The overall pass rate (controls excepted for blind agents) and the rate per mechanism."""
    counted = [r for r in results if not (agent in BLIND and "control" in r.tags)]
    errors = sum(r.status is TrialStatus.error for r in counted)
    scored = [r for r in counted if r.status is not TrialStatus.error]
    passed = sum(r.passed for r in scored)
    overall = f"{passed}/{len(scored)} = {100 * passed / max(1, len(scored)):.0f} %"
    if errors:
        overall += f" ({errors} infrastructure errors left out)"
    per: dict[str, list[bool]] = defaultdict(list)
    for r in scored:
        per[r.facets.get("mechanism", "?")].append(r.passed)
    return overall, {m: f"{sum(v)}/{len(v)}" for m, v in sorted(per.items())}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # the runner tears the environments in flight down


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", default="baseline,heuristic,constant,lister")
    parser.add_argument("--scenarios", default="sre/*")
    parser.add_argument("--out", type=Path, default=None, help="Keep the runs here.")
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="sre-calibration-"))
    table: dict[str, tuple[str, dict[str, str]]] = {}
    for agent in args.agents.split(","):
        wall, results = run(agent, args.scenarios, root / agent)
        table[agent] = rates(agent, results)
        print(f"{agent}: {table[agent][0]} ({wall:.0f} s wall)", flush=True)
    mechanisms = sorted({m for _, per in table.values() for m in per})
    print("\npass rate per agent (controls excepted for " + ", ".join(BLIND) + ")")
    for agent, (overall, _) in table.items():
        print(f"  {agent:10s} {overall}")
    print("\nper mechanism: " + " | ".join(table))
    for m in mechanisms:
        print(f"  {m:45s} " + " | ".join(table[a][1].get(m, "-") for a in table))
    (root / "calibration.json").write_text(json.dumps(table, indent=1))
    print(f"\nruns and calibration.json in {root}")


if __name__ == "__main__":
    main()
