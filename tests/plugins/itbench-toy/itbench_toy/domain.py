"""The toy domain: a key-value "registry" in memory where a fault corrupts one key."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel

from itbench.domain import Domain, Environment, InfrastructureError, TrialContext
from itbench.models import Evaluation, ScenarioSpec, Submission, TaskView
from itbench.tools import Tool, Toolbox, ToolError


class ToyTruth(BaseModel):
    """Ground truth: which key is wrong and what it must be."""

    key: str | None
    expected: int


class ToySpec(ScenarioSpec):
    """A toy scenario: initial values and an optional corruption."""

    domain: Literal["toy"]
    values: dict[str, int]
    ground_truth: ToyTruth


class ToySubmission(Submission):
    """The key the agent blames (``None`` with ``no_incident`` for a healthy registry)."""

    key: str | None = None
    no_incident: bool = False


class ToyEnvironment(Environment):
    """The in-memory registry of one trial."""

    def __init__(self, spec: ToySpec, ctx: TrialContext) -> None:
        self.spec = spec
        self.ctx = ctx
        self.values: dict[str, int] = {}
        self.torn_down = 0

    def setup(self) -> None:
        """Load the initial values; options can make this fail or slow for tests."""
        if self.ctx.options.get("fail_setup"):
            raise InfrastructureError("setup failed on purpose (option fail_setup)")
        time.sleep(float(self.ctx.options.get("setup_delay", 0)))
        self.values = dict(self.spec.values)

    def inject(self) -> None:
        """Corrupt the ground-truth key."""
        gt = self.spec.ground_truth
        if gt.key is not None:
            self.values[gt.key] = gt.expected + 1000

    def tools(self) -> list[Tool]:
        """Read and write tools."""

        def read(key: str) -> int:
            """Read the value of a key."""
            if key not in self.values:
                raise ToolError(f"no key {key!r}")
            return self.values[key]

        def keys() -> list[str]:
            """List the keys."""
            return sorted(self.values)

        def write(key: str, value: int) -> None:
            """Set a key to a value."""
            if key not in self.values:
                raise ToolError(f"no key {key!r}")
            self.values[key] = value

        return [
            Tool.from_function(keys),
            Tool.from_function(read),
            Tool.from_function(write, action=True),
        ]

    def context(self) -> dict[str, object]:
        """Public facts: values are correct when below 1000."""
        return {"rule": "every value must be below 1000"}

    def teardown(self) -> None:
        """Forget everything."""
        self.torn_down += 1
        marker = self.ctx.trial_dir / "teardown.count"
        marker.write_text(str(self.torn_down))
        self.values.clear()


class ToyDomain(Domain):
    """Find the corrupted key and repair it."""

    name = "toy"
    spec_model = ToySpec
    submission_model = ToySubmission
    description = "In-memory registry with one corrupted key."
    ports_per_trial = 2

    def create_environment(self, spec: ScenarioSpec, ctx: TrialContext) -> Environment:
        """Build the registry."""
        assert isinstance(spec, ToySpec)
        return ToyEnvironment(spec, ctx)

    def evaluate(
        self,
        spec: ScenarioSpec,
        env: Environment,
        submission: Submission | None,
        toolbox: Toolbox,
        ctx: TrialContext,
    ) -> Evaluation:
        """Pass when the blame is right and every value is valid again."""
        assert isinstance(spec, ToySpec) and isinstance(env, ToyEnvironment)
        gt = spec.ground_truth
        if submission is None:
            return Evaluation(passed=False, metrics={"localized": False, "repaired": False})
        assert isinstance(submission, ToySubmission)
        if gt.key is None:
            ok = submission.no_incident and submission.key is None
            return Evaluation(passed=ok, metrics={"localized": ok, "repaired": ok})
        localized = submission.key == gt.key
        repaired = all(v < 1000 for v in env.values.values())
        return Evaluation(
            passed=localized and repaired,
            metrics={
                "localized": localized,
                "repaired": repaired,
                "actions": len(toolbox.action_calls),
            },
        )

    def oracle(self, spec: ScenarioSpec, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Repair from ground truth through the tools."""
        assert isinstance(spec, ToySpec)
        gt = spec.ground_truth
        if gt.key is None:
            return ToySubmission(no_incident=True)
        toolbox.call("write", key=gt.key, value=gt.expected)
        return ToySubmission(key=gt.key)

    def baseline(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Blame the first key over the limit and reset it to zero."""
        for key in toolbox.call("keys"):
            if toolbox.call("read", key=key) >= 1000:
                toolbox.call("write", key=key, value=0)
                return ToySubmission(key=key)
        return ToySubmission(no_incident=True)
