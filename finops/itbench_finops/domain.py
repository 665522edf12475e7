"""The FinOps domain object registered with itbench."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

from itbench import (
    Domain,
    Environment,
    Evaluation,
    IntegrityError,
    ScenarioSpec,
    Submission,
    TaskView,
    Toolbox,
    TrialContext,
    stop_recorded,
)
from itbench_finops.spec import FinOpsSpec, FinOpsSubmission


class FinOpsDomain(Domain):
    """Cloud-cost incidents in an AWS account served by a local moto server."""

    name = "finops"
    spec_model = FinOpsSpec
    submission_model = FinOpsSubmission
    description = "Cloud cost (FinOps) incidents in a mocked AWS account with FOCUS billing."
    ports_per_trial = 1

    def create_environment(self, spec: ScenarioSpec, ctx: TrialContext) -> Environment:
        """A moto-backed environment for ``spec``."""
        from itbench_finops.environment import FinOpsEnvironment

        assert isinstance(spec, FinOpsSpec)
        return FinOpsEnvironment(spec, ctx)

    def task_view(
        self,
        spec: ScenarioSpec,
        env: Environment,
        ctx: TrialContext,
        toolbox: Toolbox,
        deadline: Any,
    ) -> TaskView:
        """The default whitelisted view; also remembers when the agent's clock started.

        The runner builds the view right before it starts the agent, so the time of this call
        is the start of time to detect and time to mitigate.
        """
        view = super().task_view(spec, env, ctx, toolbox, deadline)
        env.agent_started = time.time()  # type: ignore[attr-defined]
        return view

    def evaluate(
        self,
        spec: ScenarioSpec,
        env: Environment,
        submission: Submission | None,
        toolbox: Toolbox,
        ctx: TrialContext,
    ) -> Evaluation:
        """Score from the account's final state, the report and the tool journal.

        A final state that a live, authentic endpoint cannot show (read twice) is one the
        agent made: the trial fails with the reason as harm.

        Raises:
            IntegrityError: the endpoint died, stopped or was replaced: what decides the score
                is lost, so the trial is invalid.
        """
        from itbench_finops.environment import FinOpsEnvironment
        from itbench_finops.scoring import Trial, evaluate, start_of

        assert isinstance(spec, FinOpsSpec) and isinstance(env, FinOpsEnvironment)
        if submission is not None and not isinstance(submission, FinOpsSubmission):
            submission = FinOpsSubmission.model_validate(submission.model_dump())
        # The runner checks the harness first; checking here as well keeps a lost endpoint an
        # invalid trial (never an error) for every caller of evaluate.
        problems = env.harness_problems()
        if problems:
            raise IntegrityError("; ".join(problems))
        final = None
        failure = ""
        for _ in range(2):
            try:
                final = env.read_state()
                break
            except Exception as exc:
                problems = env.harness_problems()
                if problems:
                    raise IntegrityError(
                        f"the account's final state could not be read: {'; '.join(problems)}"
                    ) from exc
                failure = f"{type(exc).__name__}: {str(exc)[:500]}"
        if final is None:
            return unreadable(submission, failure, toolbox)
        trial = Trial(
            spec=spec,
            prices=env.prices,
            ids=env.seeded.ids,
            initial=env.initial,
            final=final,
            rows=env.rows,
            period_start=start_of(env.period_start),
            submission=submission,
        )
        result = evaluate(trial)
        start = env.agent_started or toolbox.first_call_at
        actions = [c for c in toolbox.action_calls if c.ok]
        if result.passed and start is not None and toolbox.calls:
            stamps = [
                datetime.fromisoformat(c.started_at).timestamp() + c.elapsed for c in toolbox.calls
            ]
            if actions:
                first_action = datetime.fromisoformat(actions[0].started_at).timestamp()
                last_action = (
                    datetime.fromisoformat(actions[-1].started_at).timestamp() + actions[-1].elapsed
                )
                result.time_to_detect = round(max(0.0, first_action - start), 3)
                result.time_to_mitigate = round(max(0.0, last_action - start), 3)
            else:
                result.time_to_detect = round(max(0.0, max(stamps) - start), 3)
        result.metrics["tool_calls"] = len(toolbox.calls)
        result.metrics["action_calls"] = len(actions)
        return result

    def oracle(self, spec: ScenarioSpec, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """The reference solution: reads ground truth, acts through the tools."""
        from itbench_finops.oracle import solve

        assert isinstance(spec, FinOpsSpec)
        return solve(spec, task, toolbox)

    def baseline(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Rule-based heuristics (utilization thresholds, attachment state)."""
        from itbench_finops.baseline import solve

        return solve(task, toolbox)

    def probe(self, kind: str, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """``constant``: a fixed report without looking; ``thrash``: stop every instance first."""
        from itbench_finops.probes import run

        return run(kind, task, toolbox)

    def recover(self, trial_dir: Path) -> None:
        """Stop an endpoint a killed harness left behind."""
        stop_recorded(trial_dir)


def unreadable(submission: FinOpsSubmission | None, failure: str, toolbox: Toolbox) -> Evaluation:
    """The evaluation of a trial whose final state the endpoint could not show."""
    harm = f"the account's final state could not be read: {failure}"
    return Evaluation(
        passed=False,
        metrics={
            "state_readable": False,
            "submitted": submission is not None,
            "harm_count": 1,
            "harm_free": False,
            "tool_calls": len(toolbox.calls),
            "action_calls": len([c for c in toolbox.action_calls if c.ok]),
        },
        details={"harm": [harm]},
    )
