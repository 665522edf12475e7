"""Test-retest of the diagnosis verdict: one fixed draw, many trials, one fixed answer.

A reliable verdict gives the same answer the same verdict trial after trial. Each trial
measures the fault's spread at handover (``details.spread`` of its evaluation); the fixed
answer is the ground truth's roots and fault type with the *consensus* spread (the edges
measured degrading in more than half of the trials), judged against every trial's own
measurement with the evaluator's own function. ``benchmarks/sre_retest.py`` runs it over the
catalog; ``tests/test_retest.py`` over a sample.
"""

from __future__ import annotations

import collections
import random
import statistics
from pathlib import Path
from typing import Any

import yaml
from itbench_sre import faults
from itbench_sre.scoring import judge_answer
from itbench_sre.spec import SreSpec, SreSubmission

#: Task types kept for a retest (the measurement happens before the agent's turn).
KEPT = ("detection", "localization", "diagnosis")
#: The share of trials that must agree for a verdict to count as reliable (19 of 20).
RELIABLE = 0.95


def fixed_draw(spec: SreSpec, seed: int | str, catalog: Path) -> SreSpec:
    """One draw of ``spec`` fixed as a scenario ``sre/retest-<name>`` written under ``catalog``.

    Its targets, parameters, noise and decoys no longer vary; only what the live shop does
    (timing, the workload, the measured spread) differs between its trials.
    """
    drawn = spec.concrete(random.Random(f"{seed}:{spec.id}"))
    name = spec.id.split("/", 1)[1]
    drawn = drawn.model_copy(
        update={
            "id": f"sre/retest-{name}",
            "task_types": [t for t in spec.task_types if t in KEPT],
        }
    )
    (catalog / f"retest-{name}.yaml").write_text(
        yaml.safe_dump(drawn.model_dump(mode="json", exclude_none=True), sort_keys=False)
    )
    return drawn


def judge(
    spec: SreSpec, records: list[dict[str, Any] | None], ready: list[float] | None = None
) -> dict[str, Any]:
    """The fixed answer's diagnosis verdicts against each trial's measured spread.

    Args:
        spec: The fixed draw.
        records: Each trial's ``details.spread`` (``None``: the trial measured nothing).
        ready: Each trial's seconds from injection to handover, when known.

    Returns:
        Figures: trials, measured, ``agree`` (trials giving the majority verdict), passed,
        empty spreads, trials whose propagation was scored, the consensus spread, the median
        window, and the readiness median and maximum.
    """
    truth = spec.truth()
    measured = [r for r in records if r is not None]
    votes = collections.Counter(tuple(e) for r in measured for e in r["edges"])
    consensus = sorted(e for e, n in votes.items() if n > len(measured) / 2)
    answer = SreSubmission(
        incident=True,
        root_causes=list(truth.root_causes),
        fault_type=truth.fault_types[0],
        propagation=[(a, b) for a, b in consensus],
    )
    scored_mech = any(faults.get(f.mechanism).spread for f in spec.faults)
    verdicts, scored = [], 0
    for r in measured:
        on = scored_mech and bool(r["edges"])
        scored += on
        edges = [(a, b) for a, b in r["edges"]]
        unscored = [(a, b) for a, b in r["unscored"]]
        passes, _ = judge_answer(truth, answer, edges, unscored, on)
        verdicts.append(passes["diagnosis"])
    agree = max(verdicts.count(True), verdicts.count(False)) if verdicts else 0
    ready = ready or []
    return {
        "trials": len(records),
        "measured": len(measured),
        "agree": agree,
        "passed": verdicts.count(True),
        "empty": sum(1 for r in measured if not r["edges"]),
        "scored": scored,
        "consensus": [list(e) for e in consensus],
        "window_s": statistics.median([r["seconds"] for r in measured]) if measured else None,
        "ready_median_s": statistics.median(ready) if ready else None,
        "ready_max_s": max(ready) if ready else None,
    }


def reliable(figures: dict[str, Any]) -> bool:
    """Whether at least :data:`RELIABLE` of the trials give the majority verdict.

    A trial that measured nothing counts as one that disagrees.
    """
    n = figures["trials"]
    return bool(n) and figures["agree"] >= RELIABLE * n
