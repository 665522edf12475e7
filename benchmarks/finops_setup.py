"""FinOps environment setup time (server start plus seeding) and billing generation time.

Prints the median of several runs of: (1) setting up the environment of a catalog scenario
(moto server start, seeding of resources, metrics, budgets, billing export and Cost Explorer
results), goal <= 3 s; (2) generating 30 days of FOCUS billing rows for 500 resources, goal
< 1 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import tempfile
import time
from datetime import date
from pathlib import Path

from itbench_finops.billing import bill_items, focus_rows, to_csv
from itbench_finops.domain import FinOpsDomain
from itbench_finops.prices import load_prices
from itbench_finops.spec import FinOpsSpec
from itbench_finops.state import Item

from itbench.catalog import ScenarioLoader
from itbench.domain import TrialContext

CATALOG = Path(__file__).resolve().parents[1] / "scenarios" / "finops"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds() -> float:
    """CPU time of this process plus its reaped children (the endpoints)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def setup_times(scenario: str, runs: int) -> tuple[list[float], list[float], list[float]]:
    """Setup wall times, teardown wall times and CPU seconds of setup plus teardown.

    Each run draws its own concrete problem, as trials do. The CPU figure (harness and
    endpoint together) hardly depends on how busy the machine is, so it tells a slow machine
    from a slow setup.
    """
    domain = FinOpsDomain()
    scenario_spec = ScenarioLoader({"finops": domain}).load([CATALOG]).scenarios[scenario]
    setups, teardowns, cpus = [], [], []
    for i in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            ctx = TrialContext(
                f"b{i}", i, Path(tmp) / "t", Path(tmp) / "w", free_port(), 1, secret=os.urandom(32)
            )
            spec, _ = domain.draw(scenario_spec, ctx)
            env = domain.create_environment(spec, ctx)
            cpu = cpu_seconds()
            start = time.perf_counter()
            try:
                env.setup()
                setups.append(time.perf_counter() - start)
            finally:
                start = time.perf_counter()
                env.teardown()
                teardowns.append(time.perf_counter() - start)
                cpus.append(cpu_seconds() - cpu)
    return setups, teardowns, cpus


def catalog_setup_times() -> dict[str, float]:
    """One setup of every catalog scenario's environment, by scenario id."""
    domain = FinOpsDomain()
    catalog = ScenarioLoader({"finops": domain}).load([CATALOG]).scenarios
    out = {}
    for i, (sid, scenario_spec) in enumerate(sorted(catalog.items())):
        with tempfile.TemporaryDirectory() as tmp:
            ctx = TrialContext(
                f"c{i}", i, Path(tmp) / "t", Path(tmp) / "w", free_port(), 1, secret=os.urandom(32)
            )
            spec, _ = domain.draw(scenario_spec, ctx)
            env = domain.create_environment(spec, ctx)
            start = time.perf_counter()
            try:
                env.setup()
                out[sid] = time.perf_counter() - start
            finally:
                env.teardown()
    return out


def endpoint_start_times(runs: int) -> list[float]:
    """Time from launching the endpoint to its port accepting connections (no seeding)."""
    from itbench_finops.server import MotoServer

    out = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            server = MotoServer(free_port(), Path(tmp))
            start = time.perf_counter()
            try:
                server.start()
                out.append(time.perf_counter() - start)
            finally:
                server.stop()
    return out


def synthetic_inventory(n: int) -> tuple[FinOpsSpec, dict[str, Item]]:
    prices = load_prices()
    types = prices.instance_types()
    items: dict[str, Item] = {}
    for k in range(n):
        kind = k % 5
        rid = f"r-{k:05d}"
        if kind in (0, 1):
            items[rid] = Item(
                "instance",
                rid,
                rid,
                "123456789012",
                {"type": types[k % len(types)], "state": "running", "group": None},
                {"team": f"t{k % 7}"},
            )
        elif kind == 2:
            items[rid] = Item(
                "volume",
                rid,
                rid,
                "123456789012",
                {"size": 100 + k, "volume_type": "gp3", "iops": 3000, "instance": None},
                {"team": f"t{k % 7}"},
            )
        elif kind == 3:
            items[rid] = Item(
                "snapshot", rid, rid, "123456789012", {"size": 50, "volume": None, "image": False}
            )
        else:
            items[rid] = Item(
                "address", rid, rid, "123456789012", {"instance": None, "ip": "127.0.0.1"}
            )
    spec = FinOpsSpec.model_validate(
        {
            "id": "finops/bench",
            "domain": "finops",
            "family": "idle",
            "goal": "g",
            "task_types": ["detection"],
            "truth": {"incident": False},
        }
    )
    return spec, items


def billing_times(n: int, runs: int) -> tuple[list[float], list[float], int]:
    """Wall and CPU seconds of generating the FOCUS rows and CSV of ``n`` resources."""
    prices = load_prices()
    spec, items = synthetic_inventory(n)
    # Instances in the synthetic inventory are fleet members (billed the whole period).
    for item in items.values():
        if item.kind == "instance":
            item.attrs["group"] = "fleet"
    out: list[float] = []
    cpus: list[float] = []
    rows_n = 0
    for _ in range(runs):
        start = time.perf_counter()
        cpu = time.process_time()
        lines = bill_items(spec, items, {}, prices, date(2026, 11, 1))
        rows = focus_rows(lines, prices, date(2026, 11, 1), "123456789012", {})
        to_csv(rows)
        out.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        rows_n = len(rows)
    return out, cpus, rows_n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="finops/idle-orphans")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--resources", type=int, default=500)
    parser.add_argument(
        "--skip-catalog", action="store_true", help="skip the one-setup-per-scenario sweep"
    )
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    bt, bcpu, rows = billing_times(args.resources, args.runs)
    print(
        f"billing: {args.resources} resources x 30 days = {rows} FOCUS rows (with CSV): "
        f"median {statistics.median(bt):.3f} s wall, {statistics.median(bcpu):.3f} s CPU "
        f"over {args.runs} runs (goal < 1 s)"
    )
    st, td, sc = setup_times(args.scenario, args.runs)
    print(
        f"setup {args.scenario} (server start plus seeding): median {statistics.median(st):.2f} s, "
        f"min {min(st):.2f} s, max {max(st):.2f} s over {args.runs} runs (goal <= 3 s); "
        f"CPU of setup and teardown, endpoint included: median {statistics.median(sc):.2f} s"
    )
    print(f"teardown: median {statistics.median(td):.3f} s")
    if not args.skip_catalog:
        cat = catalog_setup_times()
        slowest = max(cat, key=lambda k: cat[k])
        print(
            f"setup of every catalog scenario once ({len(cat)}): median "
            f"{statistics.median(cat.values()):.2f} s, slowest {slowest} {cat[slowest]:.2f} s"
        )
    es = endpoint_start_times(args.runs)
    print(f"endpoint start alone (no seeding): median {statistics.median(es):.2f} s")


if __name__ == "__main__":
    main()
