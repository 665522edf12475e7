"""The trial runner: plans trials, runs each through its lifecycle, records results."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import json
import logging
import os
import platform
import re
import shutil
import socket
import subprocess
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from itbench.agents import AgentContext, AgentSpec
from itbench.domain import Domain, Environment, TrialContext
from itbench.models import (
    HostInfo,
    RunConfig,
    RunManifest,
    ScenarioSpec,
    Submission,
    Timings,
    TrialResult,
    TrialStatus,
)
from itbench.ports import PortAllocator, PortBlock
from itbench.results import RunStore
from itbench.session import Bench
from itbench.tools import Toolbox

log = logging.getLogger("itbench.runner")

#: Seconds an environment may take to make its fault observable, unless overridden.
DEFAULT_READY_TIMEOUT = 120.0
#: Seconds an agent past its time limit (or cancelled) gets to stop what it started.
AGENT_STOP_GRACE = 10.0
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class UsageError(Exception):
    """The run cannot start as asked (unknown agent, no scenario selected, ...)."""


@dataclass(frozen=True)
class PlannedTrial:
    """One (scenario, agent, index) to run, with its seed."""

    trial_id: str
    scenario: ScenarioSpec
    agent: str
    index: int
    seed: int


def trial_seed(run_seed: int, scenario_id: str, agent: str, index: int) -> int:
    """A stable 31-bit seed for one trial, derived from the run seed."""
    digest = hashlib.sha256(f"{run_seed}:{scenario_id}:{agent}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def trial_id(scenario_id: str, agent: str, index: int) -> str:
    """File-system safe trial id: ``<scenario>__<agent>__<index>``."""
    return f"{_SAFE.sub('_', scenario_id.replace('/', '.'))}__{_SAFE.sub('_', agent)}__{index}"


def plan_trials(specs: list[ScenarioSpec], config: RunConfig) -> list[PlannedTrial]:
    """Every trial of a run, in a stable order (scenario, then index)."""
    return [
        PlannedTrial(
            trial_id(spec.id, config.agent, i),
            spec,
            config.agent,
            i,
            trial_seed(config.seed, spec.id, config.agent, i),
        )
        for spec in specs
        for i in range(config.trials)
    ]


def package_versions(bench: Bench) -> dict[str, str]:
    """Versions of Python, itbench and every plugin distribution."""
    out = {"python": platform.python_version()}
    for info in bench.host.infos.values():
        if info.distribution and info.version:
            out[info.distribution] = info.version
    for name in ("pluggy", "pydantic"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[name] = md.version(name)
    return out


def git_revision() -> str | None:
    """The git revision of the working directory's checkout, if any."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def host_info() -> HostInfo:
    """Facts about this machine."""
    memory = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return HostInfo(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        python=platform.python_version(),
        cpus=os.cpu_count() or 1,
        memory_bytes=memory,
    )


def _now() -> datetime:
    return datetime.now(UTC)


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")


@dataclass
class RunOutcome:
    """What a run produced."""

    run_dir: Path
    results: list[TrialResult]
    skipped: int = 0
    interrupted: bool = False

    @property
    def errors(self) -> int:
        """Trials that ended in an infrastructure error."""
        return sum(r.status is TrialStatus.error for r in self.results)


@dataclass
class Runner:
    """Runs the trials of one run directory.

    Args:
        bench: The loaded session (plugins, domains, agents, catalog).
        config: The run's options.
        run_dir: Where manifest, results and artifacts go.
        on_result: Called in the main thread after each result was recorded.
        on_plan: Called once with the number of trials to run and already done.
    """

    bench: Bench
    config: RunConfig
    run_dir: Path
    on_result: Callable[[TrialResult], None] | None = None
    on_plan: Callable[[int, int], None] | None = None
    ports: PortAllocator = field(default_factory=PortAllocator)
    cancel: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.run_dir = self.run_dir.resolve()
        self.store = RunStore(self.run_dir)
        self._versions: dict[str, str] = {}
        self._by_id: dict[str, PlannedTrial] = {}

    # --- planning ------------------------------------------------------------------------

    def select(self) -> list[ScenarioSpec]:
        """Scenarios of this run.

        Raises:
            UsageError: nothing matches.
        """
        cfg = self.config
        specs = self.bench.catalog.select(
            cfg.scenarios,
            tags=cfg.tags,
            domains=cfg.domains,
            complexity=[c.value for c in cfg.complexity],
        )
        if not specs:
            raise UsageError(f"no scenario matches {', '.join(cfg.scenarios)}")
        return specs

    def agent_spec(self) -> AgentSpec:
        """The agent of this run.

        Raises:
            UsageError: unknown agent.
        """
        spec = self.bench.agents.get(self.config.agent)
        if spec is None:
            known = ", ".join(sorted(self.bench.agents))
            raise UsageError(f"unknown agent {self.config.agent!r} (known: {known})")
        return spec

    def manifest(self, trials: list[PlannedTrial], specs: list[ScenarioSpec]) -> RunManifest:
        """A new manifest for this run."""
        return RunManifest(
            run_id=uuid.uuid4().hex[:12],
            created_at=_now(),
            config=self.config,
            packages=self._versions,
            git_revision=git_revision(),
            host=host_info(),
            seeds={t.trial_id: t.seed for t in trials},
            scenario_ids=[s.id for s in specs],
        )

    # --- running -------------------------------------------------------------------------

    def run(self, resume: bool = False) -> RunOutcome:
        """Run every planned trial that has no result yet.

        Raises:
            UsageError: bad agent, executor or scenario selection.
            KeyboardInterrupt: the run was interrupted; finished trials are recorded.
        """
        agent = self.agent_spec()
        executor_spec = self.bench.executors.get(self.config.executor)
        if executor_spec is None:
            raise UsageError(f"unknown executor {self.config.executor!r}")
        self._versions = package_versions(self.bench)
        if resume:
            manifest = self.store.read_manifest()
            specs = [
                self.bench.catalog.scenarios[s]
                for s in manifest.scenario_ids
                if s in self.bench.catalog.scenarios
            ]
            missing = set(manifest.scenario_ids) - {s.id for s in specs}
            if missing:
                raise UsageError(
                    f"scenarios of the run are no longer in the catalog: {', '.join(sorted(missing))}"
                )
        else:
            specs = self.select()
        trials = plan_trials(specs, self.config)
        for t in trials:
            if t.scenario.domain not in self.bench.domains:
                raise UsageError(f"{t.scenario.id}: domain {t.scenario.domain!r} is not loaded")
            if agent.domains and t.scenario.domain not in agent.domains:
                raise UsageError(
                    f"agent {agent.name!r} does not support domain {t.scenario.domain!r}"
                )
        if resume:
            self.store.repair()
        else:
            if self.store.results_path.exists() or self.store.manifest_path.exists():
                raise UsageError(f"{self.run_dir} already holds a run; use --resume to continue it")
            manifest = self.manifest(trials, specs)
            self.store.write_manifest(manifest)
        done = {r.trial_id for r in self.store.results()}
        todo = [t for t in trials if t.trial_id not in done]
        if self.on_plan:
            self.on_plan(len(todo), len(trials) - len(todo))
        self.bench.host.call_each("itbench_run_started", manifest=manifest, run_dir=self.run_dir)
        self._manifest = manifest
        executor = executor_spec.factory(self.config.workers)
        interrupted = False
        try:
            executor.run(todo, self.run_trial, self._record, self.cancel)
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            results = self.store.results()
            if not interrupted:
                self.bench.host.call_each(
                    "itbench_run_finished", run_dir=self.run_dir, results=results
                )
        return RunOutcome(
            self.run_dir, results, skipped=len(trials) - len(todo), interrupted=interrupted
        )

    def _record(self, result: TrialResult | None) -> None:
        if result is None:  # interrupted in flight: nothing recorded, resume reruns it
            return
        self.store.append(result)
        self.bench.host.call_each(
            "itbench_trial_finished", trial=self._by_id.get(result.trial_id), result=result
        )
        if self.on_result:
            self.on_result(result)

    def run_trial(self, trial: PlannedTrial, slot: int) -> TrialResult | None:
        """Run one trial through its whole lifecycle; never raises for a trial's failure.

        Returns:
            The result, or ``None`` when the run was cancelled before the trial finished.
        """
        self._by_id[trial.trial_id] = trial
        return TrialRun(self, trial).execute()


class TrialRun:
    """The lifecycle of one trial (one instance per trial, run in a worker thread)."""

    def __init__(self, runner: Runner, trial: PlannedTrial) -> None:
        self.runner = runner
        self.trial = trial
        self.spec = trial.scenario
        self.domain: Domain = runner.bench.domains[self.spec.domain]
        self.agent_spec = runner.bench.agents[trial.agent]
        self.timings = Timings()
        self.status = TrialStatus.error
        self.error: str | None = None
        self.metrics: dict[str, Any] = {}
        self.toolbox: Toolbox | None = None
        self.usage: Any = None
        self.trial_dir = runner.store.trial_dir(trial.trial_id)
        self.workspace = runner.run_dir / "workspaces" / trial.trial_id

    def _prepare_dirs(self) -> None:
        if self.trial_dir.exists():
            # Left by a harness that died mid-trial: stop what it started, then start afresh.
            with contextlib.suppress(Exception):
                self.domain.recover(self.trial_dir)
            shutil.rmtree(self.trial_dir, ignore_errors=True)
        shutil.rmtree(self.workspace, ignore_errors=True)
        self.trial_dir.mkdir(parents=True)
        self.workspace.mkdir(parents=True)

    def _phase(self, name: str, fn: Callable[[], Any]) -> Any:
        if self.runner.cancel.is_set():
            raise _Cancelled
        start = time.perf_counter()
        try:
            return fn()
        finally:
            setattr(self.timings, name, round(time.perf_counter() - start, 6))

    def execute(self) -> TrialResult | None:
        """Run setup → inject → ready → agent → evaluate → teardown."""
        started = _now()
        t0 = time.perf_counter()
        self._prepare_dirs()
        self.runner.bench.host.call_each(
            "itbench_trial_started", trial=self.trial, trial_dir=self.trial_dir
        )
        env: Environment | None = None
        block: PortBlock | None = None
        cancelled = False
        try:
            block = self.runner.ports.acquire(max(self.domain.ports_per_trial, 1))
            ctx = TrialContext(
                trial_id=self.trial.trial_id,
                seed=self.trial.seed,
                trial_dir=self.trial_dir,
                workspace=self.workspace,
                port_base=block.base,
                port_count=block.count,
                options=dict(self.runner.config.options),
                log=logging.getLogger(f"itbench.trial.{self.trial.trial_id}"),
            )
            env = self.domain.create_environment(self.spec, ctx)
            self._phase("setup", env.setup)
            self._phase("inject", env.inject)
            ready_timeout = float(ctx.options.get("ready_timeout", DEFAULT_READY_TIMEOUT))
            self._phase("ready", lambda: env.wait_observable(ready_timeout))
            submission = self._run_agent(env, ctx)
            evaluation = self._phase(
                "evaluate",
                lambda: self.domain.evaluate(self.spec, env, submission, self.toolbox, ctx),  # type: ignore[arg-type]
            )
            self.metrics = dict(evaluation.metrics)
            self.timings.time_to_detect = evaluation.time_to_detect
            self.timings.time_to_mitigate = evaluation.time_to_mitigate
            _write_json(self.trial_dir / "evaluation.json", evaluation.model_dump(mode="json"))
            if self.status is not TrialStatus.timeout:
                self.status = TrialStatus.passed if evaluation.passed else TrialStatus.failed
        except _Cancelled:
            cancelled = True
        except Exception as exc:
            self.status = TrialStatus.error
            self.error = f"{type(exc).__name__}: {exc}"
            (self.trial_dir / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        finally:
            if env is not None:
                start = time.perf_counter()
                try:
                    env.teardown()
                except Exception as exc:
                    self.status = TrialStatus.error
                    self.error = f"teardown failed: {type(exc).__name__}: {exc}"
                self.timings.teardown = round(time.perf_counter() - start, 6)
            if block is not None:
                block.release()
        if cancelled or self.runner.cancel.is_set() and self.status is TrialStatus.error:
            return None
        self.timings.total = round(time.perf_counter() - t0, 6)
        return self._result(started)

    def _run_agent(self, env: Environment, ctx: TrialContext) -> Submission | None:
        limit = float(self.runner.config.timeout or self.spec.time_limit)
        deadline_ts = time.time() + limit
        self.toolbox = Toolbox.of(
            env.tools(), deadline=deadline_ts, journal_path=self.trial_dir / "tools.jsonl"
        )
        task = self.domain.task_view(
            self.spec, env, ctx, self.toolbox, datetime.fromtimestamp(deadline_ts, UTC)
        )
        if self.runner.config.timeout:
            task = task.model_copy(update={"time_limit": limit})
        (self.trial_dir / "task.json").write_text(task.model_dump_json(indent=2), encoding="utf-8")
        agent_ctx = AgentContext(
            self.domain, self.spec if self.agent_spec.privileged else None, dict(ctx.options)
        )
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                agent = self.agent_spec.factory(agent_ctx)
                box["agent"] = agent
                box["submission"] = agent.run(task, self.toolbox)  # type: ignore[arg-type]
            except BaseException as exc:  # reported as the agent's failure, not the harness's
                box["exc"] = exc
                box["tb"] = traceback.format_exc()

        start = time.perf_counter()
        thread = threading.Thread(target=target, name=f"agent-{self.trial.trial_id}", daemon=True)
        thread.start()
        while thread.is_alive() and time.perf_counter() - start < limit:
            if self.runner.cancel.is_set():
                self._stop_agent(thread)
                raise _Cancelled
            thread.join(timeout=0.05)
        self.timings.agent = round(time.perf_counter() - start, 6)
        agent_obj = box.get("agent")
        self.usage = getattr(agent_obj, "usage", None)
        if thread.is_alive():
            self._stop_agent(thread)
            self.status = TrialStatus.timeout
            self.error = f"agent exceeded its time limit of {limit:g}s"
            return None
        if "exc" in box:
            self.status = TrialStatus.failed
            self.error = f"agent raised {type(box['exc']).__name__}: {box['exc']}"
            (self.trial_dir / "agent-error.txt").write_text(box["tb"], encoding="utf-8")
            return None
        submission = box.get("submission")
        return self._check_submission(submission)

    def _stop_agent(self, thread: threading.Thread) -> None:
        """Close the toolbox and give the agent a moment to stop what it started.

        An agent sees the closed toolbox and cleans up (the ``command`` agent stops its
        program's process group); without the wait, a run that ends right after could exit
        while that clean-up is still pending and leave the program running.
        """
        if self.toolbox is not None:
            self.toolbox.close()
        thread.join(timeout=AGENT_STOP_GRACE)

    def _check_submission(self, raw: Any) -> Submission | None:
        """Coerce the agent's return value to the domain's submission model."""
        if raw is None:
            return None
        model = self.domain.submission_model
        try:
            if isinstance(raw, model):
                submission: Submission = raw
            else:
                data = raw.model_dump() if isinstance(raw, Submission) else raw
                submission = model.model_validate(data)
        except ValidationError as exc:
            self.status = TrialStatus.failed
            self.error = f"invalid submission: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}"
            return None
        (self.trial_dir / "submission.json").write_text(
            submission.model_dump_json(indent=2), encoding="utf-8"
        )
        return submission

    def _result(self, started: datetime) -> TrialResult:
        calls = self.toolbox.calls if self.toolbox else []
        usage = self.usage if self.usage is not None else None
        return TrialResult(
            run_id=self.runner._manifest.run_id,
            trial_id=self.trial.trial_id,
            scenario_id=self.spec.id,
            domain=self.spec.domain,
            agent=self.trial.agent,
            trial_index=self.trial.index,
            seed=self.trial.seed,
            status=self.status,
            metrics=self.metrics,
            timings=self.timings,
            steps=len(self.toolbox.action_calls) if self.toolbox else 0,
            tool_calls=len(calls),
            usage=usage.model_dump() if usage is not None else {},
            error=self.error,
            tags=list(self.spec.tags),
            complexity=self.spec.complexity,
            task_types=list(self.spec.task_types),
            started_at=started,
            finished_at=_now(),
            versions=self.runner._versions,
        )


class _Cancelled(Exception):
    """The run was interrupted before this trial finished."""
