"""The FinOps domain object registered with itbench."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from itbench import (
    Domain,
    Evaluation,
    IntegrityError,
    TaskView,
    Toolbox,
    TrialContext,
    stop_recorded,
)
from itbench_finops.environment import FinOpsEnvironment
from itbench_finops.families import TASK_TYPES
from itbench_finops.spec import FinOpsSpec, FinOpsSubmission


class FinOpsDomain(Domain[FinOpsSpec, FinOpsSubmission, FinOpsEnvironment]):
    """Cloud-cost incidents in an AWS account served by a local moto server."""

    name = "finops"
    spec_model = FinOpsSpec
    submission_model = FinOpsSubmission
    description = "Cloud cost (FinOps) incidents in a mocked AWS account with FOCUS billing."
    ports_per_trial = 1
    task_types = TASK_TYPES
    #: One moto server per trial, seeded with the organization's accounts.
    resources: ClassVar[dict[str, float]] = {"num_cpus": 1.0, "memory": 768 * 2**20}

    def system_prompt(self) -> str:
        """What a model agent is told about this domain's work (``prompt.md`` of the package)."""
        return Path(__file__).with_name("prompt.md").read_text(encoding="utf-8")

    def draw(self, spec: FinOpsSpec, ctx: TrialContext) -> tuple[FinOpsSpec, dict[str, Any]]:
        """The trial's concrete scenario: its settings and each candidate's form, drawn.

        Seeded by the run's secret (:mod:`itbench_finops.draw`): which resources are waste and
        which look-alikes, the conventions' values and the handbook's text change per trial.
        """
        from itbench_finops.draw import draw

        return draw(spec, ctx)

    def create_environment(self, spec: FinOpsSpec, ctx: TrialContext) -> FinOpsEnvironment:
        """A moto-backed environment for ``spec``."""
        return FinOpsEnvironment(spec, ctx)

    def evaluate(
        self,
        spec: FinOpsSpec,
        env: FinOpsEnvironment,
        submission: FinOpsSubmission | None,
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
        from itbench_finops.scoring import evaluate, start_of
        from itbench_finops.trial import Trial

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
            seeded=env.seeded,
        )
        result = evaluate(trial)
        start = env.agent_started_at or toolbox.first_call_at
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

    def oracle(self, spec: FinOpsSpec, task: TaskView, toolbox: Toolbox) -> FinOpsSubmission:
        """The reference solution: reads ground truth, acts through the tools."""
        from itbench_finops.oracle import solve

        return solve(spec, task, toolbox)

    def baseline(self, task: TaskView, toolbox: Toolbox) -> FinOpsSubmission | None:
        """Rule-based heuristics (utilization thresholds, attachment state)."""
        from itbench_finops.baseline import solve

        return solve(task, toolbox)

    def probe(self, kind: str, task: TaskView, toolbox: Toolbox) -> FinOpsSubmission | None:
        """``constant``: a fixed report without looking; ``thrash``: stop every instance first."""
        from itbench_finops.probes import run

        return run(kind, task, toolbox)

    def reference_sections(self) -> dict[str, str]:
        """The families, resource kinds, price table and closed value sets, for authors."""
        from itbench_finops.reference import sections

        return sections()

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
