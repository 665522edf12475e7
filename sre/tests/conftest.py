"""Shared fixtures of the SRE tests: the catalog, live shops and runs through the runner."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from itbench_sre.domain import SreDomain
from itbench_sre.environment import SreEnvironment
from itbench_sre.spec import SreSpec

from itbench.bench import Bench
from itbench.catalog import Catalog, ScenarioLoader
from itbench.domain import TrialContext
from itbench.models import RunConfig, TrialResult
from itbench.ports import PortAllocator
from itbench.runner import Runner

CATALOG = Path(__file__).resolve().parents[2] / "scenarios" / "sre"


@pytest.fixture(scope="session")
def domain() -> SreDomain:
    return SreDomain()


@pytest.fixture(scope="session")
def catalog(domain: SreDomain) -> Catalog:
    return ScenarioLoader({"sre": domain}).load([CATALOG])


@contextmanager
def live(domain: SreDomain, spec: SreSpec, tmp: Path) -> Iterator[SreEnvironment]:
    """A set-up environment of ``spec`` (on its own port block), torn down afterwards."""
    block = PortAllocator().acquire(domain.ports_per_trial)
    ctx = TrialContext("t", 7, tmp / "trial", tmp / "ws", block.base, block.count)
    ctx.trial_dir.mkdir(parents=True, exist_ok=True)
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    env = domain.create_environment(spec, ctx)
    assert isinstance(env, SreEnvironment)
    try:
        yield env
    finally:
        env.teardown()
        block.release()


def processes_under(root: Path) -> list[psutil.Process]:
    """Processes whose command line or working directory points into ``root``."""
    out = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        try:
            text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["cwd"] or "")
        except psutil.Error:
            continue
        if str(root) in text:
            out.append(proc)
    return out


def run(agent: str, scenarios: list[str], out: Path, workers: int = 2) -> dict[str, TrialResult]:
    """Run ``agent`` on scenarios through the real runner; results by scenario id."""
    bench = Bench()
    config = RunConfig(agent=agent, scenarios=scenarios, workers=workers)
    outcome = Runner(bench, config, out).run()
    return {r.scenario_id: r for r in outcome.results}
