from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.environment import FinOpsEnvironment
from itbench_finops.spec import FinOpsSpec

from itbench.domain import TrialContext
from itbench.registry import Catalog, ScenarioLoader
from itbench.tools import Toolbox

CATALOG = Path(__file__).resolve().parents[2] / "scenarios" / "finops"


def free_port() -> int:
    """A port nothing listens on now (the machine is shared with other test runs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def domain() -> FinOpsDomain:
    return FinOpsDomain()


@pytest.fixture(scope="session")
def catalog(domain: FinOpsDomain) -> Catalog:
    return ScenarioLoader({"finops": domain}).load([CATALOG])


@contextmanager
def live(
    domain: FinOpsDomain, spec: FinOpsSpec, tmp: Path
) -> Iterator[tuple[FinOpsEnvironment, TrialContext]]:
    """A set-up environment of ``spec`` that is torn down afterwards."""
    ctx = TrialContext("t", 11, tmp / "trial", tmp / "ws", free_port(), 1)
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    env = domain.create_environment(spec, ctx)
    assert isinstance(env, FinOpsEnvironment)
    try:
        env.setup()
        yield env, ctx
    finally:
        env.teardown()


def toolbox_and_task(
    domain: FinOpsDomain, spec: FinOpsSpec, env: FinOpsEnvironment, ctx: TrialContext
):  # type: ignore[no-untyped-def]
    deadline = time.time() + spec.time_limit
    toolbox = Toolbox.of(env.tools(), deadline=deadline)
    task = domain.task_view(spec, env, ctx, toolbox, datetime.fromtimestamp(deadline, UTC))
    return toolbox, task
