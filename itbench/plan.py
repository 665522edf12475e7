"""The trial plan: which (scenario, agent, index) trials a run holds, with their ids and seeds."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from itbench.errors import UsageError
from itbench.models import RunConfig, ScenarioSpec

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class PlannedTrial:
    """One (scenario, agent, index) to run, with its seed."""

    trial_id: str
    scenario: ScenarioSpec
    agent: str
    index: int
    seed: int


def trial_seed(run_seed: int, scenario_id: str, agent: str, index: int) -> int:
    """A stable 31-bit seed for one trial, derived from the run seed (public: in the manifest)."""
    digest = hashlib.sha256(f"{run_seed}:{scenario_id}:{agent}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def trial_id_prefix(scenario_id: str) -> str:
    """The scenario part of a trial id."""
    return _SAFE.sub("_", scenario_id.replace("/", "."))


def trial_id(scenario_id: str, agent: str, index: int) -> str:
    """Stable trial id ``<scenario>__<agent>__<index>``: harness-side records only.

    What an agent may see is the trial's random handle, never this id.
    """
    return f"{trial_id_prefix(scenario_id)}__{_SAFE.sub('_', agent)}__{index}"


def plan_trials(specs: list[ScenarioSpec], config: RunConfig) -> list[PlannedTrial]:
    """Every trial of a run, in a stable order (scenario, then index).

    Raises:
        UsageError: two scenarios would share a trial id (and so a record in the run).
    """
    trials = [
        PlannedTrial(
            trial_id(spec.id, config.agent, i),
            spec,
            config.agent,
            i,
            trial_seed(config.seed, spec.id, config.agent, i),
        )
        for spec in specs
        for i in range(config.trials)
    ]
    seen: dict[str, str] = {}
    for t in trials:
        other = seen.setdefault(t.trial_id, t.scenario.id)
        if other != t.scenario.id:
            raise UsageError(
                f"scenarios {other!r} and {t.scenario.id!r} share trial id {t.trial_id!r}"
            )
    return trials
