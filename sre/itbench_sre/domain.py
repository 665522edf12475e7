"""The SRE domain object: spec, environment factory, evaluator and reference agents."""

from __future__ import annotations

from pathlib import Path

from itbench_sre import agents, scoring, topology
from itbench_sre.embedded import sweep
from itbench_sre.environment import SreEnvironment, trial_root
from itbench_sre.spec import SreSpec, SreSubmission

from itbench.domain import Domain, Environment, TrialContext
from itbench.models import Evaluation, ScenarioSpec, Submission, TaskView
from itbench.process import stop_recorded
from itbench.tools import Toolbox


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

    def recover(self, trial_dir: Path) -> None:
        """Stop what a dead harness left of a trial's shop."""
        super().recover(trial_dir)
        stop_recorded(trial_root(trial_dir))
        sweep(trial_root(trial_dir))
