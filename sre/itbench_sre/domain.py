"""The SRE domain object: spec, environment factory, evaluator and reference agents."""

from __future__ import annotations

import contextlib
from pathlib import Path

from itbench_sre import agents, scoring, topology
from itbench_sre.embedded import recorded_shared, sweep
from itbench_sre.environment import SreEnvironment, trial_root
from itbench_sre.spec import SreSpec, SreSubmission

from itbench import (
    PID_DIR,
    Domain,
    Environment,
    Evaluation,
    ScenarioSpec,
    Submission,
    TaskView,
    Toolbox,
    TrialContext,
    stop_group,
    stop_recorded,
)


class SreDomain(Domain):
    """Incidents on a live multi-service shop: detect, localize, diagnose and mitigate."""

    name = "sre"
    spec_model = SreSpec
    submission_model = SreSubmission
    description = "Incidents on a live web shop (services, Redis, PostgreSQL, Prometheus)."
    ports_per_trial = topology.PORTS_PER_ENV

    def create_environment(self, spec: ScenarioSpec, ctx: TrialContext) -> Environment:
        """A shop deployment for one trial."""
        assert isinstance(spec, SreSpec)
        return SreEnvironment(spec, ctx)

    def evaluate(
        self,
        spec: ScenarioSpec,
        env: Environment,
        submission: Submission | None,
        toolbox: Toolbox,
        ctx: TrialContext,
    ) -> Evaluation:
        """Score detection, localization, diagnosis and mitigation."""
        assert isinstance(spec, SreSpec) and isinstance(env, SreEnvironment)
        assert submission is None or isinstance(submission, SreSubmission)
        return scoring.evaluate(spec, env, submission, toolbox)

    def oracle(self, spec: ScenarioSpec, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Ground truth plus the reference fix, through the tools."""
        assert isinstance(spec, SreSpec)
        return agents.oracle(spec, toolbox)

    def baseline(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """The deterministic heuristic agent."""
        return agents.baseline(task, toolbox)

    def probe(self, kind: str, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """``constant``: a fixed answer unseen; ``thrash``: restart and roll back everything."""
        if kind == "constant":
            return agents.probe_constant()
        if kind == "thrash":
            return agents.probe_thrash(toolbox)
        return None

    def recover(self, trial_dir: Path) -> None:
        """Stop what a dead harness left of a trial's shop.

        Only paths of the harness-only trial directory are used: the environment's root and
        the shared data directory its record names (checked to have the shape deploy gives).
        """
        super().recover(trial_dir)
        root = trial_root(trial_dir)
        # supervisord first, or it restarts the programs being stopped.
        with contextlib.suppress(OSError, ValueError):
            stop_group(int((root / PID_DIR / "supervisord.pid").read_text()))
        stop_recorded(root)
        sweep(root, recorded_shared(root))
