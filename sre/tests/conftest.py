"""Shared fixtures of the SRE tests: the catalog, live shops and runs through the runner."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from itbench_sre.domain import SreDomain
from itbench_sre.environment import SreEnvironment
from itbench_sre.spec import SreSpec

from itbench.catalog import Catalog
from itbench.models import TrialResult
from itbench.testing import live_environment, load_catalog, run_scenarios

CATALOG = Path(__file__).resolve().parents[2] / "scenarios" / "sre"


@pytest.fixture(scope="session")
def domain() -> SreDomain:
    return SreDomain()


@pytest.fixture(scope="session")
def catalog(domain: SreDomain) -> Catalog:
    return load_catalog(domain, CATALOG)


@contextmanager
def live(domain: SreDomain, spec: SreSpec, tmp: Path) -> Iterator[SreEnvironment]:
    """A created environment of ``spec`` (the test runs its steps), torn down afterwards."""
    with live_environment(domain, spec, tmp, until="created") as trial:
        yield trial.env


def run(agent: str, scenarios: list[str], out: Path) -> dict[str, TrialResult]:
    """Run ``agent`` on scenarios through the real runner, two at a time; results by id."""
    return run_scenarios(agent, scenarios, out, workers=2)
