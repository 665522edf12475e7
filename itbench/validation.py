"""The validation verdict: which agents must pass or fail a scenario, and why one is invalid."""

from __future__ import annotations

from typing import Any

from itbench.builtin.agents import PROBES
from itbench.models import ScenarioSpec, TrialResult, TrialStatus

#: What each agent of ``validate`` must end in; a probe may also time out or be invalid.
_MUST = {
    "oracle": {TrialStatus.passed},
    "noop": {TrialStatus.failed},
    **{p: {TrialStatus.failed, TrialStatus.timeout, TrialStatus.invalid} for p in PROBES},
}


def verdict(
    spec: ScenarioSpec,
    by_agent: dict[str, TrialResult],
    agents: list[str],
    answers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Whether one scenario is valid: the oracle passed it, noop and every probe failed it.

    A scenario tagged ``control`` may expect a plain "no incident" answer, which
    ``probe/constant`` gives; it may pass such a control, and so may ``probe/answer-key``
    (a plain answer is public by nature). A control that asks for evidence fails the
    constant, and then the answer key must fail it too: evidence it passes is the same on
    every trial.

    ``answers`` (:func:`itbench.builtin.agents.answer_spread`) is reported as it is: how
    many distinct answers the scenario's public draws ask for and the commonest's share.
    """
    reasons = []
    constant = by_agent.get("probe/constant")
    plain_control = "control" in spec.tags and (
        "probe/constant" not in agents or (constant is not None and constant.passed)
    )
    for agent in agents:
        result = by_agent.get(agent)
        allowed = set(_MUST[agent])
        if agent == "probe/constant" and "control" in spec.tags:
            allowed.add(TrialStatus.passed)
        if agent == "probe/answer-key" and plain_control:
            allowed.add(TrialStatus.passed)
        if result is None:
            reasons.append(f"{agent} missing")
        elif result.status not in allowed:
            note = f": {result.error}" if result.error else ""
            verb = "passed it" if result.passed else result.status.value
            reasons.append(f"{agent} {verb}{note}")
    statuses = {a: by_agent[a].status.value if a in by_agent else None for a in agents}
    return {
        "id": spec.id,
        "valid": not reasons,
        **{a: statuses[a] for a in ("oracle", "noop")},
        "agents": statuses,
        "reasons": reasons,
        "answers": answers,
    }
