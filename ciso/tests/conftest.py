from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from itbench_ciso.domain import CisoDomain
from itbench_ciso.environment import CisoEnvironment
from itbench_ciso.spec import CisoSpec, CisoSubmission

from itbench.catalog import Catalog, ScenarioLoader
from itbench.domain import TrialContext
from itbench.models import Evaluation, TaskView
from itbench.tools import Toolbox

CATALOG = Path(__file__).resolve().parents[2] / "scenarios" / "ciso"


def free_port() -> int:
    """A port nothing listens on now (the machine is shared with other test runs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def children(marker: bytes) -> list[int]:
    """Live processes started by this test process whose command line contains ``marker``."""
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
        ours = status.get("PPid", "").strip() == me and marker in argv
        if ours and not status.get("State", "").strip().startswith("Z"):
            found.append(int(proc.name))
    return found


@pytest.fixture(scope="session", autouse=True)
def nothing_left_running() -> Iterator[None]:
    """After the suite, no server or playbook this process started is still running."""
    yield
    for marker in (b"moto.server", b"playrun", b"opa", b"bwrap", b"regoworker"):
        assert not children(marker), f"{marker!r} processes outlived their trials"


@pytest.fixture(scope="session")
def domain() -> CisoDomain:
    return CisoDomain()


@pytest.fixture(scope="session")
def catalog(domain: CisoDomain) -> Catalog:
    return ScenarioLoader({"ciso": domain}).load([CATALOG])


@contextmanager
def live(
    domain: CisoDomain, spec: CisoSpec, tmp: Path, options: dict[str, Any] | None = None
) -> Iterator[tuple[CisoEnvironment, TrialContext]]:
    """A set-up environment of ``spec``, torn down afterwards."""
    ctx = TrialContext(
        "t", 7, tmp / "trial", tmp / "ws", free_port(), 2, options=dict(options or {})
    )
    ctx.trial_dir.mkdir(parents=True, exist_ok=True)
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    env = domain.create_environment(spec, ctx)
    assert isinstance(env, CisoEnvironment)
    try:
        env.setup()
        yield env, ctx
    finally:
        env.teardown()


def toolbox_and_task(
    domain: CisoDomain, spec: CisoSpec, env: CisoEnvironment, ctx: TrialContext
) -> tuple[Toolbox, TaskView]:
    """A fresh toolbox and the agent's task view."""
    toolbox = Toolbox.of(env.tools())
    deadline = datetime.now(UTC) + timedelta(seconds=spec.time_limit)
    return toolbox, domain.task_view(spec, env, ctx, toolbox, deadline)


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
