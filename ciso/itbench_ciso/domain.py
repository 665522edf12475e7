"""The CISO domain object registered with itbench."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from itbench import (
    Deadline,
    Domain,
    Evaluation,
    InfrastructureError,
    TaskView,
    Toolbox,
    TrialContext,
)
from itbench_ciso.environment import CisoEnvironment
from itbench_ciso.library_docs import library_sections
from itbench_ciso.spec import CisoSpec, CisoSubmission


class CisoDomain(Domain[CisoSpec, CisoSubmission, CisoEnvironment]):
    """Compliance as code: evidence collection and Rego policies judged on hidden variants."""

    name = "ciso"
    spec_model = CisoSpec
    submission_model = CisoSubmission
    description = (
        "Compliance requirements turned into evidence collection (Ansible, boto3) and Rego "
        "policies, judged on hidden compliant and non-compliant systems."
    )
    ports_per_trial = 2
    #: A moto server for cloud requirements, the evidence playbook and the Rego engine.
    resources: ClassVar[dict[str, float]] = {"num_cpus": 1.0, "memory": 768 * 2**20}
    task_types: ClassVar[tuple[str, ...]] = (
        "policy-generation",
        "evidence-collection",
        "policy-update",
    )

    def system_prompt(self) -> str:
        """What a model agent is told about this domain's work (``prompt.md`` of the package)."""
        return Path(__file__).with_name("prompt.md").read_text(encoding="utf-8")

    def create_environment(self, spec: CisoSpec, ctx: TrialContext) -> CisoEnvironment:
        """The engine and the family's systems for ``spec``."""
        return CisoEnvironment(spec, ctx)

    def evaluate(
        self,
        spec: CisoSpec,
        env: CisoEnvironment,
        submission: CisoSubmission | None,
        toolbox: Toolbox,
        ctx: TrialContext,
    ) -> Evaluation:
        """Run the artifacts on the hidden variants and score them."""
        if env.runtime is None:
            raise InfrastructureError("environment not set up")
        try:
            result = env.runtime.judge(submission)
        finally:
            # The ground truth reaches the disk only once no program of the agent runs.
            env.runtime.save_hidden()
        result.metrics["tool_calls"] = len(toolbox.calls)
        return result

    def task_view(
        self,
        spec: CisoSpec,
        env: CisoEnvironment,
        ctx: TrialContext,
        toolbox: Toolbox,
        deadline: Deadline,
    ) -> TaskView:
        """The core's task view, its goal stating the requirement as this trial words it."""
        view = super().task_view(spec, env, ctx, toolbox, deadline)
        stated = str(env.context().get("requirement") or spec.requirement)
        if stated != spec.requirement:
            view.goal = view.goal.replace(
                f"Requirement: {spec.requirement}", f"Requirement: {stated}", 1
            )
        return view

    def oracle(self, spec: CisoSpec, task: TaskView, toolbox: Toolbox) -> CisoSubmission | None:
        """The reference artifacts of the scenario's check, checked once through the tools."""
        from itbench_ciso.oracle import solve

        return solve(spec, task, toolbox)

    def baseline(self, task: TaskView, toolbox: Toolbox) -> CisoSubmission | None:
        """Templates keyed on the requirement text."""
        from itbench_ciso.baseline import solve

        return solve(task, toolbox)

    def probe(self, kind: str, task: TaskView, toolbox: Toolbox) -> CisoSubmission | None:
        """``constant``: fixed artifacts per family; ``thrash``: flag every pod, host, account."""
        from itbench_ciso import probes

        if kind == "constant":
            return probes.constant(task)
        if kind == "thrash":
            return probes.thrash(task, toolbox)
        return None

    def answer_key(
        self, drawn: CisoSpec, task: TaskView, toolbox: Toolbox
    ) -> CisoSubmission | None:
        """The reference artifacts with the catalog's defaults.

        No waiver, no organization's value: nothing read from the trial's requirement or
        systems.
        """
        from itbench_ciso.oracle import reference

        return reference(drawn)

    def reference_sections(self) -> dict[str, str]:
        """The scenario families with what each submits, and the check library."""
        return library_sections()
