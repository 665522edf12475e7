"""Deterministic scoring from the account's final state and the report.

Every family counts what it asks for: the waste items fixed (:mod:`itbench_finops.fixes`),
the diagnosis, the budget policy, the allocation or the commitment; any harm
(:mod:`itbench_finops.harm`) fails the trial. Dollars (savings against the optimum) are
reported beside, never instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from itbench import Evaluation
from itbench_finops.costs import monthly_cost
from itbench_finops.fixes import outcomes, usage
from itbench_finops.harm import harm, new_resources, state_problems
from itbench_finops.optimum import (
    best_commitment,
    commitment_savings,
    hourly_compute,
    needed_capacity,
)
from itbench_finops.server import MANAGEMENT_ACCOUNT
from itbench_finops.spec import AutoScalingGroup
from itbench_finops.timeline import start_date as timeline_start
from itbench_finops.trial import Trial

#: Tag that names a resource's owner in the cost-allocation family.
OWNER_TAG = "team"
#: The allocation key of costs no team owns, when the conventions keep them apart.
SHARED = "shared"
#: The billing export's ResourceType of each kind of scenario resource.
RESOURCE_TYPES = {
    "instance": "Instance",
    "volume": "Volume",
    "snapshot": "Snapshot",
    "address": "ElasticIP",
    "load_balancer": "LoadBalancer",
    "database": "DBInstance",
    "bucket": "Bucket",
    "nat_gateway": "NatGateway",
}
#: Other spellings accepted for a ResourceType (normalized: lower case, letters and digits).
TYPE_ALIASES = {
    "Instance": ("ec2instance",),
    "Volume": ("ebsvolume",),
    "Snapshot": ("ebssnapshot",),
    "ElasticIP": ("eip", "address"),
    "LoadBalancer": ("elb", "alb"),
    "DBInstance": ("database", "rdsinstance"),
    "Bucket": ("s3bucket",),
    "NatGateway": ("nat", "natgw"),
}
#: Largest relative error of an allocated amount that still counts as right.
ALLOCATION_TOLERANCE = 0.01
#: Most entries of one list shown in a trial's details (the counts stay whole).
DETAIL_LIMIT = 50
#: Days a reported start date may be off.
START_TOLERANCE_DAYS = 1


def savings(t: Trial) -> tuple[float, float]:
    """Monthly savings achieved (whole account) and the optimal monthly savings."""
    priced = usage(t, t.initial)
    before = sum(monthly_cost(i, t.prices, priced) for i in t.initial.values())
    return before - final_cost(t), optimal_savings(t)


def final_cost(t: Trial) -> float:
    """Monthly cost of the final state; an unpriceable resource costs at least what it did.

    Nothing is saved by putting a resource in a state the price table cannot price.
    """
    problems = state_problems(t)
    now, then = usage(t, t.final), usage(t, t.initial)
    total = 0.0
    for item in t.final.values():
        cost = monthly_cost(item, t.prices, now)
        before = t.initial.get(item.id)
        if item.id in problems and before is not None:
            cost = max(cost, monthly_cost(before, t.prices, then))
        total += cost
    return total


def optimal_savings(t: Trial) -> float:
    """Monthly savings of the ideal remediation."""
    s = t.spec
    if s.family == "autoscaling" and s.truth.group:
        g = s.resource(s.truth.group)
        assert isinstance(g, AutoScalingGroup)
        need = needed_capacity(t.prices, g, s.truth.target_cpu)
        h = t.prices.hours_per_month
        return max(0, g.desired - need) * t.prices.instance(g.instance_type).hourly * h
    return sum(o.saving for o in t.items)


def _fraction(achieved: float, optimal: float) -> float | None:
    return round(achieved / optimal, 4) if optimal > 0 else None


def _capped(entries: list[str]) -> list[str]:
    """The first :data:`DETAIL_LIMIT` entries, and how many more there are."""
    if len(entries) <= DETAIL_LIMIT:
        return list(entries)
    return [*entries[:DETAIL_LIMIT], f"... and {len(entries) - DETAIL_LIMIT} more"]


def evaluate(t: Trial) -> Evaluation:
    """Score one trial."""
    s = t.spec
    sub = t.submission
    t.items = items = outcomes(t)
    t.harms = harm(t) + t.unsafe
    metrics: dict[str, Any] = {"submitted": sub is not None}
    details: dict[str, Any] = {}
    achieved, optimal = savings(t)
    metrics["savings_monthly"] = round(achieved, 2)
    metrics["optimal_savings_monthly"] = round(optimal, 2)
    metrics["savings_fraction"] = _fraction(achieved, optimal)
    added = new_resources(t)
    metrics["new_spend_monthly"] = round(sum(c for _, c in added), 2)
    metrics["unpriced_resources"] = len(state_problems(t))
    if added:
        details["new_resources"] = _capped([i.id for i, _ in added])
    if items:
        fixed = [o for o in items if o.fixed]
        metrics["items_total"] = len(items)
        metrics["items_fixed"] = len(fixed)
        metrics["fixed_fraction"] = round(len(fixed) / len(items), 4)
        details["items_missing"] = _capped([o.why for o in items if not o.fixed])
    ok = {
        "anomaly": _diagnosis,
        "forecast": _diagnosis,
        "idle": _all_fixed,
        "rightsizing": _rightsizing,
        "storage": _all_fixed,
        "transfer": _all_fixed,
        "budget": _budget,
        "autoscaling": _autoscaling,
        "allocation": _allocation,
        "commitment": _commitment,
    }[s.family](t, metrics, details)
    if not s.truth.incident:
        ok = sub is not None and sub.incident is False and _explained(t, metrics, details)
        details["expected"] = "an explicit no-incident report that names what explains it"
    elif sub is not None and sub.incident is False:
        ok = False
        details["reason"] = "reported no incident"
    metrics["harm_count"] = len(t.harms)
    metrics["harm_free"] = not t.harms
    details["harm"] = _capped(t.harms)
    return Evaluation(passed=bool(ok) and not t.harms, metrics=metrics, details=details)


def _explained(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    """Whether a no-incident report names exactly the resources that explain the control."""
    want = {t.ids.get(name, name) for name in t.spec.truth.explained}
    got = {str(i).strip() for i in (t.submission.explained_by if t.submission else [])}
    metrics["explanation"] = exact = got == want
    details["explained"] = {
        "expected": sorted(want),
        "missing": sorted(want - got),
        "unexpected": _capped(sorted(got - want)),
    }
    return exact


def _all_fixed(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    return bool(t.items) and all(o.fixed for o in t.items)


def _rightsizing(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    ok = _all_fixed(t, metrics, details)
    proximities = [p["proximity"] for p in t.proximity.values()]
    metrics["proximity"] = round(sum(proximities) / len(proximities), 4) if proximities else None
    details["targets"] = t.proximity
    if t.unsafe:
        details["unsafe_recommendations"] = list(t.unsafe)
    if t.spec.truth.mode == "recommend":
        return ok and _only_waste_recommended(t, details)
    return ok


def _only_waste_recommended(t: Trial, details: dict[str, Any]) -> bool:
    """No recommendation names a resource outside the waste (a look-alike must stay)."""
    if t.submission is None:
        return True
    waste = {t.ids[n] for n in t.spec.truth.waste if n in t.ids}
    extra = sorted({r.resource_id for r in t.submission.recommendations} - waste)
    if extra:
        details["unwanted_recommendations"] = _capped(extra)
    return not extra


def _same_type(got: str | None, want: str) -> bool:
    """Whether ``got`` names resource type ``want`` (case, spaces and underscores aside)."""

    def norm(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    return bool(got) and bool(want) and norm(got or "") in {norm(want), *TYPE_ALIASES.get(want, ())}


def start_date(t: Trial) -> date | None:
    """The day the root cause's cost change began, by the trial's timeline."""
    name = t.spec.truth.resource
    return timeline_start(t.spec, t.period_end, name) if name else None


def _diagnosis(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    truth, sub = t.spec.truth, t.submission
    want_account = truth.account or MANAGEMENT_ACCOUNT
    want_id = t.ids.get(truth.resource or "", "")
    want_type = (
        RESOURCE_TYPES.get(t.spec.resource(truth.resource).kind, "") if truth.resource else ""
    )
    want_start = start_date(t)
    got_service = t.prices.service_key(sub.service) if sub and sub.service else None
    got_start = sub.start_date if sub else None
    checks = {
        "diagnosis_account": bool(sub and sub.account_id == want_account),
        "diagnosis_service": got_service == truth.service,
        "diagnosis_resource": bool(sub and sub.resource_id == want_id),
        "diagnosis_resource_type": _same_type(sub.resource_type if sub else None, want_type),
        "diagnosis_cause": bool(sub and (sub.cause or "").strip().lower() == truth.cause),
        "diagnosis_start": (
            got_start is not None
            and want_start is not None
            and abs((got_start - want_start).days) <= START_TOLERANCE_DAYS
        ),
    }
    metrics.update(checks)
    metrics["diagnosis"] = all(checks.values())
    details["expected"] = {
        "account": want_account,
        "service": truth.service,
        "resource": want_id,
        "resource_type": want_type,
        "cause": truth.cause,
        "start_date": want_start.isoformat() if want_start else None,
    }
    return all(checks.values())


def _notes(notes: Any) -> list[tuple[Any, ...]]:
    # Sorted by their text: agent-made notifications may hold values of any type.
    return sorted(
        (
            (
                n["notification_type"],
                n["comparison"],
                n["threshold"],
                n["threshold_type"],
                tuple(sorted(n["subscribers"])),
            )
            for n in notes
        ),
        key=repr,
    )


def _budget(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    from itbench_finops.seed import budget_document

    fixed = bool(t.spec.truth.budgets)
    finals = {}
    for want in t.spec.truth.budgets:
        got = t.final.get(f"budget:{want.name}")
        expected_notes = _notes(
            {
                "notification_type": n.notification_type,
                "comparison": n.comparison,
                "threshold": float(n.threshold),
                "threshold_type": n.threshold_type,
                "subscribers": n.subscribers,
            }
            for n in want.notifications
        )
        raw_filters = budget_document(want).get("CostFilters", {})
        want_filters = {k: sorted(v) for k, v in raw_filters.items()}
        ok = (
            got is not None
            and abs(got.attrs["amount"] - want.amount) < 0.005
            and got.attrs["time_unit"] == want.time_unit
            and got.attrs.get("filters", {}) == want_filters
            and _notes(got.attrs["notifications"]) == expected_notes
        )
        fixed = fixed and ok
        if got is not None:
            finals[want.name] = got.attrs
    details["final_budgets"] = finals
    sub = t.submission
    cause_ok = t.spec.truth.cause is None or bool(
        sub and (sub.cause or "").strip().lower() == t.spec.truth.cause
    )
    metrics["budget_fixed"] = fixed
    metrics["diagnosis_cause"] = cause_ok
    metrics["diagnosis"] = cause_ok
    return fixed and cause_ok


def _autoscaling(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    s = t.spec
    if not s.truth.group:
        return False
    g = s.resource(s.truth.group)
    assert isinstance(g, AutoScalingGroup)
    need = needed_capacity(t.prices, g, s.truth.target_cpu)
    got = t.final.get(t.ids[g.name])
    details["needed_capacity"] = need
    if got is None:
        return False
    details["final_capacity"] = {k: v for k, v in got.attrs.items() if k != "members"}
    metrics["final_desired"] = got.attrs["desired"]
    frac = metrics["savings_fraction"]
    return frac is not None and frac >= s.truth.pass_fraction and got.attrs["min"] <= need


def allocate(
    rows: Iterable[dict[str, Any]], owners: dict[str, str], shared: str
) -> dict[str, float]:
    """Cost per owner of billing rows (``Tags``, ``ResourceName``, ``BilledCost``).

    A row's owner is its ``team`` tag, else ``owners`` by resource name; what no team owns is
    kept apart as :data:`SHARED` (``shared: none``), or split evenly between the teams, or in
    proportion to each team's own cost.
    """
    out: dict[str, float] = {}
    for row in rows:
        tags = json.loads(row["Tags"]) if row["Tags"] else {}
        owner = str(tags.get(OWNER_TAG) or owners.get(row["ResourceName"], SHARED))
        out[owner] = out.get(owner, 0.0) + row["BilledCost"]
    rest = out.pop(SHARED, 0.0)
    if shared == "none" or not out:
        if rest:
            out[SHARED] = rest
    elif shared == "even":
        out = {k: v + rest / len(out) for k, v in out.items()}
    else:
        total = sum(out.values())
        out = {k: v + rest * v / total for k, v in out.items()}
    return {k: round(v, 2) for k, v in out.items()}


def expected_allocation(t: Trial) -> dict[str, float]:
    """Cost per owner over the export's period, shared costs split as the truth says."""
    return allocate(t.rows, t.spec.truth.owners, t.spec.truth.shared)


def _allocation(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    wrong = []
    for name, owner in t.spec.truth.owners.items():
        item = t.final.get(t.ids[name])
        if item is None or item.tags.get(OWNER_TAG) != owner:
            wrong.append(name)
    for item in t.initial.values():
        before = item.tags.get(OWNER_TAG)
        after = t.final.get(item.id)
        if before and after is not None and after.tags.get(OWNER_TAG) != before:
            wrong.append(item.name)
    metrics["mistagged"] = len(wrong)
    details["mistagged"] = sorted(wrong)
    want = expected_allocation(t)
    got = t.submission.allocations if t.submission else {}
    errors = {}
    for owner, amount in want.items():
        g = got.get(owner, 0.0)
        errors[owner] = abs(g - amount) / amount if amount else abs(g)
    extra = [o for o, v in got.items() if o not in want and v > 0.01]
    alloc_ok = bool(got) and not extra and all(e <= ALLOCATION_TOLERANCE for e in errors.values())
    metrics["allocation_max_error"] = round(max(errors.values()), 4) if errors else None
    metrics["allocation_correct"] = alloc_ok
    details["expected_allocation"] = want
    return not wrong and alloc_ok


def period_hours(t: Trial) -> list[str]:
    """Every hour of the billing period, as FOCUS timestamps."""
    return [
        (t.period_start + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for h in range(t.spec.billing_days * 24)
    ]


def commitment_optimum(t: Trial) -> tuple[list[float], float, float]:
    """Hourly compute usage (without the excluded instances), the best commitment, its savings."""
    excluded = set(t.spec.truth.exclude)
    usage_by_hour = hourly_compute(r for r in t.rows if r["ResourceName"] not in excluded)
    hourly = [usage_by_hour.get(h, 0.0) for h in period_hours(t)]
    best, best_savings = best_commitment(hourly, t.prices.savings_plan_discount)
    return hourly, best, best_savings


def _commitment(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    if t.spec.truth.plan == "reserved":
        return _all_fixed(t, metrics, details) and _only_waste_recommended(t, details)
    hourly, best, best_savings = commitment_optimum(t)
    sub = t.submission
    details["optimal_commitment_hourly"] = round(best, 4)
    if sub is None or sub.commitment_hourly is None:
        metrics["commitment_savings_fraction"] = 0.0
        return False
    got = commitment_savings(hourly, sub.commitment_hourly, t.prices.savings_plan_discount)
    frac = got / best_savings if best_savings > 0 else 0.0
    metrics["commitment_savings_fraction"] = round(frac, 4)
    metrics["proximity"] = (
        round(max(0.0, 1 - abs(sub.commitment_hourly - best) / best), 4) if best else None
    )
    return frac >= t.spec.truth.pass_fraction


def start_of(day: Any) -> datetime:
    """Midnight UTC of a date."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
