"""The trial runner: plans trials, runs each through its lifecycle, records results."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import math
import os
import secrets
import shutil
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from itbench import trajectory
from itbench.active import LOCK, RunLock, register, unregister
from itbench.agents import AgentContext, AgentSpec
from itbench.bench import Bench
from itbench.bounds import Bounds, bounds_problem, warn_once
from itbench.catalog import catalog_versions
from itbench.cgroups import remove_recorded
from itbench.chat import ModelUnavailable
from itbench.command import program_dir
from itbench.deadline import Deadline
from itbench.domain import (
    DEFAULT_READY_TIMEOUT,
    READY_TIMEOUT_OPTION,
    AnyDomain,
    Environment,
    TrialContext,
)
from itbench.errors import IntegrityError, RunDirError, UsageError, validation_problem
from itbench.models import (
    Label,
    MetricValue,
    RunConfig,
    RunManifest,
    ScenarioSpec,
    Submission,
    Timings,
    TrialResult,
    TrialStatus,
)
from itbench.options import OptionError, check_options
from itbench.plan import PlannedTrial, plan_trials
from itbench.ports import PortAllocator, PortBlock
from itbench.process import foreign_records, stop_recorded
from itbench.provenance import (
    code_dirs,
    code_hashes,
    git_dirty,
    git_revision,
    host_info,
    package_versions,
)
from itbench.store import EVALUATION, TRIAL_RECORD, RunStore
from itbench.tools import Toolbox
from itbench.workspace_fs import unmount_all, unmount_noted

log = logging.getLogger("itbench.runner")

#: The plugin whose agents may run sandboxed (the ``command`` agent and the leak probe).
CORE_AGENTS = "itbench.agents"
#: The run directory's record of plugin problems (absent when there were none).
PROBLEMS_FILE = "plugin-problems.json"
#: A judged trial's verdict in its directory (status and reason), written before teardown.
VERDICT = "verdict.json"
#: Seconds an agent past its time limit (or cancelled) gets to stop what it started.
AGENT_STOP_GRACE = 10.0
#: Seconds the tool calls still running when the agent's turn ends get to return.
TURN_DRAIN = 5.0
#: Where each workspace gets a neutral alias, so the path an agent sees names no run directory.
WORKSPACE_ALIASES = Path("/tmp/itbench-workspaces")


def workspace_alias(handle: str, real: Path) -> Path:
    """A link ``/tmp/itbench-workspaces/<handle>`` to a trial's workspace (or ``real`` itself).

    Run directories are named by users (``--out runs/crash-loop``); the workspace's own path
    would show that name to the agent. The alias names only the random handle. Without a
    directory of aliases that belongs to this user, the real path is used.
    """
    try:
        WORKSPACE_ALIASES.mkdir(mode=0o711, exist_ok=True)
        info = WORKSPACE_ALIASES.lstat()
        if WORKSPACE_ALIASES.is_symlink() or info.st_uid != os.getuid() or info.st_mode & 0o022:
            return real
        alias = WORKSPACE_ALIASES / handle
        alias.symlink_to(real)
    except OSError:
        return real
    return alias


def environment_seed(secret: bytes, trial_id: str, seed: int) -> int:
    """The seed a trial's environment gets: the public seed keyed with the run's secret."""
    digest = hmac.new(secret, f"{trial_id}:{seed}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


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
    #: Plugin problems raised while the run ran (a lifecycle or registration hook that raised).
    problems: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Trials that ended in an infrastructure error."""
        return sum(r.status is TrialStatus.error for r in self.results)


@dataclass(frozen=True)
class RunContext:
    """What every trial of a run shares, fixed when the run starts or a worker attaches.

    Attributes:
        manifest: The run's manifest (a copy: nothing a lifecycle hook does to the one it is
            handed reaches the results).
        versions: The package versions every result records.
        labels: The labels of the run's agent.
    """

    manifest: RunManifest
    versions: Mapping[str, str]
    labels: tuple[Label, ...]

    @classmethod
    def of(
        cls, manifest: RunManifest, versions: Mapping[str, str], labels: Iterable[Label]
    ) -> RunContext:
        """A context holding copies of what it is given."""
        return cls(manifest.model_copy(deep=True), dict(versions), tuple(labels))

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.manifest.run_id


@dataclass
class Runner:
    """Runs the trials of one run directory.

    Args:
        bench: The loaded session (plugins, domains, agents, catalog).
        config: The run's options.
        run_dir: Where manifest, results and artifacts go.
        on_result: Called in the main thread after each result was recorded.
        on_plan: Called once with the trials to run and the number already done.
    """

    bench: Bench
    config: RunConfig
    run_dir: Path
    on_result: Callable[[TrialResult], None] | None = None
    on_plan: Callable[[list[PlannedTrial], int], None] | None = None
    ports: PortAllocator = field(default_factory=PortAllocator)
    cancel: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.run_dir = self.run_dir.resolve()
        self.store = RunStore(self.run_dir)
        self.secret = b""
        self.labels: list[Label] = []
        #: The bounds of the run's sandboxes (empty: none apply, or none can be applied).
        self.bounds: dict[str, int | float] = {}
        self._code: dict[str, str] = {}
        self._code_dirs: dict[str, Path] = {}
        self._versions: dict[str, str] = {}
        self._context: RunContext | None = None
        self._by_id: dict[str, PlannedTrial] = {}
        #: This run's record among the runs in progress (see :mod:`itbench.active`).
        self._record_path: Path | None = None

    @property
    def context(self) -> RunContext:
        """What the run's trials share, fixed when it started (or this worker attached).

        Raises:
            RuntimeError: the run has not started.
        """
        if self._context is None:
            raise RuntimeError("the run has not started: no run context yet")
        return self._context

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
            package_hashes=self._code,
            git_revision=git_revision(),
            git_dirty=git_dirty(),
            host=host_info(),
            seeds={t.trial_id: t.seed for t in trials},
            scenario_ids=[s.id for s in specs],
            catalog_versions=catalog_versions(specs),
            secret_sha256=hashlib.sha256(self.secret).hexdigest(),
            labels=self.labels,
            bounds=self.bounds,
        )

    def _bound_sandboxes(self) -> None:
        """The bounds of a sandboxed agent's run, or the label ``unbounded`` with a warning."""
        problem = bounds_problem()
        if problem is not None:
            warn_once(problem)
            self.labels.append(Label.unbounded)
            return
        try:
            self.bounds = Bounds.from_options(self.config.options).record()
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def protected_paths(self) -> list[Path]:
        """What no external agent may see: the run directory, catalogs and the code."""
        return [self.run_dir, *self.bench.catalog_paths, *self._code_dirs.values()]

    def code_changed(self, domain: AnyDomain) -> list[str]:
        """Packages that judge ``domain`` (the core and its own) changed since the run started."""
        own = {"itbench", type(domain).__module__.split(".")[0]}
        dirs = {k: v for k, v in self._code_dirs.items() if k in own}
        now = code_hashes(dirs)
        return sorted(k for k in dirs if now.get(k) != self._code.get(k))

    # --- running -------------------------------------------------------------------------

    def run(self, resume: bool = False) -> RunOutcome:
        """Run every planned trial that has no result yet.

        Raises:
            UsageError: bad agent, executor or scenario selection.
            KeyboardInterrupt: the run was interrupted; finished trials are recorded.
        """
        fresh = not self.run_dir.exists()
        locked_before = (self.run_dir / LOCK).exists()
        lock = RunLock(self.run_dir)
        try:
            lock.acquire()
        except RunDirError as exc:
            raise UsageError(str(exc)) from None
        try:
            return self._run_locked(resume)
        except UsageError:
            lock.release()
            # A refused run leaves nothing behind: no directory (or lock) of its own.
            self._undo_refused(fresh, locked_before)
            raise
        finally:
            lock.release()
            if self._record_path is not None:
                unregister(self._record_path)

    def _undo_refused(self, created: bool, locked_before: bool) -> None:
        """Take back what a refused run made.

        Its lock goes when no run was recorded, and the directory too when this run
        ``created`` it and it is left empty.
        """
        if locked_before or self.store.manifest_path.exists():
            return
        (self.run_dir / LOCK).unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):
                self.run_dir.rmdir()

    def _check_agent_dir(self) -> None:
        """Refuse an agent program kept inside the run directory (the sandbox hides that one).

        Raises:
            UsageError: the program's directory (``agent_dir``, or the command's own) lies in
                the run directory.
        """
        directory = program_dir(self.config.options)
        if directory is not None and directory.is_relative_to(self.run_dir):
            raise UsageError(
                f"the agent's program directory {directory} is inside the run directory "
                f"{self.run_dir}, which no agent may see: keep the program elsewhere"
            )

    def _run_locked(self, resume: bool) -> RunOutcome:
        agent = self.agent_spec()
        try:
            # Every key declared by some plugin and every value checked by its declarer, so a
            # typo or a wrong value stops the run here rather than erring in every trial.
            self.config.options = check_options(self.config.options, self.bench.options.values())
        except OptionError as exc:
            raise UsageError(str(exc)) from None
        try:
            # The agent's defaults join the options, so the manifest records every setting.
            self.config.options = agent.settings(self.config.options)
        except ValueError as exc:
            raise UsageError(f"agent {agent.name!r}: {exc}") from None
        self._check_agent_dir()
        executor_spec = self.bench.executors.get(self.config.executor)
        if executor_spec is None:
            raise UsageError(f"unknown executor {self.config.executor!r}")
        self._versions = package_versions(self.bench.host)
        self._code_dirs = code_dirs(self.bench.host)
        self._code = code_hashes(self._code_dirs)
        core = self.bench.owners.get(("agent", agent.name)) == CORE_AGENTS
        self.labels = agent.labels(self.config.sandbox, core=core)
        if not self.labels and agent.needs_sandbox:
            self._bound_sandboxes()
        if resume:
            manifest = self.store.read_manifest()
            self.secret = self.store.read_secret(manifest.secret_sha256)
            self.store.use_secret(self.secret, manifest)
            specs = [
                self.bench.catalog.scenarios[s]
                for s in manifest.scenario_ids
                if s in self.bench.catalog.scenarios
            ]
            missing = set(manifest.scenario_ids) - {s.id for s in specs}
            if missing:
                raise UsageError(
                    f"{self.store.manifest_path}: field 'scenario_ids': scenarios of the run are "
                    f"no longer in the catalog: {', '.join(sorted(missing))}"
                )
        else:
            specs = self.select()
        trials = plan_trials(specs, self.config)
        contested = [
            *self.bench.contested_names("agent", [self.config.agent]),
            *self.bench.contested_names("executor", [self.config.executor]),
            *self.bench.contested_names("domain", [s.domain for s in specs]),
        ]
        if contested:
            # The first registration is the one that would run, but which plugin is first
            # depends on install order: a result under a contested name means nothing.
            raise UsageError(
                "; ".join(contested) + ": remove one of the plugins (see `itbench plugins`)"
            )
        for t in trials:
            if t.scenario.domain not in self.bench.domains:
                raise UsageError(f"{t.scenario.id}: domain {t.scenario.domain!r} is not loaded")
            if agent.domains and t.scenario.domain not in agent.domains:
                raise UsageError(
                    f"agent {agent.name!r} does not support domain {t.scenario.domain!r}"
                )
        if resume:
            # Everything is checked before the first change: a refused resume changes nothing.
            self.store.check_plan(manifest, [(t.trial_id, t.seed) for t in trials])
            # Checked against the chain and the trials' records: an edited line is refused,
            # never taken as done.
            key = self.store.key
            done = {r.trial_id for r in self.store.results(manifest, key=key)}
            self.store.repair()
        else:
            if self.store.results_path.exists() or self.store.manifest_path.exists():
                raise UsageError(f"{self.run_dir} already holds a run; use --resume to continue it")
            self.secret = self.store.create_secret()
            manifest = self.manifest(trials, specs)
            self.store.write_manifest(manifest)
            self.store.use_secret(self.secret, manifest)
            done = set()
        self._record_path = register(self.run_dir, manifest.run_id)
        self._context = RunContext.of(manifest, self._versions, self.labels)
        if resume:
            done |= self._recover_unfinished(done, {t.trial_id: t for t in trials})
        todo = [t for t in trials if t.trial_id not in done]
        if self.on_plan:
            self.on_plan(todo, len(trials) - len(todo))
        known = len(self.bench.host.problems)
        self.bench.host.call_each("itbench_run_started", manifest=manifest, run_dir=self.run_dir)
        executor = executor_spec.factory(self.config.workers)
        # Results of trials run elsewhere (worker processes, Ray) come back here: the hooks
        # get their planned trial from this table.
        self._by_id.update({t.trial_id: t for t in todo})
        interrupted = False
        try:
            executor.run(todo, RunnerJob(self), self._record, self.cancel)
        except KeyboardInterrupt:
            interrupted = True
            raise
        except UsageError:
            # The executor could not start (no Ray, a cluster it cannot join): a new run that
            # recorded nothing is undone, so the same command can simply be run again.
            if not resume and not self.store.results_path.exists():
                for path in (self.store.manifest_path, self.store.secret_path):
                    path.unlink(missing_ok=True)
            raise
        finally:
            results = self.store.results(manifest)
            if not interrupted:
                self.bench.host.call_each(
                    "itbench_run_finished", run_dir=self.run_dir, results=results
                )
            raised = self._write_problems(known)
        return RunOutcome(
            self.run_dir,
            results,
            skipped=len(trials) - len(todo),
            interrupted=interrupted,
            problems=raised,
        )

    def _write_problems(self, known: int) -> list[str]:
        """Write every plugin problem to ``plugin-problems.json``; return those of this run.

        Problems found while loading plugins were shown before the run; those a hook raised
        during the run (trial started or finished, agent registration, ...) would otherwise
        pass unseen, so the caller prints them at the end.
        """
        problems = list(self.bench.host.problems)
        if problems:
            _write_json(
                self.run_dir / PROBLEMS_FILE,
                [
                    {
                        "plugin": p.plugin,
                        "hook": p.hook,
                        "reason": p.reason,
                        "during_run": i >= known,
                    }
                    for i, p in enumerate(problems)
                ],
            )
        return [p.line() for p in problems[known:]]

    def _recover_unfinished(
        self, done: set[str], planned: dict[str, PlannedTrial] | None = None
    ) -> set[str]:
        """Stop and remove what trials of a killed harness left (from harness-only records).

        A trial that was judged before the harness died keeps its directory; with ``planned``
        (a resume) its verdict is recorded as its result, so it is never drawn again.

        Returns:
            The trial ids whose results were recorded from their verdicts.
        """
        self.store.remove_staging()
        recorded: set[str] = set()
        for handle, trial_id in self.store.trial_dirs().items():
            if trial_id in done or trial_id in recorded:
                continue
            judged = self._recover_dir(handle, trial_id)
            trial = (planned or {}).get(trial_id)
            if judged and trial is not None:
                self.store.append(self._judged_result(handle, trial))
                recorded.add(trial_id)
        return recorded

    def _judged_result(self, handle: str, trial: PlannedTrial) -> TrialResult:
        """The result of a trial judged before the harness died, from its verdict and record."""
        directory = self.store.trial_dir(handle)
        verdict = json.loads((directory / VERDICT).read_text(encoding="utf-8"))
        try:
            evaluation = json.loads((directory / EVALUATION).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            evaluation = {}
        note = "recorded on resume: the harness stopped after judging the trial, before its line"
        error = f"{verdict['error']}; {note}" if verdict.get("error") else note
        started = datetime.fromtimestamp((directory / TRIAL_RECORD).stat().st_mtime, UTC)
        finished = datetime.fromtimestamp((directory / VERDICT).stat().st_mtime, UTC)
        return TrialResult(
            **self.planned_fields(trial),
            handle=handle,
            status=TrialStatus(verdict["status"]),
            metrics=evaluation.get("metrics") or {},
            timings=Timings(
                time_to_detect=evaluation.get("time_to_detect"),
                time_to_mitigate=evaluation.get("time_to_mitigate"),
            ),
            error=error,
            started_at=started,
            finished_at=finished,
            record_sha256=self.store.record_sha256(handle),
        )

    def planned_fields(self, trial: PlannedTrial) -> dict[str, Any]:
        """The fields of a result that its planned trial and this run give."""
        spec = trial.scenario
        return {
            "run_id": self.context.run_id,
            "trial_id": trial.trial_id,
            "scenario_id": spec.id,
            "domain": spec.domain,
            "agent": trial.agent,
            "trial_index": trial.index,
            "seed": trial.seed,
            "labels": list(self.context.labels),
            "tags": list(spec.tags),
            "complexity": spec.complexity,
            "task_types": list(spec.task_types),
            "facets": spec.result_facets(),
            "versions": dict(self.context.versions),
        }

    def cleanup(self) -> list[str]:
        """Stop and remove what a killed run left in this run directory.

        Every trial directory without a result is recovered (its recorded processes stopped,
        its directories removed), as ``--resume`` does before running the rest.

        Returns:
            The trial ids recovered.

        Raises:
            UsageError: another process holds the run directory.
            RunDirError: the results cannot be read.
        """
        lock = RunLock(self.run_dir)
        try:
            lock.acquire()
        except RunDirError as exc:
            raise UsageError(str(exc)) from None
        try:
            done = {r.trial_id for r in self.store.iter_results()}
            left = [t for t in self.store.trial_dirs().values() if t not in done]
            self._recover_unfinished(done)
            return sorted(left)
        finally:
            lock.release()

    def recover_trial(self, trial_id: str) -> None:
        """Stop and remove what earlier attempts of one trial left (a worker that died)."""
        for handle, tid in self.store.trial_dirs().items():
            if tid == trial_id:
                # The driver runs the trial again: its earlier attempt, judged or not, goes.
                self._recover_dir(handle, trial_id, keep_judged=False)

    def _recover_dir(self, handle: str, trial_id: str, *, keep_judged: bool = True) -> bool:
        """Stop what a trial left; remove its directories unless it was judged.

        Returns:
            Whether the trial was judged (its directory, with its verdict, is kept).
        """
        trial = self.store.trial_dir(handle)
        foreign = foreign_records(trial)
        if foreign:
            # Its processes ran on another node of a cluster: only that node can stop them.
            hosts = ", ".join(sorted({r.host for r in foreign}))
            raise UsageError(
                f"trial {trial_id} ran on {hosts}: run `itbench cleanup {self.run_dir}` there"
            )
        domain = self._domain_of(trial_id)
        if domain is None:
            # Without its domain only the recorded process groups can be stopped: the trial
            # directory stays, so that a cleanup with the domain loaded can finish the job.
            stop_recorded(trial)
            raise UsageError(
                f"trial {trial_id}: its domain {trial_id.split('.', 1)[0]!r} is not loaded; "
                "load the run's plugins and clean up again"
            )
        with contextlib.suppress(Exception):
            domain.recover(trial)
        remove_recorded(trial)  # the sandbox's control groups
        unmount_all(self.store.workspace(handle))  # the bounded workspace of a killed harness
        unmount_noted(trial)  # and the sandbox's private directory
        if (alias := WORKSPACE_ALIASES / handle).is_symlink():
            alias.unlink()
        if keep_judged and (trial / VERDICT).is_file():
            return True
        shutil.rmtree(trial, ignore_errors=True)
        shutil.rmtree(self.store.workspace(handle), ignore_errors=True)
        return False

    def attach(self, manifest: RunManifest, secret: bytes, labels: list[Label]) -> None:
        """Prepare to run trials of a run started elsewhere (a worker of a distributed run).

        The scoring code is checked against the hashes the run recorded when it started, so a
        node whose code differs cannot produce a valid result.
        """
        self.secret = secret
        self.store.use_secret(secret, manifest)
        self.labels = list(labels)
        self._versions = dict(manifest.packages)
        self._context = RunContext.of(manifest, self._versions, self.labels)
        self._code_dirs = code_dirs(self.bench.host)
        self._code = dict(manifest.package_hashes)

    def error_result(self, trial: PlannedTrial, reason: str) -> TrialResult:
        """An ``error`` result for a trial that could not be run (a worker lost twice...)."""
        now = _now()
        return TrialResult(
            **self.planned_fields(trial),
            status=TrialStatus.error,
            error=reason,
            started_at=now,
            finished_at=now,
        )

    def _domain_of(self, trial_id: str) -> AnyDomain | None:
        # A trial id starts with its scenario id, '/' turned '.'; domain names hold no '.'.
        return self.bench.domains.get(trial_id.split(".", 1)[0])

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


class RunnerJob:
    """A runner's trials as an executor's job (:class:`itbench.executors.TrialJob`)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.options: dict[str, Any] = dict(runner.config.options)

    def __call__(self, trial: PlannedTrial, slot: int) -> TrialResult | None:
        """Run one trial in this process."""
        return self.runner.run_trial(trial, slot)

    def portable(self) -> RemoteTrial:
        """The runner's trials as a picklable callable for worker processes."""
        r = self.runner
        return RemoteTrial(
            config_json=r.config.model_dump_json(),
            run_dir=str(r.run_dir),
            secret_hex=r.secret.hex(),
            manifest_json=r.context.manifest.model_dump_json(),
            labels=tuple(label.value for label in r.context.labels),
        )

    def resources(self, trial: PlannedTrial) -> dict[str, float]:
        """The domain's declared resources per trial."""
        return dict(self.runner.bench.domains[trial.scenario.domain].resources)

    def recover(self, trial: PlannedTrial) -> None:
        """Stop and remove what earlier attempts of ``trial`` left."""
        self.runner.recover_trial(trial.trial_id)

    def error_result(self, trial: PlannedTrial, reason: str) -> TrialResult:
        """An ``error`` result for ``trial``."""
        return self.runner.error_result(trial, reason)

    def plugin_problem(self, plugin: str, reason: str, hook: str | None = None) -> None:
        """Record a plugin problem raised where a trial ran (printed and kept with the run)."""
        self.runner.bench.host.problem(plugin, reason, hook)


@dataclass(frozen=True)
class RemoteTrial:
    """Runs trials of a run in another process (a Ray worker), with the same itbench installed.

    Holds only what rebuilds the runner there: the run's config, directory, secret, manifest
    and labels. The run directory must be reachable at the same path (one machine, or a shared
    file system); the result goes back to the driver, which alone writes ``results.jsonl``.
    """

    config_json: str
    run_dir: str
    secret_hex: str
    manifest_json: str
    labels: tuple[str, ...]

    def runner(self) -> Runner:
        """This process's runner for the run (made once per process)."""
        key = (self.run_dir, self.manifest_json)
        cached = _WORKER_RUNNERS.get(key)
        if cached is None or cached.cancel.is_set():
            config = RunConfig.model_validate_json(self.config_json)
            bench = Bench(plugins=config.plugins, scenario_paths=config.scenario_paths)
            cached = Runner(bench, config, Path(self.run_dir))
            cached.attach(
                RunManifest.model_validate_json(self.manifest_json),
                bytes.fromhex(self.secret_hex),
                [Label(v) for v in self.labels],
            )
            _WORKER_RUNNERS[key] = cached
        return cached

    def __call__(self, trial: PlannedTrial) -> str | None:
        """Run ``trial`` here; ``None`` when the task was cancelled (its trial torn down).

        Raises:
            UsageError: the trial's agent or domain is not registered in this process.
            Exception: whatever the harness raised (never a trial's own failure).
        """
        runner = self.runner()
        for kind, name, known in (
            ("agent", trial.agent, runner.bench.agents),
            ("domain", trial.scenario.domain, runner.bench.domains),
        ):
            if name not in known:
                raise UsageError(
                    f"{kind} {name!r} is not registered in the worker process (plugins are "
                    "loaded there by name: load it with --plugin or install its distribution)"
                )
        box: dict[str, Any] = {}
        # An event, not Thread.join: a join cut by KeyboardInterrupt can leave is_alive()
        # False while the thread still runs, and the trial's teardown would be abandoned.
        done = threading.Event()

        def target() -> None:
            try:
                box["result"] = runner.run_trial(trial, 0)
            except BaseException as exc:  # the harness's own failure: raised to the caller
                box["error"] = exc
            finally:
                done.set()

        thread = threading.Thread(target=target, name=f"trial-{trial.trial_id}", daemon=True)
        thread.start()
        try:
            while not done.wait(timeout=0.1):
                pass
        except KeyboardInterrupt:
            # The driver cancelled the task: the trial sees the cancel, stops its agent and
            # tears its environment down (within its own time limits) before the task ends.
            runner.cancel.set()
            done.wait()
        error = box.get("error")
        if error is not None:
            raise error
        result: TrialResult | None = box.get("result")
        return result.model_dump_json() if result is not None else None

    def problems(self) -> list[tuple[str, str, str | None]]:
        """Plugin problems this process's runner recorded: ``(plugin, reason, hook)``."""
        runner = _WORKER_RUNNERS.get((self.run_dir, self.manifest_json))
        if runner is None:
            return []
        return [(p.plugin, p.reason, p.hook) for p in runner.bench.host.problems]


#: The runner of each run this worker process takes part in.
_WORKER_RUNNERS: dict[tuple[str, str], Runner] = {}


class TrialRun:
    """The lifecycle of one trial (one instance per trial, run in a worker thread)."""

    def __init__(self, runner: Runner, trial: PlannedTrial) -> None:
        self.runner = runner
        self.trial = trial
        self.spec = trial.scenario
        #: The scenario as published; ``spec`` becomes the trial's draw of it.
        self.published = trial.scenario
        self.domain: AnyDomain = runner.bench.domains[self.spec.domain]
        self.agent_spec = runner.bench.agents[trial.agent]
        self.timings = Timings()
        self.status = TrialStatus.error
        self.error: str | None = None
        self.metrics: dict[str, Any] = {}
        self.toolbox: Toolbox | None = None
        self.agent: object = None
        self.usage: Any = None
        self.output: Any = None
        #: Whether the agent ran in the sandbox (``None``: it never ran).
        self.sandboxed: bool | None = None
        #: The bounds its sandbox applied, and why it applied none (see :mod:`itbench.bounds`).
        self.bounds: dict[str, int | float] = {}
        self.unbounded: str | None = None
        #: What the trial drew from the scenario's declared sets (see ``Domain.draw``).
        self.drawn: dict[str, Any] = {}
        #: What the agent left in flight when its turn ended (see ``Environment.agent_finished``).
        self.leftovers: list[str] = []
        self.handle = secrets.token_hex(8)
        self.trial_dir = runner.store.trial_dir(self.handle)
        self.real_workspace = runner.store.workspace(self.handle)
        self.workspace = self.real_workspace

    def _prepare_dirs(self) -> None:
        self.runner.store.make_trial_dirs(self.handle, self.trial.trial_id)
        self.workspace = workspace_alias(self.handle, self.real_workspace)

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
                trial_id=self.handle,
                seed=environment_seed(self.runner.secret, self.trial.trial_id, self.trial.seed),
                trial_dir=self.trial_dir,
                workspace=self.workspace,
                port_base=block.base,
                port_count=block.count,
                options=dict(self.runner.config.options),
                log=logging.getLogger(f"itbench.trial.{self.handle}"),
                secret=self.runner.secret,
            )
            self.spec, self.drawn = self.domain.draw(self.spec, ctx)
            env = self.domain.create_environment(self.spec, ctx)
            self._phase("setup", env.setup)
            self._phase("inject", env.inject)
            ready_timeout = float(ctx.options.get(READY_TIMEOUT_OPTION, DEFAULT_READY_TIMEOUT))
            self._phase("ready", lambda: env.wait_observable(ready_timeout))
            before = env.fingerprint()
            submission = self._run_agent(env, ctx)
            self._end_turn(env)
            try:
                self._check_integrity(env, before)
            except IntegrityError:
                raise
            except Exception as exc:
                # What the checks read was broken during the agent's turn: tampering, not
                # infrastructure (an error would drop the trial from every score).
                raise IntegrityError(
                    f"the integrity checks failed: {type(exc).__name__}: {exc}"
                    + self._left_in_flight()
                ) from exc
            evaluation = self._phase("evaluate", lambda: self._evaluate(env, submission, ctx))
            self.metrics = dict(evaluation.metrics)
            self.timings.time_to_detect = evaluation.time_to_detect
            self.timings.time_to_mitigate = evaluation.time_to_mitigate
            _write_json(self.trial_dir / "evaluation.json", evaluation.model_dump(mode="json"))
            if self.status not in (TrialStatus.timeout, TrialStatus.unavailable):
                self.status = TrialStatus.passed if evaluation.passed else TrialStatus.failed
            # The verdict stands from here: a harness killed before the line is written
            # leaves it for --resume to record (never a second draw of a judged trial).
            _write_json(self.trial_dir / VERDICT, {"status": self.status, "error": self.error})
        except _Cancelled:
            cancelled = True
        except IntegrityError as exc:
            self.status = TrialStatus.invalid
            self.error = str(exc)
            (self.trial_dir / "invalid.txt").write_text(self.error + "\n", encoding="utf-8")
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
                    reason = f"teardown failed: {type(exc).__name__}: {exc}"
                    if self.status in (
                        TrialStatus.passed,
                        TrialStatus.failed,
                        TrialStatus.timeout,
                        TrialStatus.invalid,
                    ):
                        # The verdict stands: an agent must not turn its failure (or its
                        # tampering) into an excluded error by leaving what breaks teardown.
                        self.error = f"{self.error}; {reason}" if self.error else reason
                        (self.trial_dir / "teardown-error.txt").write_text(
                            traceback.format_exc(), encoding="utf-8"
                        )
                    else:
                        self.status = TrialStatus.error
                        self.error = reason
                self.timings.teardown = round(time.perf_counter() - start, 6)
            if block is not None:
                block.release()
            if self.workspace != self.real_workspace:
                with contextlib.suppress(OSError):
                    self.workspace.unlink()
        if cancelled or self.runner.cancel.is_set() and self.status is TrialStatus.error:
            return None
        self.timings.total = round(time.perf_counter() - t0, 6)
        result = self._result(started)
        calls = list(self.toolbox.calls) if self.toolbox else []
        trajectory.save(self.trial_dir, result, self.agent, calls)
        return result

    def _end_turn(self, env: Environment) -> None:
        """Shut every way the agent had into the environment before anything is judged.

        The toolbox refuses further calls and the environment stops its relays (aborting the
        agent's requests in flight); tool calls still running get :data:`TURN_DRAIN` seconds to
        return. What remains in flight is kept in :attr:`leftovers`.
        """
        assert self.toolbox is not None
        self.toolbox.close()
        self.leftovers = list(env.agent_finished())
        if not self.toolbox.wait_idle(TURN_DRAIN):
            self.leftovers.append(f"{self.toolbox.running} tool call(s) still running")

    def _left_in_flight(self) -> str:
        """`` (the agent left ... in flight)`` when it did, else nothing."""
        if not self.leftovers:
            return ""
        return f" (at the end of its turn the agent left: {', '.join(self.leftovers)})"

    def _check_integrity(self, env: Environment, before: dict[str, str]) -> None:
        """After the agent's turn: harness servers, evaluator inputs and scoring code intact.

        Raises:
            IntegrityError: any of them is not as it was before the agent's turn.
        """
        problems = list(env.harness_problems())
        after = env.fingerprint()
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        if changed:
            problems.append(
                f"evaluator inputs changed during the agent's turn: {', '.join(changed)}"
            )
        code = self.runner.code_changed(self.domain)
        if code:
            problems.append(f"scoring code changed since the run started: {', '.join(code)}")
        if problems:
            raise IntegrityError("; ".join(problems) + self._left_in_flight())

    def _evaluate(self, env: Environment, submission: Submission | None, ctx: TrialContext) -> Any:
        assert self.toolbox is not None
        try:
            return self.domain.evaluate(self.spec, env, submission, self.toolbox, ctx)
        except IntegrityError:
            raise
        except Exception as exc:
            # A harness server that died while judging is tampering, not infrastructure.
            try:
                problems = list(env.harness_problems())
            except Exception as check:  # a check that fails is a problem found
                problems = [f"the harness's servers cannot be checked: {check!r}"]
            if problems:
                raise IntegrityError("; ".join(problems)) from exc
            if self.leftovers:
                # Load the agent left may be why the evaluator could not measure: an error
                # would drop the trial from every score.
                raise IntegrityError(
                    f"the evaluation failed: {type(exc).__name__}: {exc}{self._left_in_flight()}"
                ) from exc
            raise

    def _run_agent(self, env: Environment, ctx: TrialContext) -> Submission | None:
        deadline = Deadline.after(self.runner.config.timeout or self.spec.time_limit)
        self.toolbox = Toolbox.of(
            env.tools(), deadline=deadline, journal_path=self.trial_dir / "tools.jsonl"
        )
        task = self.domain.task_view(self.spec, env, ctx, self.toolbox, deadline)
        (self.trial_dir / "task.json").write_text(task.model_dump_json(indent=2), encoding="utf-8")
        agent_ctx = AgentContext(
            self.domain,
            self.spec if self.agent_spec.privileged else None,
            dict(ctx.options),
            sandbox=self.runner.config.sandbox,
            trial_dir=self.trial_dir,
            protected=self.runner.protected_paths(),
            seed=self.trial.seed,
            deadline=deadline,
            published=self.published if self.agent_spec.published else None,
            trial_draw=dict(self.drawn) if self.agent_spec.published else None,
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

        env.agent_started()
        start = time.perf_counter()
        thread = threading.Thread(target=target, name=f"agent-{self.trial.trial_id}", daemon=True)
        thread.start()
        while thread.is_alive() and not deadline.passed():
            if self.runner.cancel.is_set():
                self._stop_agent(thread)
                raise _Cancelled
            thread.join(timeout=0.05)
        self.timings.agent = round(time.perf_counter() - start, 6)
        agent_obj = self.agent = box.get("agent")
        # Only core agents get here unlabelled; each says whether this trial ran confined.
        self.sandboxed = getattr(agent_obj, "confined", False) is True
        applied = getattr(agent_obj, "applied", None)
        self.bounds = dict(applied) if self.sandboxed and isinstance(applied, dict) else {}
        unbounded = getattr(agent_obj, "unbounded", None)
        self.unbounded = unbounded if self.sandboxed and isinstance(unbounded, str) else None
        self.usage = getattr(agent_obj, "usage", None)
        self.output = getattr(agent_obj, "output", None)
        if thread.is_alive():
            self._stop_agent(thread)
            self.status = TrialStatus.timeout
            self.error = f"agent exceeded its time limit of {deadline.seconds:g}s"
            return None
        if isinstance(box.get("exc"), ModelUnavailable):
            # Neither the agent's failure nor the harness's: kept apart, out of every score.
            self.status = TrialStatus.unavailable
            self.error = f"the model is unavailable: {box['exc']}"
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
            # Checked even when it is the model's own: one built without validation may hold
            # anything, and the evaluator must get what the model describes.
            data = raw.model_dump(warnings=False) if isinstance(raw, Submission) else raw
            submission: Submission = model.model_validate(data)
        except ValidationError as exc:
            self.status = TrialStatus.failed
            self.error = f"invalid submission: {validation_problem(exc, '(submission)')}"
            return None
        except Exception as exc:  # the agent's doing, never an infrastructure error
            self.status = TrialStatus.failed
            self.error = f"invalid submission: {type(exc).__name__}: {exc}"
            return None
        (self.trial_dir / "submission.json").write_text(
            submission.model_dump_json(indent=2), encoding="utf-8"
        )
        return submission

    def _labels(self) -> list[Label]:
        """The run's labels, plus ``unsandboxed`` when this trial's agent did not run sandboxed.

        An agent spec may claim ``sandboxed``; only the core's command agent, with its sandbox
        on, earns the claim. Anything else ran in the harness's process.
        """
        labels = list(self.runner.context.labels)
        if not labels and self.sandboxed is False:
            labels.append(Label.unsandboxed)
        if self.unbounded is not None and Label.unbounded not in labels:
            labels.append(Label.unbounded)
        return labels

    def _result(self, started: datetime) -> TrialResult:
        calls = self.toolbox.calls if self.toolbox else []
        usage = self.usage if self.usage is not None else None
        return TrialResult(
            **{
                **self.runner.planned_fields(self.trial),
                # What the trial's draw made of its scenario.
                "scenario_id": self.spec.id,
                "tags": list(self.spec.tags),
                "complexity": self.spec.complexity,
                "task_types": list(self.spec.task_types),
                "facets": self.spec.result_facets(),
                "labels": self._labels(),
            },
            handle=self.handle,
            status=self.status,
            metrics=self.metrics,
            timings=self.timings,
            steps=len(self.toolbox.action_calls) if self.toolbox else 0,
            tool_calls=len(calls),
            usage=usage.model_dump() if usage is not None else {},
            agent_metrics=_agent_metrics(self.agent),
            error=self.error,
            bounds=self.bounds,
            agent_output=self.output,
            drawn=self.drawn,
            started_at=started,
            finished_at=_now(),
            record_sha256=self.runner.store.record_sha256(self.handle),
        )


def _agent_metrics(agent: object) -> dict[str, MetricValue]:
    """What an agent reported about itself: scalar values under short names, at most 64."""
    reported = getattr(agent, "metrics", None)
    if not isinstance(reported, dict):
        return {}
    kept = {
        k: v
        for k, v in reported.items()
        if isinstance(k, str)
        and len(k) <= 64
        and (v is None or type(v) in (bool, int) or (type(v) is float and math.isfinite(v)))
    }
    return dict(list(kept.items())[:64])


class _Cancelled(Exception):
    """The run was interrupted before this trial finished."""
