"""The CISO domain object registered with itbench."""

from __future__ import annotations

from itbench import (
    Domain,
    Environment,
    Evaluation,
    InfrastructureError,
    ScenarioSpec,
    Submission,
    TaskView,
    Toolbox,
    TrialContext,
)
from itbench_ciso.spec import CisoSpec, CisoSubmission


class CisoDomain(Domain):
    """Compliance as code: evidence collection and Rego policies judged on hidden variants."""

    name = "ciso"
    spec_model = CisoSpec
    submission_model = CisoSubmission
    description = (
        "Compliance requirements turned into evidence collection (Ansible, boto3) and Rego "
        "policies, judged on hidden compliant and non-compliant systems."
    )
    ports_per_trial = 2

    def create_environment(self, spec: ScenarioSpec, ctx: TrialContext) -> Environment:
        """The engine and the family's systems for ``spec``."""
        from itbench_ciso.environment import CisoEnvironment

        assert isinstance(spec, CisoSpec)
        return CisoEnvironment(spec, ctx)

    def evaluate(
        self,
        spec: ScenarioSpec,
        env: Environment,
        submission: Submission | None,
        toolbox: Toolbox,
        ctx: TrialContext,
    ) -> Evaluation:
        """Run the artifacts on the hidden variants and score them."""
        from itbench_ciso.environment import CisoEnvironment

        assert isinstance(spec, CisoSpec) and isinstance(env, CisoEnvironment)
        if env.runtime is None:
            raise InfrastructureError("environment not set up")
        if submission is not None and not isinstance(submission, CisoSubmission):
            submission = CisoSubmission.model_validate(submission.model_dump())
        try:
            result = env.runtime.judge(submission)
        finally:
            # The ground truth reaches the disk only once no program of the agent runs.
            env.runtime.save_hidden()
        result.metrics["tool_calls"] = len(toolbox.calls)
        return result

    def oracle(self, spec: ScenarioSpec, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """The reference artifacts of the scenario's check, checked once through the tools."""
        from itbench_ciso.oracle import solve

        assert isinstance(spec, CisoSpec)
        return solve(spec, task, toolbox)

    def baseline(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Templates keyed on the requirement text."""
        from itbench_ciso.baseline import solve

        return solve(task, toolbox)

    def probe(self, kind: str, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """``constant``: fixed artifacts per family; ``thrash``: flag every pod, host, account."""
        from itbench_ciso import probes

        if kind == "constant":
            return probes.constant(task)
        if kind == "thrash":
            return probes.thrash(task, toolbox)
        return None
