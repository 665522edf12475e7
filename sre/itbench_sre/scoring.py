"""Deterministic scoring of SRE trials (formulas in sre/README.md)."""

from __future__ import annotations

import time
from typing import Any

from itbench_sre import topology
from itbench_sre.environment import SreEnvironment
from itbench_sre.spec import GroundTruth, SreSpec, SreSubmission

from itbench import Evaluation, Toolbox

#: Localization is scored on the first k submitted entities for these k.
TOP_K = (1, 3)
#: Propagation-chain edge F1 a diagnosis needs to pass.
PROPAGATION_PASS = 0.5


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def resolve(name: str, truth: GroundTruth) -> str | None:
    """Map a submitted name to a canonical entity (root-cause aliases of the truth included)."""
    raw = name.strip().lower()
    for root, aliases in truth.aliases.items():
        if raw in (a.lower() for a in aliases):
            return root
    return topology.canonical(raw)


def localization(sub: SreSubmission, truth: GroundTruth) -> dict[str, Any]:
    """Precision, recall, F1, top-k hits and hop-distance partial credit of the root causes."""
    ranked: list[str] = []
    for name in sub.root_causes:
        entity = resolve(name, truth)
        if entity is not None and entity not in ranked:
            ranked.append(entity)
    gold = set(truth.root_causes)
    k = max(1, len(gold))
    hit = set(ranked[:k]) & gold
    precision = len(hit) / len(ranked[:k]) if ranked else 0.0
    recall = len(hit) / len(gold) if gold else 0.0
    out: dict[str, Any] = {
        "loc_precision": round(precision, 4),
        "loc_recall": round(recall, 4),
        "loc_f1": round(_f1(precision, recall), 4),
    }
    for top in TOP_K:
        out[f"loc_top{top}"] = bool(gold & set(ranked[:top])) if gold else False
    credits = []
    for g in gold:
        best = 0.0
        for cand in ranked[:k]:
            d = topology.hops(cand, g)
            if d is not None:
                best = max(best, 1.0 / (1 + d))
        credits.append(best)
    out["loc_partial"] = round(sum(credits) / len(credits), 4) if credits else 0.0
    out["loc_pass"] = bool(gold) and recall == 1.0 and precision == 1.0
    return out


def propagation_f1(sub: SreSubmission, truth: GroundTruth) -> float:
    """F1 of submitted propagation edges against the true chain (names canonicalized)."""
    gold = {tuple(e) for e in truth.propagation}
    got = set()
    for a, b in sub.propagation:
        ca, cb = resolve(a, truth), resolve(b, truth)
        if ca and cb:
            got.add((ca, cb))
    if not gold and not got:
        return 1.0
    if not gold or not got:
        return 0.0
    tp = len(gold & got)
    return round(_f1(tp / len(got), tp / len(gold)), 4)


def mitigation(env: SreEnvironment, spec: SreSpec) -> dict[str, Any]:
    """Look for a sustained clean window after the agent's last action.

    A window of ``slo.window`` seconds is clean when no alert fires at any poll in it and the
    workload inside it meets the SLO. Regressions and monitoring tampering fail it outright.
    """
    slo = spec.slo
    out: dict[str, Any] = {}
    intact, tampered = env.monitoring_intact()
    regressions = env.regressions()
    out["monitoring_intact"] = intact
    out["regressions"] = len(regressions)
    out["problems"] = tampered + regressions
    if not intact or regressions:
        out["mitigated"] = False
        return out
    start = time.time()
    deadline = start + slo.settle
    window_start: float | None = None
    last_firing: list[str] = []
    while time.time() < deadline:
        try:
            firing = env.firing()
        except RuntimeError:
            firing = [{"alertname": "PrometheusUnreachable"}]
        now = time.time()
        if firing:
            last_firing = sorted({a.get("alertname", "?") for a in firing})
            window_start = None
        elif window_start is None:
            window_start = now
        elif now - window_start >= slo.window:
            load = env.workload(window_start, now)
            ok = (
                load["requests"] >= 3
                and load["success_ratio"] >= slo.success_ratio
                and load["p95_ms"] is not None
                and load["p95_ms"] <= slo.p95_ms
            )
            out["workload"] = load
            if ok:
                out["mitigated"] = True
                out["clean_window_start"] = window_start
                break
            window_start = now
        time.sleep(0.5)
    else:
        out["mitigated"] = False
        out["still_firing"] = last_firing
    if out.get("mitigated"):
        # Nothing may regress during the window either.
        late = env.regressions()
        intact, tampered = env.monitoring_intact()
        if late or not intact:
            out["mitigated"] = False
            out["problems"] = late + tampered
            out["regressions"] = len(late)
            out["monitoring_intact"] = intact
    return out


def judge_answer(
    truth: GroundTruth, submission: SreSubmission
) -> tuple[dict[str, bool], dict[str, Any]]:
    """Detection, localization and diagnosis of a submission: passes by task and metrics.

    These depend on the answer alone; mitigation (the live shop) is judged apart. Diagnosis
    needs the localization, so an answer that fixes the right things by acting on everything
    still fails a scenario that asks where and what the fault is.
    """
    metrics: dict[str, Any] = {}
    passes: dict[str, bool] = {}
    detected = submission.incident == truth.incident
    metrics["detected"] = detected
    metrics["false_positive"] = submission.incident and not truth.incident
    passes["detection"] = detected
    if truth.incident:
        loc = localization(submission, truth)
        metrics.update(loc)
        passes["localization"] = detected and loc["loc_pass"]
        type_ok = submission.fault_type in truth.fault_types
        prop = propagation_f1(submission, truth)
        metrics["fault_type_correct"] = type_ok
        metrics["propagation_f1"] = prop
        passes["diagnosis"] = passes["localization"] and type_ok and prop >= PROPAGATION_PASS
    else:
        ok = not submission.incident and not submission.root_causes
        passes["localization"] = ok
        passes["diagnosis"] = ok
    return passes, metrics


def evaluate(
    spec: SreSpec, env: SreEnvironment, submission: SreSubmission | None, toolbox: Toolbox
) -> Evaluation:
    """Score one trial."""
    truth = spec.truth()
    calls = len(toolbox.calls)
    actions = len(toolbox.action_calls)
    metrics: dict[str, Any] = {"tool_calls": calls, "actions": actions}
    details: dict[str, Any] = {"truth": truth.model_dump(mode="json")}
    submitted_at = time.time()
    if submission is None:
        metrics.update({"detected": False, "submitted": False})
        for task in spec.task_types:
            metrics[f"{task}_pass"] = False
        return Evaluation(passed=False, metrics=metrics, details=details)
    metrics["submitted"] = True
    passes, answer_metrics = judge_answer(truth, submission)
    metrics.update(answer_metrics)
    ttd = None
    if passes["detection"] and truth.incident and env.observable_at is not None:
        ttd = round(submitted_at - env.observable_at, 3)
    ttm = None
    if "mitigation" in spec.task_types:
        mit = mitigation(env, spec)
        details["mitigation"] = mit
        metrics["mitigated"] = bool(mit.get("mitigated"))
        metrics["regressions"] = mit.get("regressions", 0)
        metrics["monitoring_intact"] = mit.get("monitoring_intact", False)
        passes["mitigation"] = bool(mit.get("mitigated"))
        if mit.get("mitigated") and env.observable_at is not None:
            ttm = round(float(mit["clean_window_start"]) - env.observable_at, 3)
    for task in spec.task_types:
        metrics[f"{task}_pass"] = passes.get(task, False)
    passed = all(passes.get(t, False) for t in spec.task_types)
    details["journal"] = env.journal.entries
    return Evaluation(
        passed=passed, metrics=metrics, details=details, time_to_detect=ttd, time_to_mitigate=ttm
    )
