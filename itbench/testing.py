"""Test helpers for plugin authors, registered as the ``itbench`` pytest plugin.

Installing itbench makes these fixtures available in every pytest session:

- ``trial_ctx``: a :class:`~itbench.domain.TrialContext` on a reserved port block, with its
  directories under the test's ``tmp_path``. Mark a test
  ``@pytest.mark.itbench_trial(ports=..., seed=..., options=..., secret=...)`` to change it.
- ``no_leftovers``: fails the test when a process it started is still running afterwards.

The functions work outside pytest too: :func:`trial_context`, :func:`port_block` and
:func:`free_port` reserve ports that no other test (in this process or another) gets;
:func:`live_environment` sets up one scenario's environment and always tears it down;
:func:`run_scenarios` runs scenarios with a named agent through the real runner;
:func:`load_catalog` loads the catalog of one domain; :func:`live_processes`,
:func:`processes_under` and :func:`assert_nothing_left` find what was left running, and
:func:`leftover_check` makes a fixture of the latter for a ``conftest.py``::

    nothing_left_running = leftover_check("my_plugin.server")

:class:`ScriptedModel` (with :class:`Reply`, :class:`Call`, :class:`Fail`) is a scripted model
server speaking the Chat Completions protocol on 127.0.0.1, to test model-driven agents such
as ``llm`` without a model API (see :mod:`itbench.scripted_model`).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar

import pytest

from itbench.deadline import Deadline
from itbench.domain import Domain, Environment, TrialContext
from itbench.models import ScenarioSpec, TaskView, TrialResult
from itbench.ports import UNIT, PortAllocator, PortBlock
from itbench.scripted_model import Call, Conversation, Fail, Reply, ScriptedModel
from itbench.tools import Toolbox

if TYPE_CHECKING:
    import types

    from itbench.bench import Bench
    from itbench.catalog import Catalog

__all__ = [
    "Call",
    "Conversation",
    "Fail",
    "LiveProcess",
    "LiveTrial",
    "Step",
    "assert_nothing_left",
    "bare_task",
    "free_port",
    "leftover_check",
    "live_environment",
    "live_processes",
    "load_catalog",
    "no_leftovers",
    "port_block",
    "processes_under",
    "Reply",
    "run_scenarios",
    "ScriptedModel",
    "toolbox_and_task",
    "trial_context",
    "trial_ctx",
]

SpecT = TypeVar("SpecT", bound=ScenarioSpec)
EnvT = TypeVar("EnvT", bound=Environment)

#: The last step :func:`live_environment` runs before handing over the environment.
Step = Literal["created", "setup", "injected", "observable"]
_STEPS: tuple[Step, ...] = ("created", "setup", "injected", "observable")

_ports = PortAllocator()


# --- ports and trial contexts ---------------------------------------------------------------


@contextlib.contextmanager
def port_block(count: int = 1) -> Iterator[PortBlock]:
    """Reserve ``count`` consecutive free ports for the duration of the block.

    The block is exclusive across threads and processes that use
    :class:`itbench.ports.PortAllocator` (the runner and every test using these helpers).

    Args:
        count: Ports needed (at least one allocation unit is held).

    Yields:
        The held block; it is released when the block exits.
    """
    block = _ports.acquire(count)
    try:
        yield block
    finally:
        block.release()


class _PortPool:
    """Single ports out of reserved blocks, each held until the process exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: list[PortBlock] = []
        self._next = 0

    def take(self) -> int:
        with self._lock:
            if not self._blocks or self._next >= self._blocks[-1].count:
                self._blocks.append(_ports.acquire(UNIT))
                self._next = 0
            port = self._blocks[-1].base + self._next
            self._next += 1
            return port


_pool = _PortPool()


def free_port() -> int:
    """A free 127.0.0.1 port that no other test gets, for a server a test starts by itself.

    Unlike binding port 0, the port comes from a block reserved with
    :class:`~itbench.ports.PortAllocator`, so a trial running in parallel never receives it.
    The block stays reserved until this process exits; one block serves many calls.
    """
    return _pool.take()


@contextlib.contextmanager
def trial_context(
    root: Path,
    *,
    ports: int = 1,
    seed: int = 7,
    trial_id: str | None = None,
    options: dict[str, Any] | None = None,
    secret: bytes = b"",
) -> Iterator[TrialContext]:
    """A trial context as the runner builds it, on a port block held for the block's duration.

    Args:
        root: Directory for the trial's ``trial/`` (harness-only) and ``ws/`` (workspace)
            directories, both created.
        ports: Ports the trial needs (usually the domain's ``ports_per_trial``).
        seed: The trial's seed.
        trial_id: The trial's handle; a random one (as the runner's) by default.
        options: Run-wide domain options.
        secret: The run's secret (for :meth:`TrialContext.secret_seed`).

    Yields:
        The context; its port block is released when the block exits.
    """
    with port_block(max(ports, 1)) as block:
        ctx = TrialContext(
            trial_id=trial_id or secrets.token_hex(8),
            seed=seed,
            trial_dir=root / "trial",
            workspace=root / "ws",
            port_base=block.base,
            port_count=block.count,
            options=dict(options or {}),
            secret=secret,
        )
        ctx.trial_dir.mkdir(parents=True, exist_ok=True)
        ctx.workspace.mkdir(parents=True, exist_ok=True)
        yield ctx


# --- live environments and runs -------------------------------------------------------------


class LiveTrial(NamedTuple, Generic[EnvT]):
    """An environment handed over by :func:`live_environment` and its trial context."""

    env: EnvT
    ctx: TrialContext


@contextlib.contextmanager
def live_environment(
    domain: Domain[SpecT, Any, EnvT],
    spec: SpecT,
    root: Path,
    *,
    until: Step = "observable",
    ready_timeout: float = 120.0,
    options: dict[str, Any] | None = None,
    seed: int = 7,
    secret: bytes = b"",
) -> Iterator[LiveTrial[EnvT]]:
    """The environment of ``spec``, brought up as the runner does and always torn down.

    Creates the environment on a reserved port block of ``domain.ports_per_trial`` ports, then
    runs setup, inject and wait-observable in order, stopping after ``until``. Teardown runs
    when the block exits, also when a step or the block's body raised.

    Args:
        domain: The domain that runs ``spec``.
        spec: The scenario.
        root: Directory for the trial's directories (see :func:`trial_context`).
        until: The last step to run before yielding: ``"created"`` leaves every step to the
            caller.
        ready_timeout: The timeout handed to ``wait_observable``.
        options: Run-wide domain options.
        seed: The trial's seed.
        secret: The run's secret.

    Yields:
        The environment and its trial context.
    """
    with trial_context(
        root, ports=domain.ports_per_trial, seed=seed, options=options, secret=secret
    ) as ctx:
        env = domain.create_environment(spec, ctx)
        try:
            last = _STEPS.index(until)
            steps: list[Callable[[], None]] = [
                env.setup,
                env.inject,
                lambda: env.wait_observable(ready_timeout),
            ]
            for step in steps[:last]:
                step()
            yield LiveTrial(env, ctx)
        finally:
            env.teardown()


def toolbox_and_task(
    domain: Domain[SpecT, Any, EnvT],
    spec: SpecT,
    env: EnvT,
    ctx: TrialContext,
    *,
    enforce_deadline: bool = True,
) -> tuple[Toolbox, TaskView]:
    """A fresh toolbox of ``env`` and the agent's task view, as the runner builds them.

    Args:
        domain: The domain of ``spec``.
        spec: The scenario.
        env: Its live environment.
        ctx: The trial context.
        enforce_deadline: Whether the toolbox refuses calls after the scenario's time limit.

    Returns:
        The toolbox and the task view (deadline ``spec.time_limit`` seconds from now).
    """
    deadline = Deadline.after(spec.time_limit)
    toolbox = Toolbox.of(env.tools(), deadline=deadline if enforce_deadline else None)
    task = domain.task_view(spec, env, ctx, toolbox, deadline)
    return toolbox, task


def bare_task(toolbox: Toolbox, workspace: Path, **fields: Any) -> TaskView:
    """A task view over a toolbox without a domain or an environment (tool-server tests).

    Args:
        toolbox: Its tools become the view's tool list.
        workspace: The view's workspace.
        **fields: Other :class:`~itbench.models.TaskView` fields to set (``goal``,
            ``domain``, ``context``, ...); the rest get neutral values and a far deadline.

    Returns:
        The task view.
    """
    values: dict[str, Any] = {
        "handle": "h-test",
        "domain": "toy",
        "goal": "g",
        "task_types": ["detection"],
        "deadline": "2100-01-01T00:00:00Z",
        "time_limit": 10,
        "output_schema": {},
    }
    values.update(fields)
    return TaskView(tools=toolbox.specs(), workspace=workspace, **values)


def run_scenarios(
    agent: str,
    scenarios: Sequence[str],
    run_dir: Path,
    *,
    bench: Bench | None = None,
    workers: int = 1,
    **config: Any,
) -> dict[str, TrialResult]:
    """Run ``agent`` on ``scenarios`` through the real runner into ``run_dir``.

    Args:
        agent: A registered agent's name (``oracle``, ``noop``, ...).
        scenarios: Scenario ids or globs.
        run_dir: The run directory (created).
        bench: The bench to use; by default one with the installed plugins.
        workers: Trials run in parallel.
        **config: Other fields of :class:`itbench.models.RunConfig` (``options``,
            ``timeout``, ``sandbox``, ...).

    Returns:
        The results by scenario id (with ``trials`` > 1, the last trial of each).
    """
    from itbench.bench import Bench
    from itbench.models import RunConfig
    from itbench.runner import Runner

    run_config = RunConfig(agent=agent, scenarios=list(scenarios), workers=workers, **config)
    outcome = Runner(bench or Bench(), run_config, run_dir).run()
    return {r.scenario_id: r for r in outcome.results}


def load_catalog(
    domain: Domain[Any, Any, Any], *roots: Path, bench: Bench | None = None
) -> Catalog:
    """The scenarios of ``domain`` in ``roots``, validated against that domain alone.

    Args:
        domain: The domain.
        *roots: Catalog directories; by default the ``<domain name>/`` directory of every
            catalog path registered by the plugins of ``bench`` (the layout of the
            repository's ``scenarios/`` and of the plugin template).
        bench: Whose catalog paths to look in when no root is given; by default one with the
            installed plugins.

    Returns:
        The catalog (check its ``errors``).
    """
    from itbench.catalog import ScenarioLoader

    if not roots:
        from itbench.bench import Bench

        found = (p / domain.name for p in (bench or Bench()).catalog_paths)
        roots = tuple(p for p in found if p.is_dir())
    return ScenarioLoader({domain.name: domain}).load(list(roots))


# --- processes left running -----------------------------------------------------------------


@dataclass(frozen=True)
class LiveProcess:
    """A running process seen by :func:`live_processes`."""

    pid: int
    argv: tuple[str, ...]
    cwd: str
    create_time: float

    def __str__(self) -> str:
        return f"pid {self.pid}: {' '.join(self.argv)[:200]} (cwd {self.cwd})"

    def kill(self) -> None:
        """Kill the process with SIGKILL, unless its pid now names another process."""
        psutil = _psutil()
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(self.pid)
            if proc.create_time() == self.create_time:
                proc.kill()


def _psutil() -> types.ModuleType:
    """The ``psutil`` module, imported when a process helper first needs it.

    Only the process helpers need it (the ``dev`` extra installs it), so the pytest plugin
    loads in any install.

    Raises:
        ImportError: ``psutil`` is not installed (the message says how to get it).
    """
    try:
        import psutil
    except ImportError:
        raise ImportError(
            "the process helpers of itbench.testing need psutil: pip install 'itbench[dev]'"
        ) from None
    module: types.ModuleType = psutil
    return module


def _descendants() -> set[int]:
    return {p.pid for p in _psutil().Process().children(recursive=True)}


def live_processes(
    marker: str | None = None,
    *,
    under: Path | str | None = None,
    descendants: bool = False,
) -> list[LiveProcess]:
    """Running processes other than this one (zombies count as gone), filtered.

    Every filter given must hold.

    Args:
        marker: Text the command line (arguments joined by spaces) contains.
        under: A path the command line or the working directory names.
        descendants: Only descendants of this process. Orphans of a child that exited are
            no longer descendants: find those with ``under`` or a unique ``marker``.

    Returns:
        The matching processes by pid.
    """
    mine = _descendants() if descendants else None
    psutil = _psutil()
    me = psutil.Process().pid
    root = str(under) if under is not None else None
    out = []
    for proc in psutil.process_iter(["cmdline", "cwd", "status", "create_time"]):
        info = proc.info
        if proc.pid == me or info["status"] in (None, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            continue
        if mine is not None and proc.pid not in mine:
            continue
        argv = tuple(info["cmdline"] or ())
        cwd = info["cwd"] or ""
        line = " ".join(argv)
        if marker is not None and marker not in line:
            continue
        if root is not None and root not in f"{line} {cwd}":
            continue
        out.append(LiveProcess(proc.pid, argv, cwd, info["create_time"] or 0.0))
    return sorted(out, key=lambda p: p.pid)


def processes_under(root: Path | str) -> list[LiveProcess]:
    """Running processes whose command line or working directory points into ``root``."""
    return live_processes(under=root)


def _leftovers(
    markers: Sequence[str], under: Sequence[Path | str], ignore: set[tuple[int, float]]
) -> list[LiveProcess]:
    found: dict[int, LiveProcess] = {}
    wanted: Sequence[str | None] = markers or [None]
    for marker in wanted:
        for proc in live_processes(marker, descendants=True):
            found[proc.pid] = proc
    for root in under:
        for proc in processes_under(root):
            found[proc.pid] = proc
    return [p for p in found.values() if (p.pid, p.create_time) not in ignore]


def assert_nothing_left(
    *markers: str,
    under: Sequence[Path | str] = (),
    grace: float = 2.0,
    kill: bool = True,
    ignore: Sequence[LiveProcess] = (),
) -> None:
    """Fail when processes are still running that should have stopped.

    Looks for descendants of this process whose command line contains any of ``markers``
    (every descendant when none is given) and for any process pointing into a path of
    ``under``, waiting up to ``grace`` seconds for them to exit.

    Args:
        *markers: Command-line texts of the processes to look for among descendants.
        under: Directories no process may still run in or name.
        grace: Seconds the processes get to finish exiting.
        kill: Kill what is found before failing, so one leak does not spoil later tests.
        ignore: Processes that were running before and may go on running.

    Raises:
        AssertionError: something was left running; the message lists it.
    """
    skip = {(p.pid, p.create_time) for p in ignore}
    end = time.monotonic() + grace
    left = _leftovers(markers, under, skip)
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = _leftovers(markers, under, skip)
    if not left:
        return
    if kill:
        for proc in left:
            proc.kill()
    raise AssertionError("processes left running:\n" + "\n".join(f"  {p}" for p in left))


def leftover_check(
    *markers: str,
    under: Sequence[Path | str] = (),
    scope: Literal["session", "package", "module", "class", "function"] = "session",
    autouse: bool = True,
    name: str = "nothing_left_running",
) -> Any:
    """A fixture that runs :func:`assert_nothing_left` when its scope ends.

    Assign it in a ``conftest.py`` (``nothing_left_running = leftover_check("opa")``): by
    default it is autouse and session-scoped, so the suite fails if, after every other fixture
    was torn down, a descendant of the test process with one of ``markers`` in its command
    line is still running.

    Args:
        *markers: Command-line texts (every descendant counts when none is given).
        under: Directories no process may still run in or name.
        scope: The fixture's scope.
        autouse: Whether the fixture applies without being requested.
        name: The fixture's name.

    Returns:
        The fixture function.
    """

    def check() -> Iterator[None]:
        yield
        assert_nothing_left(*markers, under=under)

    check.__doc__ = f"Nothing with {', '.join(markers) or 'any command line'} is left running."
    return pytest.fixture(scope=scope, autouse=autouse, name=name)(check)


# --- the pytest plugin ----------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin's marker."""
    config.addinivalue_line(
        "markers",
        "itbench_trial(ports=1, seed=7, options=None, secret=b''): "
        "how the trial_ctx fixture builds its trial context",
    )


@pytest.fixture
def trial_ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TrialContext]:
    """A trial context on a reserved port block under ``tmp_path`` (see :func:`trial_context`).

    The test's ``itbench_trial`` marker, if any, gives the keyword arguments of
    :func:`trial_context`.
    """
    marker = request.node.get_closest_marker("itbench_trial")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    with trial_context(tmp_path, **kwargs) as ctx:
        yield ctx


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fail the test if a process it started (a descendant of the test process) still runs."""
    before = live_processes(descendants=True)
    yield
    assert_nothing_left(ignore=before)
