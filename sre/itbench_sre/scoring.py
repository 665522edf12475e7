"""Deterministic scoring of SRE trials (formulas in sre/README.md)."""

from __future__ import annotations

import time
from typing import Any

from itbench_sre import faults, topology
from itbench_sre.environment import SreEnvironment
from itbench_sre.spec import GroundTruth, SreSpec, SreSubmission
from itbench_sre.spread import Spread

from itbench import Evaluation, Toolbox

#: Ranked localization metrics: whether a root cause is among the first k claims.
TOP_K = (1, 3)
#: Propagation edge F1 a diagnosis needs to pass.
PROPAGATION_PASS = 0.7
#: Share of a control's benign claims that must name one of its benign events.
BENIGN_PRECISION = 0.5

#: A claim of a submission: an entity, or the link between two entities (an edge).
Claim = tuple[str, ...]


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def resolve(name: str, truth: GroundTruth) -> str | None:
    """Map a submitted name to a canonical entity (root-cause aliases of the truth included)."""
    raw = name.strip().lower()
    for root, aliases in truth.aliases.items():
        if raw in (a.lower() for a in aliases):
            return root
    if topology.parse_edge(raw) is not None:
        a, b = topology.parse_edge(raw)  # type: ignore[misc]
        return topology.edge_name(a, b)
    return topology.canonical(raw)


def _claim(name: str, truth: GroundTruth) -> Claim:
    """What one submitted name claims: ``("entity", e)`` or ``("link", a, b)`` (sorted).

    An unknown name stays a claim of its own (it counts against precision).
    """
    entity = resolve(name, truth)
    if entity is None:
        return ("unknown", name.strip().lower())
    edge = topology.parse_edge(entity)
    if edge is not None:
        a, b = sorted(edge)
        return ("link", a, b)
    return ("entity", entity)


def _gold(root: str) -> Claim:
    edge = topology.parse_edge(root)
    if edge is not None:
        a, b = sorted(edge)
        return ("link", a, b)
    return ("entity", root)


def _matches(gold: Claim, claims: set[Claim]) -> set[Claim]:
    """The submitted claims that name ``gold`` (empty when it is not named).

    A link is named by the edge in either direction, or by both of its endpoints; never by
    one endpoint alone, nor by ``mesh``.
    """
    if gold in claims:
        return {gold}
    if gold[0] == "link":
        ends: set[Claim] = {("entity", gold[1]), ("entity", gold[2])}
        if ends <= claims:
            return ends
    return set()


def localization(sub: SreSubmission, truth: GroundTruth) -> dict[str, Any]:
    """Every distinct submitted claim is scored: a recall gate, then precision (README).

    ``loc_score`` is 0 unless every root cause is named, else the share of the distinct
    claims that name a root cause (both endpoints naming one edge count as one claim).
    """
    ranked: list[Claim] = []
    for name in sub.root_causes:
        claim = _claim(name, truth)
        if claim not in ranked:
            ranked.append(claim)
    claims = set(ranked)
    golds = [_gold(r) for r in truth.root_causes]
    used: list[set[Claim]] = [_matches(g, claims) for g in golds]
    found = sum(1 for u in used if u)
    # Claims that name a root count once per root, however many names they took.
    spent: set[Claim] = set().union(*used) if used else set()
    distinct = len(claims) - len(spent) + found
    precision = found / distinct if distinct else 0.0
    recall = found / len(golds) if golds else 0.0
    out: dict[str, Any] = {
        "loc_precision": round(precision, 4),
        "loc_recall": round(recall, 4),
        "loc_f1": round(_f1(precision, recall), 4),
        "loc_score": round(precision, 4) if golds and recall == 1.0 else 0.0,
    }
    for top in TOP_K:
        head = set(ranked[:top])
        out[f"loc_top{top}"] = any(_matches(g, head) for g in golds)
    rank = next(
        (
            i + 1
            for i in range(len(ranked))
            if any(_matches(g, set(ranked[: i + 1])) for g in golds)
        ),
        None,
    )
    out["loc_mrr"] = round(1.0 / rank, 4) if rank else 0.0
    credits = []
    for g in golds:
        targets = list(g[1:])
        best = 0.0
        for cand in ranked:
            if cand[0] == "unknown":
                continue
            for c in cand[1:]:
                for t in targets:
                    d = topology.hops(c, t)
                    if d is not None:
                        best = max(best, 1.0 / (1 + d) / (1 if g[0] == "entity" else 2))
        credits.append(1.0 if _matches(g, claims) else best)
    out["loc_partial"] = round(sum(credits) / len(credits), 4) if credits else 0.0
    out["loc_pass"] = bool(golds) and recall == 1.0 and precision == 1.0
    return out


def propagation_f1(
    sub: SreSubmission,
    truth: GroundTruth,
    gold_edges: list[tuple[str, str]] | None = None,
    unscored: list[tuple[str, str]] | None = None,
) -> dict[str, float]:
    """Precision, recall and F1 of the submitted propagation edges (directed, canonical names).

    ``gold_edges`` are the edges the evaluator measured degrading; without them the truth's
    static chain is used. A submitted edge among ``unscored`` (the measurement could not tell)
    counts neither for nor against the answer.
    """
    gold = {tuple(e) for e in (truth.propagation if gold_edges is None else gold_edges)}
    neutral = {tuple(e) for e in (unscored or [])} - gold
    got = set()
    for a, b in sub.propagation:
        ca, cb = resolve(a, truth), resolve(b, truth)
        got.add((ca or a.strip().lower(), cb or b.strip().lower()))
    got -= neutral
    if not gold and not got:
        return {"prop_precision": 1.0, "prop_recall": 1.0, "propagation_f1": 1.0}
    tp = len(gold & got)
    p = tp / len(got) if got else 0.0
    r = tp / len(gold) if gold else 0.0
    return {
        "prop_precision": round(p, 4),
        "prop_recall": round(r, 4),
        "propagation_f1": round(_f1(p, r), 4),
    }


def mitigation(env: SreEnvironment, spec: SreSpec) -> dict[str, Any]:
    """Look for a sustained clean window after the agent's last action.

    A fault made by a configuration change must have been turned back first (its keys no
    longer hold the fault's values, :mod:`itbench_sre.cause`). A window of ``slo.window`` seconds is clean when no alert fires at any poll in it and the
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
    # A restart may hide a fault for a while; its cause must be gone too.
    left = env.causes_left()
    if left:
        out["mitigated"] = False
        out["causes_left"] = left
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
    truth: GroundTruth,
    submission: SreSubmission,
    gold_edges: list[tuple[str, str]] | None = None,
    unscored: list[tuple[str, str]] | None = None,
    score_propagation: bool = True,
) -> tuple[dict[str, bool], dict[str, Any]]:
    """Detection, localization and diagnosis of a submission: passes by task and metrics.

    These depend on the answer alone; mitigation (the live shop) is judged apart. Diagnosis
    needs the localization, so an answer that fixes the right things by acting on everything
    still fails a scenario that asks where and what the fault is. The propagation counts
    towards the diagnosis only when ``score_propagation`` (a spread that was measured).
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
        prop = propagation_f1(submission, truth, gold_edges, unscored)
        metrics["fault_type_correct"] = type_ok
        metrics.update(prop)
        metrics["propagation_scored"] = score_propagation
        spread_ok = not score_propagation or prop["propagation_f1"] >= PROPAGATION_PASS
        passes["diagnosis"] = passes["localization"] and type_ok and spread_ok
    else:
        ok = not submission.incident and not submission.root_causes
        explained = benign(submission, truth)
        metrics.update(explained)
        passes["localization"] = ok and explained["benign_pass"]
        passes["diagnosis"] = passes["localization"]
    return passes, metrics


def benign(sub: SreSubmission, truth: GroundTruth) -> dict[str, Any]:
    """How well a "no incident" answer explains a control: its benign events named.

    Scored like a localization against the control's benign events: every event must be
    named (recall 1) and at least :data:`BENIGN_PRECISION` of the distinct claims must name
    one. A control always has something to explain, so a constant answer fails it.
    """
    events = GroundTruth(incident=True, root_causes=list(truth.benign))
    loc = localization(sub.model_copy(update={"root_causes": list(sub.benign)}), events)
    return {
        "benign_precision": loc["loc_precision"],
        "benign_recall": loc["loc_recall"],
        "benign_pass": bool(truth.benign)
        and loc["loc_recall"] == 1.0
        and loc["loc_precision"] >= BENIGN_PRECISION,
    }


def spread_scored(spec: SreSpec, measured: Spread | None) -> bool:
    """Whether a trial's propagation is scored.

    Only a spread that was measured (something degraded) of a problem with a mechanism whose
    spread is reliably measurable (``Mechanism.spread``) is scored.
    """
    if measured is None or not measured.edges:
        return False
    return any(faults.get(f.mechanism).spread for f in spec.faults)


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
    measured = env.spread
    scored = spread_scored(spec, measured)
    if measured is not None:
        details["spread"] = measured.record()
    passes, answer_metrics = judge_answer(
        truth,
        submission,
        measured.edges if measured is not None else None,
        measured.unscored if measured is not None else None,
        scored,
    )
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
