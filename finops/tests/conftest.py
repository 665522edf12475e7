from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.draw import concrete
from itbench_finops.environment import FinOpsEnvironment
from itbench_finops.spec import FinOpsSpec

from itbench import testing
from itbench.catalog import Catalog
from itbench.domain import TrialContext
from itbench.models import TaskView
from itbench.tools import Toolbox

CATALOG = Path(__file__).resolve().parents[2] / "scenarios" / "finops"

#: After the whole suite, no endpoint this process started is still running.
no_endpoint_left = testing.leftover_check("itbench_finops.endpoint", name="no_endpoint_left")


@pytest.fixture(scope="session")
def domain() -> FinOpsDomain:
    return FinOpsDomain()


@pytest.fixture(scope="session")
def catalog(domain: FinOpsDomain) -> Catalog:
    return testing.load_catalog(domain, CATALOG)


def concrete_spec(
    catalog: Catalog,
    sid: str,
    forms: dict[str, str] | None = None,
    settings: dict[str, Any] | None = None,
) -> FinOpsSpec:
    """A catalog scenario made concrete with the given forms and settings (see ``concrete``)."""
    spec = catalog.scenarios[sid]
    assert isinstance(spec, FinOpsSpec)
    return concrete(spec, forms, settings)


@contextmanager
def live(
    domain: FinOpsDomain, spec: FinOpsSpec, tmp: Path
) -> Iterator[tuple[FinOpsEnvironment, TrialContext]]:
    """A set-up environment of ``spec`` that is torn down afterwards."""
    with testing.live_environment(domain, spec, tmp, until="setup", seed=11) as trial:
        yield trial


def toolbox_and_task(
    domain: FinOpsDomain, spec: FinOpsSpec, env: FinOpsEnvironment, ctx: TrialContext
) -> tuple[Toolbox, TaskView]:
    """A fresh toolbox that refuses calls after the time limit, and the agent's task view."""
    return testing.toolbox_and_task(domain, spec, env, ctx)
