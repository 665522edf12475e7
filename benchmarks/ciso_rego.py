"""Rego evaluations per second: the worker engines (regorus, regopy) and an OPA server if any.

Evaluates the reference policies of the Kubernetes checks on their hidden cluster snapshots
(one interpreter per policy, one query per snapshot) and reports evaluations per second,
and separately the compile-and-evaluate rate of one policy on one input (a trial's worst case).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

from itbench_ciso.checks import k8s
from itbench_ciso.engine import (
    OpaEngine,
    OpaServer,
    PolicyEngine,
    WorkerEngine,
    opa_available,
    opa_binary,
)


def workload(rounds: int) -> list[tuple[dict[str, str], list[object]]]:
    """(modules, inputs) per Kubernetes check: its reference policy and hidden snapshots."""
    out = []
    for check in k8s.CHECKS:
        _, hidden = k8s.variants(check.id, 3, 3, 4)
        out.append(({"policy.rego": check.policy()}, [v.data for v in hidden] * rounds))
    return out


def rate(engine: PolicyEngine, work: list[tuple[dict[str, str], list[object]]]) -> float:
    """Evaluations per second over the workload."""
    count = 0
    start = time.perf_counter()
    for modules, inputs in work:
        verdicts = engine.evaluate(modules, "data.compliance.violations", inputs)
        assert all(v.error is None for v in verdicts)
        count += len(verdicts)
    return count / (time.perf_counter() - start)


def cold_rate(engine: PolicyEngine, work: list[tuple[dict[str, str], list[object]]]) -> float:
    """Compile-and-evaluate operations per second (a new interpreter for every input)."""
    count = 0
    start = time.perf_counter()
    for modules, inputs in work:
        for doc in inputs[:3]:
            engine.evaluate(modules, "data.compliance.violations", [doc])
            count += 1
    return count / (time.perf_counter() - start)


def report(name: str, engine: PolicyEngine, rounds: int, runs: int) -> None:
    work = workload(rounds)
    warm = statistics.median(rate(engine, work) for _ in range(runs))
    cold = statistics.median(cold_rate(engine, work) for _ in range(runs))
    print(f"  {name:<9} {warm:8.0f} evaluations/s   {cold:8.0f} compile+evaluate/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="Passes over the snapshots.")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"Rego evaluation rate (cluster snapshots of ~60 objects, median of {args.runs} runs)")
    for name in ("regorus", "regopy"):
        engine = WorkerEngine(name)
        try:
            report(name, engine, args.rounds, args.runs)
        finally:
            engine.close()
    reason = opa_available()
    if reason is not None:
        print(f"  opa       skipped: {reason}")
        return
    url = os.environ.get("ITBENCH_OPA_URL")
    if url:
        report("opa", OpaEngine(url), args.rounds, args.runs)
        return
    binary = opa_binary()
    assert binary is not None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with tempfile.TemporaryDirectory() as tmp:
        server = OpaServer(binary, port, Path(tmp))
        server.start()
        try:
            report("opa", OpaEngine(server.url), args.rounds, args.runs)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
