"""Confusion matrices and metrics of a judged policy over hidden variants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from itbench import Evaluation
from itbench_ciso.checks.base import Variant


@dataclass
class Confusion:
    """Counts over judged units (a resource of a variant, or a whole host/account)."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    def add(self, truth: bool, predicted: bool) -> None:
        """Count one unit (``truth``/``predicted``: violating)."""
        if truth and predicted:
            self.tp += 1
        elif truth:
            self.fn += 1
        elif predicted:
            self.fp += 1
        else:
            self.tn += 1

    @property
    def precision(self) -> float:
        """TP / (TP + FP); 0 when nothing was flagged."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        """TP / (TP + FN); 1 when nothing violates."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    def metrics(self) -> dict[str, float | int]:
        """The counts, precision and recall."""
        return {
            "tp": self.tp,
            "fp": self.fp,
            "tn": self.tn,
            "fn": self.fn,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
        }


@dataclass
class Judgement:
    """The policy's answer on one hidden variant."""

    variant: str
    expected: list[str]
    flagged: list[str]
    correct: bool
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def judge_resources(
    variants: list[Variant], flagged: list[set[str] | None], errors: list[str | None]
) -> tuple[Confusion, list[Judgement]]:
    """Score per-resource answers (Kubernetes): a variant is correct when the sets are equal.

    Args:
        variants: The hidden variants.
        flagged: Per variant, the resource ids the policy returned (``None``: no answer).
        errors: Per variant, the engine's evaluation error.
    """
    conf = Confusion()
    out = []
    for v, got, err in zip(variants, flagged, errors, strict=True):
        got_set = got or set()
        for unit in v.units:
            conf.add(unit in v.violating, unit in got_set)
        conf.fp += len(got_set - set(v.units))  # ids that exist nowhere are false alarms
        correct = got is not None and err is None and got_set == v.violating
        out.append(
            Judgement(v.name, sorted(v.violating), sorted(got_set), correct, err, list(v.notes))
        )
    return conf, out


def judge_verdicts(
    variants: list[Variant], verdicts: list[bool | None], errors: list[str | None]
) -> tuple[Confusion, list[Judgement]]:
    """Score whole-system verdicts (hosts, accounts): ``True`` means non-compliant.

    A variant without a verdict (no evidence, evaluation error) counts as wrong both ways:
    as a miss when it violates and as a false alarm when it complies.
    """
    conf = Confusion()
    out = []
    for v, verdict, err in zip(variants, verdicts, errors, strict=True):
        truth = not v.compliant
        predicted = (not truth) if verdict is None else verdict
        conf.add(truth, predicted)
        correct = verdict is not None and verdict == truth and err is None
        out.append(
            Judgement(
                v.name,
                [v.name] if truth else [],
                [v.name] if verdict else [],
                correct,
                err,
                list(v.notes),
            )
        )
    return conf, out


def nonempty(value: Any) -> bool:
    """Whether a ``violations`` value reports anything (a non-empty set/list/object or true)."""
    if isinstance(value, (list, dict, str)):
        return len(value) > 0
    return value is True


def evaluation(
    conf: Confusion,
    judgements: list[Judgement],
    *,
    compiles: bool,
    engine: str,
    seconds: float,
    extra: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
    gate: bool = True,
) -> Evaluation:
    """Build the trial's evaluation: passed only if every hidden variant is judged correctly.

    Args:
        conf: The confusion matrix.
        judgements: Per-variant outcome.
        compiles: Whether the policy compiled.
        engine: The policy engine's name.
        seconds: Time spent judging.
        extra: More metrics.
        details: More details.
        gate: Another condition the pass needs (for example other policies unchanged).
    """
    correct = sum(j.correct for j in judgements)
    passed = compiles and bool(judgements) and correct == len(judgements) and gate
    metrics: dict[str, Any] = {
        "policy_compiles": compiles,
        "variants": len(judgements),
        "variants_correct": correct,
        **conf.metrics(),
        "judge_seconds": round(seconds, 3),
    }
    metrics.update(extra or {})
    return Evaluation(
        passed=passed,
        metrics=metrics,
        details={
            "engine": engine,
            "variants": [j.__dict__ for j in judgements],
            **(details or {}),
        },
    )
