"""One trial's lifecycle, and what runs the trials of a run in one process.

A run's trials run in the process that drives the run or in worker processes attached to it
(see :mod:`itbench.remote`). Either way a :class:`TrialRunner` holds what they share (the
run's context, secret, store, ports and cancel event) and a :class:`TrialRun` takes each trial
through setup, fault injection, the agent's turn, the integrity checks, evaluation and
teardown. The names of what a trial leaves behind (its verdict, its workspace's alias) are
defined here; recovery (:mod:`itbench.recovery`) reads them.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import math
import os
import secrets
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from itbench import trajectory
from itbench.agents import AgentContext
from itbench.bench import Bench
from itbench.chat import ModelUnavailable
from itbench.deadline import Deadline
from itbench.domain import (
    DEFAULT_READY_TIMEOUT,
    READY_TIMEOUT_OPTION,
    AnyDomain,
    Environment,
    TrialContext,
)
from itbench.errors import IntegrityError, validation_problem
from itbench.models import (
    Label,
    MetricValue,
    RunConfig,
    RunManifest,
    Submission,
    Timings,
    TrialResult,
    TrialStatus,
)
from itbench.plan import PlannedTrial
from itbench.ports import PortAllocator, PortBlock
from itbench.provenance import code_dirs, code_hashes
from itbench.store import RunStore
from itbench.tools import Toolbox

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


def utc_now() -> datetime:
    """The current time, in UTC."""
    return datetime.now(UTC)


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON (anything else as its text)."""
    path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")


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
class TrialRunner:
    """Runs the trials of one run in this process.

    The driver of a run (:class:`itbench.runner.Runner`) is one; a worker process that runs
    trials of a run started elsewhere makes its own and attaches it to the run (:meth:`attach`).

    Args:
        bench: The loaded session (plugins, domains, agents, catalog).
        config: The run's options.
        run_dir: Where manifest, results and artifacts go.
        ports: Where each trial's block of ports comes from.
        cancel: Set when the run is interrupted: trials in flight stop and tear down.
    """

    bench: Bench
    config: RunConfig
    run_dir: Path
    ports: PortAllocator = field(default_factory=PortAllocator)
    cancel: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.run_dir = self.run_dir.resolve()
        self.store = RunStore(self.run_dir)
        self.secret = b""
        self.labels: list[Label] = []
        self._code: dict[str, str] = {}
        self._code_dirs: dict[str, Path] = {}
        self._versions: dict[str, str] = {}
        self._context: RunContext | None = None
        self._by_id: dict[str, PlannedTrial] = {}

    @property
    def context(self) -> RunContext:
        """What the run's trials share, fixed when it started (or this worker attached).

        Raises:
            RuntimeError: the run has not started.
        """
        if self._context is None:
            raise RuntimeError("the run has not started: no run context yet")
        return self._context

    def protected_paths(self) -> list[Path]:
        """What no external agent may see: the run directory, catalogs and the code."""
        return [self.run_dir, *self.bench.catalog_paths, *self._code_dirs.values()]

    def code_changed(self, domain: AnyDomain) -> list[str]:
        """Packages that judge ``domain`` (the core and its own) changed since the run started."""
        own = {"itbench", type(domain).__module__.split(".")[0]}
        dirs = {k: v for k, v in self._code_dirs.items() if k in own}
        now = code_hashes(dirs)
        return sorted(k for k in dirs if now.get(k) != self._code.get(k))

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

    def run_trial(self, trial: PlannedTrial, slot: int) -> TrialResult | None:
        """Run one trial through its whole lifecycle; never raises for a trial's failure.

        Returns:
            The result, or ``None`` when the run was cancelled before the trial finished.
        """
        self._by_id[trial.trial_id] = trial
        return TrialRun(self, trial).execute()


class TrialRun:
    """The lifecycle of one trial (one instance per trial, run in a worker thread)."""

    def __init__(self, runner: TrialRunner, trial: PlannedTrial) -> None:
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
        started = utc_now()
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
            write_json(self.trial_dir / "evaluation.json", evaluation.model_dump(mode="json"))
            if self.status not in (TrialStatus.timeout, TrialStatus.unavailable):
                self.status = TrialStatus.passed if evaluation.passed else TrialStatus.failed
            # The verdict stands from here: a harness killed before the line is written
            # leaves it for --resume to record (never a second draw of a judged trial).
            write_json(self.trial_dir / VERDICT, {"status": self.status, "error": self.error})
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
            finished_at=utc_now(),
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
