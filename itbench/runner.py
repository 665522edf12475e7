"""The driver of a run: plans its trials, has an executor run them, records the results.

The driver checks the run's agent, options and scenarios, writes the manifest (or reads it
back on ``--resume``), hands the trials without a result to the run's executor and appends
each result to ``results.jsonl``. One trial's lifecycle is in :mod:`itbench.trial`, what runs
trials in other processes in :mod:`itbench.remote`, and the recovery of what killed trials
left in :mod:`itbench.recovery`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itbench.active import LOCK, register, unregister
from itbench.agents import AgentSpec
from itbench.bounds import Bounds, bounds_problem, warn_once
from itbench.catalog import catalog_versions
from itbench.command import program_dir
from itbench.errors import UsageError
from itbench.models import (
    Label,
    RunManifest,
    ScenarioSpec,
    TrialResult,
    TrialStatus,
)
from itbench.options import OptionError, check_options
from itbench.plan import PlannedTrial, plan_trials
from itbench.provenance import (
    code_dirs,
    code_hashes,
    git_dirty,
    git_revision,
    host_info,
    package_versions,
)
from itbench.recovery import Recovery, lock_run
from itbench.remote import RemoteTrial
from itbench.trial import RunContext, TrialRunner, utc_now, write_json

log = logging.getLogger("itbench.runner")

#: The plugin whose agents may run sandboxed (the ``command`` agent and the leak probe).
CORE_AGENTS = "itbench.agents"
#: The run directory's record of plugin problems (absent when there were none).
PROBLEMS_FILE = "plugin-problems.json"


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


@dataclass
class Runner(TrialRunner):
    """Runs the trials of one run directory: plans them, runs them and records their results.

    Its first fields are those of :class:`~itbench.trial.TrialRunner`.

    Args:
        on_result: Called in the main thread after each result was recorded.
        on_plan: Called once with the trials to run and the number already done.
    """

    on_result: Callable[[TrialResult], None] | None = None
    on_plan: Callable[[list[PlannedTrial], int], None] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        #: The bounds of the run's sandboxes (empty: none apply, or none can be applied).
        self.bounds: dict[str, int | float] = {}
        #: This run's record among the runs in progress (see :mod:`itbench.active`).
        self._record_path: Path | None = None

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
            created_at=utc_now(),
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

    # --- running -------------------------------------------------------------------------

    def run(self, resume: bool = False) -> RunOutcome:
        """Run every planned trial that has no result yet.

        Raises:
            UsageError: bad agent, executor or scenario selection.
            KeyboardInterrupt: the run was interrupted; finished trials are recorded.
        """
        fresh = not self.run_dir.exists()
        locked_before = (self.run_dir / LOCK).exists()
        lock = lock_run(self.run_dir)
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
            done |= Recovery(self).recover_unfinished(done, {t.trial_id: t for t in trials})
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
            write_json(
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

    def cleanup(self) -> list[str]:
        """Stop and remove what a killed run left here: :meth:`Recovery.cleanup`."""
        return Recovery(self).cleanup()

    def recover_trial(self, trial_id: str) -> None:
        """Stop and remove what earlier attempts of one trial left (a worker that died)."""
        Recovery(self).recover_trial(trial_id)

    def error_result(self, trial: PlannedTrial, reason: str) -> TrialResult:
        """An ``error`` result for a trial that could not be run (a worker lost twice...)."""
        now = utc_now()
        return TrialResult(
            **self.planned_fields(trial),
            status=TrialStatus.error,
            error=reason,
            started_at=now,
            finished_at=now,
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
