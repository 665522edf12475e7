from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from itbench_ciso.domain import CisoDomain
from itbench_ciso.engine import WorkerEngine
from itbench_ciso.environment import CisoEnvironment
from itbench_ciso.spec import CisoSpec, CisoSubmission

from itbench import testing
from itbench.catalog import Catalog
from itbench.domain import TrialContext
from itbench.models import Evaluation, TaskView
from itbench.tools import Toolbox

CATALOG = Path(__file__).resolve().parents[2] / "scenarios" / "ciso"

#: After the suite, no server or playbook this process started is still running.
nothing_left_running = testing.leftover_check(
    "moto.server", "playrun", "opa", "bwrap", "regoworker"
)


@pytest.fixture(scope="module")
def engine() -> Iterator[WorkerEngine]:
    """The default Rego engine, one worker per test module."""
    engine = WorkerEngine("regorus")
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="session")
def domain() -> CisoDomain:
    return CisoDomain()


@pytest.fixture(scope="session")
def catalog(domain: CisoDomain) -> Catalog:
    return testing.load_catalog(domain, CATALOG)


@contextmanager
def live(
    domain: CisoDomain, spec: CisoSpec, tmp: Path, options: dict[str, Any] | None = None
) -> Iterator[tuple[CisoEnvironment, TrialContext]]:
    """A set-up environment of ``spec``, torn down afterwards."""
    with testing.live_environment(domain, spec, tmp, until="setup", options=options) as trial:
        yield trial


def toolbox_and_task(
    domain: CisoDomain, spec: CisoSpec, env: CisoEnvironment, ctx: TrialContext
) -> tuple[Toolbox, TaskView]:
    """A fresh toolbox (no deadline) and the agent's task view."""
    return testing.toolbox_and_task(domain, spec, env, ctx, enforce_deadline=False)


def judge(
    domain: CisoDomain,
    spec: CisoSpec,
    env: CisoEnvironment,
    ctx: TrialContext,
    submission: CisoSubmission | None,
) -> Evaluation:
    """Evaluate ``submission`` in the live environment."""
    toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
    return domain.evaluate(spec, env, submission, toolbox, ctx)
