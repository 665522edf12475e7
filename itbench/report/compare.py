"""Paired comparison of two runs on the problems they share (``itbench compare``).

For each common problem (a scenario with at least one scored trial in both runs) the pass rate
of each run, and their difference ``B - A``. A problem *passes* in a run when more than half of
its scored trials passed; it *flipped* when it passes in one run and not in the other. Tests:

- exact McNemar (:func:`itbench.report.stats.mcnemar_exact`) on the pass verdicts of the
  common problems: ``b`` problems pass in A only, ``c`` in B only;
- a paired sign-flip permutation test (:func:`itbench.report.stats.paired_permutation`) on the
  per-problem differences of pass rates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from itbench.report.stats import mcnemar_exact, paired_permutation


@dataclass
class Comparison:
    """The outcome of comparing run A with run B."""

    problems: pd.DataFrame
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)

    @property
    def flipped_to_pass(self) -> list[str]:
        """Problems that fail in A and pass in B."""
        p = self.problems
        return sorted(p.loc[~p["pass_a"] & p["pass_b"], "scenario_id"])

    @property
    def flipped_to_fail(self) -> list[str]:
        """Problems that pass in A and fail in B."""
        p = self.problems
        return sorted(p.loc[p["pass_a"] & ~p["pass_b"], "scenario_id"])

    def summary(self) -> dict[str, Any]:
        """Counts, mean difference and the two p-values."""
        p = self.problems
        b, c = len(self.flipped_to_fail), len(self.flipped_to_pass)
        return {
            "common_problems": len(p),
            "only_in_a": len(self.only_a),
            "only_in_b": len(self.only_b),
            "pass_rate_a": float(p["rate_a"].mean()) if len(p) else None,
            "pass_rate_b": float(p["rate_b"].mean()) if len(p) else None,
            "mean_difference": float(p["difference"].mean()) if len(p) else None,
            "flipped_to_pass": c,
            "flipped_to_fail": b,
            "mcnemar_p": mcnemar_exact(b, c),
            "permutation_p": paired_permutation(p["difference"].to_numpy()) if len(p) else 1.0,
        }


def _per_problem(trials: pd.DataFrame) -> pd.DataFrame:
    scored = trials[trials["scored"]]
    if scored.empty:
        return pd.DataFrame(columns=["scenario_id", "passed", "scored", "rate"])
    per = scored.groupby("scenario_id")["passed"].agg(passed="sum", scored="size").reset_index()
    per["rate"] = per["passed"] / per["scored"]
    return per


def compare(a: pd.DataFrame, b: pd.DataFrame) -> Comparison:
    """Compare two ``trials`` frames (see :func:`itbench.report.frames`) problem by problem."""
    pa, pb = _per_problem(a), _per_problem(b)
    merged = pa.merge(pb, on="scenario_id", suffixes=("_a", "_b"))
    merged["difference"] = merged["rate_b"] - merged["rate_a"]
    merged["pass_a"] = merged["rate_a"] > 0.5
    merged["pass_b"] = merged["rate_b"] > 0.5
    merged = merged.sort_values("scenario_id").reset_index(drop=True)
    only_a = sorted(set(pa["scenario_id"]) - set(pb["scenario_id"]))
    only_b = sorted(set(pb["scenario_id"]) - set(pa["scenario_id"]))
    return Comparison(merged, only_a, only_b)
