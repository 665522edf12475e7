from __future__ import annotations

import os
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

from itbench.catalog import Catalog, ScenarioLoader
from itbench.domain import TrialContext
from itbench.tools import Toolbox

CATALOG = Path(__file__).resolve().parents[2] / "scenarios" / "finops"


def free_port() -> int:
    """A port nothing listens on now (the machine is shared with other test runs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def endpoint_children() -> list[int]:
    """Live endpoint processes started by this test process."""
    me = str(os.getpid())
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = dict(
                line.split(":\t", 1)
                for line in (proc / "status").read_text().splitlines()
                if ":\t" in line
            )
            argv = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        ours = status.get("PPid", "").strip() == me and b"itbench_finops.endpoint" in argv
        if ours and not status.get("State", "").strip().startswith("Z"):
            found.append(int(proc.name))
    return found


@pytest.fixture(scope="session", autouse=True)
def no_endpoint_left() -> Iterator[None]:
    """After the whole suite, no endpoint this process started is still running."""
    yield
    assert not endpoint_children(), "endpoint processes outlived their environments"


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
