"""CISO trial time with the default Rego engine (regorus), per family (goal: 5 s or less, Ansible included).

A trial here is what the runner does for one scenario with the oracle: set up the environment,
hand the oracle its tools, judge the submission on every hidden variant (running the playbook
or collector on each) and tear down. Prints the median of several runs per scenario.

With ``--turn S`` the oracle waits S seconds before it submits, as an agent that works does,
and the times leave that turn out: what the harness adds to an agent's turn. The cloud family
makes its judge's endpoint and hidden accounts during the turn, so its instant-oracle time
(``--turn 0``) also pays for that work.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from itbench_ciso.domain import CisoDomain
from itbench_ciso.spec import CisoSpec

from itbench.catalog import ScenarioLoader
from itbench.domain import TrialContext
from itbench.tools import Toolbox

CATALOG = Path(__file__).resolve().parents[1] / "scenarios" / "ciso"
SCENARIOS = [
    "ciso/k8s-host-namespaces",
    "ciso/update-image-tag-image-registry",
    "ciso/linux-sshd",
    "ciso/linux-file-permissions",
    "ciso/cloud-sg-admin-ports",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds() -> float:
    """User and system CPU time of this process and its waited-for children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def one_trial(
    domain: CisoDomain, spec: CisoSpec, seed: int, turn: float = 0.0
) -> tuple[float, dict[str, float]]:
    """Seconds of one oracle trial, without the agent's turn, and of its phases (and CPU).

    ``turn`` is how long the agent works before it submits (the oracle submits at once);
    the harness uses that time to make the judge's endpoint ready.
    """
    phases: dict[str, float] = {}
    cpu = cpu_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = TrialContext(f"b{seed}", seed, Path(tmp) / "t", Path(tmp) / "w", free_port(), 2)
        ctx.trial_dir.mkdir()
        ctx.workspace.mkdir()
        start = time.perf_counter()
        env = domain.create_environment(spec, ctx)
        try:
            env.setup()
            phases["setup"] = time.perf_counter() - start
            toolbox = Toolbox.of(env.tools())
            deadline = datetime.now(UTC) + timedelta(seconds=spec.time_limit)
            task = domain.task_view(spec, env, ctx, toolbox, deadline)
            time.sleep(turn)
            submission = domain.oracle(spec, task, toolbox)
            mark = time.perf_counter()
            result = domain.evaluate(spec, env, submission, toolbox, ctx)
            phases["evaluate"] = time.perf_counter() - mark
            assert result.passed, result.details
        finally:
            mark = time.perf_counter()
            env.teardown()
            phases["teardown"] = time.perf_counter() - mark
        phases["cpu"] = cpu_seconds() - cpu
        return time.perf_counter() - start - turn, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scenario", action="append", help="Scenario id (repeatable).")
    parser.add_argument(
        "--turn",
        type=float,
        default=0.0,
        help="Seconds the agent works before it submits (left out of the trial time).",
    )
    args = parser.parse_args()
    domain = CisoDomain()
    catalog = ScenarioLoader({"ciso": domain}).load([CATALOG]).scenarios
    print(f"CISO oracle trial time, regorus engine, median of {args.runs} runs")
    if args.turn:
        print(f"  (the agent's turn: {args.turn:g} s, left out of the times)")
    print(f"  (load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    for sid in args.scenario or SCENARIOS:
        spec = catalog[sid]
        assert isinstance(spec, CisoSpec)
        totals, evals, setups, cpus = [], [], [], []
        for i in range(args.runs):
            total, phases = one_trial(domain, spec, i, args.turn)
            totals.append(total)
            evals.append(phases["evaluate"])
            setups.append(phases["setup"])
            cpus.append(phases["cpu"])
        med = statistics.median(totals)
        goal = "ok" if med <= 5.0 else "over the 5 s goal"
        print(
            f"  {sid:<40} {med:6.2f} s  (setup {statistics.median(setups):.2f} s, "
            f"judge {statistics.median(evals):.2f} s, CPU {statistics.median(cpus):.2f} s; "
            f"{spec.family}; {goal})"
        )


if __name__ == "__main__":
    main()
