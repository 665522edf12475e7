"""Deterministic scoring from the account's final state: diagnosis, savings, harm, proximity."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from itbench import Evaluation
from itbench_finops.billing import item_cost, monthly_cost, quantity
from itbench_finops.optimum import (
    best_commitment,
    commitment_savings,
    hourly_compute,
    needed_capacity,
    needed_vcpus,
    rightsizing_target,
)
from itbench_finops.prices import PriceTable
from itbench_finops.server import MANAGEMENT_ACCOUNT
from itbench_finops.spec import AutoScalingGroup, Database, FinOpsSpec, FinOpsSubmission, Instance
from itbench_finops.state import EXCESS, Item

#: Tag that names a resource's owner in the cost-allocation family.
OWNER_TAG = "team"
#: The billing export's ResourceType of each kind of scenario resource.
RESOURCE_TYPES = {
    "instance": "Instance",
    "volume": "Volume",
    "snapshot": "Snapshot",
    "address": "ElasticIP",
    "load_balancer": "LoadBalancer",
    "database": "DBInstance",
    "bucket": "Bucket",
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
}
#: Largest relative error of an allocated amount that still counts as right.
ALLOCATION_TOLERANCE = 0.01
#: Most entries of one list shown in a trial's details (the counts stay whole).
DETAIL_LIMIT = 50


@dataclass
class Trial:
    """Everything the scorer reads about one trial."""

    spec: FinOpsSpec
    prices: PriceTable
    ids: dict[str, str]
    initial: dict[str, Item]
    final: dict[str, Item]
    rows: list[dict[str, Any]]
    period_start: datetime
    submission: FinOpsSubmission | None
    harms: list[str] = field(default_factory=list)
    _problems: dict[str, str] | None = field(default=None, repr=False)


def _instances_of(state: dict[str, Item], instance_id: str) -> list[str]:
    return [
        i.id
        for i in state.values()
        if i.kind == "volume" and i.attrs.get("instance") == instance_id
    ]


def removable_ids(t: Trial) -> set[str]:
    """Ids the truth allows to remove: the waste and what hangs off it."""
    out: set[str] = set()
    for name in t.spec.truth.removable:
        rid = t.ids[name]
        out.add(rid)
        item = t.initial.get(rid)
        if item is not None and item.kind == "instance":
            out.update(_instances_of(t.initial, rid))
    return out


def _label(item: Item) -> str:
    return f"{item.kind} {item.id} ({item.name[:60]})"


def state_problems(t: Trial) -> dict[str, str]:
    """Resources of the final state that cannot be priced as they are, by id, with the reason.

    A type, class or volume type the price table does not list, a size no real resource has,
    and what AWS refuses but moto allows: a volume or a database's storage made smaller.
    """
    if t._problems is None:
        out: dict[str, str] = {}
        for item in t.final.values():
            reasons = []
            unpriced = item_cost(item, t.prices, t.spec).unpriced
            if unpriced:
                reasons.append(unpriced)
            before = t.initial.get(item.id)
            if before is not None and item.kind in ("volume", "database"):
                key = "size" if item.kind == "volume" else "storage"
                old, new = quantity(before.attrs.get(key)), quantity(item.attrs.get(key))
                if old is not None and new is not None and new < old:
                    reasons.append(
                        f"had its {key} lowered from {old:g} to {new:g} GB (AWS refuses)"
                    )
            if reasons:
                out[item.id] = "; ".join(reasons)
        t._problems = out
    return t._problems


def managed_ids(t: Trial, state: dict[str, Item]) -> set[str]:
    """Instances of ``state`` that a seeded Auto Scaling group runs, with their volumes.

    Membership is the group's own instance list: a tag naming the group proves nothing.
    """
    seeded = {i.id for i in t.initial.values() if i.kind == "asg"}
    out = {
        m
        for g in state.values()
        if g.kind == "asg" and g.id in seeded
        for m in g.attrs.get("members", [])
    }
    return out | {v for m in out for v in _instances_of(state, m)}


def new_resources(t: Trial) -> list[tuple[Item, float]]:
    """Billable resources the agent added (not run by a seeded group), with their monthly cost."""
    managed = managed_ids(t, t.final)
    out = []
    for item in t.final.values():
        if item.id in t.initial or item.id in managed or item.kind == EXCESS:
            continue
        cost = monthly_cost(item, t.prices, t.spec)
        if cost > 0:
            out.append((item, cost))
    return out


def harm(t: Trial) -> list[str]:
    """What the agent broke or added: the harm that fails a trial.

    In-use resources deleted, stopped, detached or downsized below their need; resources left
    in a state the price table cannot price; billable resources added; a flooded account.
    """
    by_id = {rid: name for name, rid in t.ids.items()}
    allowed = removable_ids(t)
    managed = {i.id for i in t.initial.values() if i.kind == "instance" and i.attrs.get("group")}
    managed |= {v for m in managed for v in _instances_of(t.initial, m)}
    problems = state_problems(t)
    out: list[str] = []
    for item in t.initial.values():
        if item.id in allowed or item.id in managed or item.kind == "budget":
            continue
        label = f"{item.kind} {item.id} ({item.name})"
        after = t.final.get(item.id)
        if after is None:
            out.append(f"{label} deleted")
            continue
        a0, a1 = item.attrs, after.attrs
        spec_r = t.spec.resource(by_id[item.id]) if item.id in by_id else None
        if item.kind == "instance":
            if a0["state"] == "running" and a1["state"] != "running":
                out.append(f"{label} left {a1['state']}")
            have = t.prices.find_sized("ec2", a1["type"])
            if a1["type"] != a0["type"] and have is not None:
                cpu = spec_r.cpu if isinstance(spec_r, Instance) else None
                peak = cpu.peak if cpu else 100.0
                need = needed_vcpus(
                    t.prices.instance(a0["type"]).vcpu, peak, t.spec.truth.target_cpu
                )
                if have.vcpu < need - 1e-9:
                    out.append(
                        f"{label} downsized to {a1['type']} below its need of {need:.1f} vCPU"
                    )
        elif item.kind == "volume":
            if a0.get("instance") and not a1.get("instance"):
                out.append(f"{label} detached")
        elif item.kind == "address":
            if a0.get("instance") and a1.get("instance") != a0.get("instance"):
                out.append(f"{label} disassociated")
        elif item.kind == "load_balancer":
            if a0["targets"] and a1["targets"] < a0["targets"]:
                out.append(f"{label} lost registered targets")
        elif item.kind == "database":
            if a0["state"] == "available" and a1["state"] != "available":
                out.append(f"{label} left {a1['state']}")
            have = t.prices.find_sized("rds", a1["class"])
            if a1["class"] != a0["class"] and have is not None:
                cpu = spec_r.cpu if isinstance(spec_r, Database) else None
                peak = cpu.peak if cpu else 100.0
                need = needed_vcpus(
                    t.prices.database(a0["class"]).vcpu, peak, t.spec.truth.target_cpu
                )
                if have.vcpu < need - 1e-9:
                    out.append(f"{label} downsized to {a1['class']} below its need")
        elif item.kind == "asg" and isinstance(spec_r, AutoScalingGroup):
            need = needed_capacity(t.prices, spec_r, t.spec.truth.target_cpu)
            if a1["desired"] < need or a1["max"] < need:
                out.append(
                    f"{label} capacity desired={a1['desired']} max={a1['max']} below the "
                    f"recorded peak's need of {need}"
                )
    for rid, reason in problems.items():
        added = "" if rid in t.initial else " added, and"
        out.append(f"{_label(t.final[rid])}{added} {reason}: unpriced")
    for item, cost in new_resources(t):
        if item.id not in problems:
            out.append(f"{_label(item)} added: unexpected spend of {cost:.2f} USD a month")
    for item in t.final.values():
        if item.kind == EXCESS:
            out.append(
                f"account {item.account} holds more than {item.attrs['limit']} "
                f"{item.attrs['of']} resources: the rest was not read"
            )
    return out


def savings(t: Trial) -> tuple[float, float]:
    """Monthly savings achieved (whole account) and the optimal monthly savings."""
    before = sum(monthly_cost(i, t.prices, t.spec) for i in t.initial.values())
    return before - final_cost(t), optimal_savings(t)


def final_cost(t: Trial) -> float:
    """Monthly cost of the final state; an unpriceable resource costs at least what it did.

    Nothing is saved by putting a resource in a state the price table cannot price.
    """
    problems = state_problems(t)
    total = 0.0
    for item in t.final.values():
        cost = monthly_cost(item, t.prices, t.spec)
        before = t.initial.get(item.id)
        if item.id in problems and before is not None:
            cost = max(cost, monthly_cost(before, t.prices, t.spec))
        total += cost
    return total


def optimal_savings(t: Trial) -> float:
    """Monthly savings of the ideal remediation."""
    s = t.spec
    h = t.prices.hours_per_month
    if s.family == "idle":
        allowed = removable_ids(t)
        return sum(monthly_cost(t.initial[i], t.prices, s) for i in allowed if i in t.initial)
    if s.family == "rightsizing":
        total = 0.0
        for name in s.truth.targets:
            inst = s.resource(name)
            assert isinstance(inst, Instance)
            best, _ = rightsizing_target(t.prices, inst, s.truth.target_cpu)
            total += (
                t.prices.instance(inst.instance_type).hourly - t.prices.instance(best).hourly
            ) * h
        return total
    if s.family == "autoscaling" and s.truth.group:
        g = s.resource(s.truth.group)
        assert isinstance(g, AutoScalingGroup)
        need = needed_capacity(t.prices, g, s.truth.target_cpu)
        return max(0, g.desired - need) * t.prices.instance(g.instance_type).hourly * h
    return 0.0


def _fraction(achieved: float, optimal: float) -> float | None:
    return round(achieved / optimal, 4) if optimal > 0 else None


def evaluate(t: Trial) -> Evaluation:
    """Score one trial."""
    t.harms = harm(t)
    s = t.spec
    sub = t.submission
    metrics: dict[str, Any] = {"harm_count": len(t.harms), "submitted": sub is not None}
    details: dict[str, Any] = {"harm": t.harms}
    achieved, optimal = savings(t)
    metrics["savings_monthly"] = round(achieved, 2)
    metrics["optimal_savings_monthly"] = round(optimal, 2)
    metrics["savings_fraction"] = _fraction(achieved, optimal)
    added = new_resources(t)
    metrics["new_spend_monthly"] = round(sum(c for _, c in added), 2)
    metrics["unpriced_resources"] = len(state_problems(t))
    if added:
        details["new_resources"] = _capped([i.id for i, _ in added])
    ok = {
        "anomaly": _anomaly,
        "idle": _idle,
        "rightsizing": _rightsizing,
        "budget": _budget,
        "autoscaling": _autoscaling,
        "allocation": _allocation,
        "commitment": _commitment,
    }[s.family](t, metrics, details)
    if not s.truth.incident:
        ok = sub is not None and sub.incident is False
        details["expected"] = "an explicit no-incident report and no change"
    elif sub is not None and sub.incident is False:
        ok = False
        details["reason"] = "reported no incident"
    passed = bool(ok) and not t.harms
    metrics["harm_free"] = not t.harms
    details["harm"] = _capped(t.harms)
    return Evaluation(passed=passed, metrics=metrics, details=details)


def _capped(entries: list[str]) -> list[str]:
    """The first :data:`DETAIL_LIMIT` entries, and how many more there are."""
    if len(entries) <= DETAIL_LIMIT:
        return list(entries)
    return [*entries[:DETAIL_LIMIT], f"... and {len(entries) - DETAIL_LIMIT} more"]


def _anomaly(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    truth, sub = t.spec.truth, t.submission
    want_account = truth.account or MANAGEMENT_ACCOUNT
    want_id = t.ids.get(truth.resource or "", "")
    want_type = (
        RESOURCE_TYPES.get(t.spec.resource(truth.resource).kind, "") if truth.resource else ""
    )
    got_service = t.prices.service_key(sub.service) if sub and sub.service else None
    checks = {
        "diagnosis_account": bool(sub and sub.account_id == want_account),
        "diagnosis_service": got_service == truth.service,
        "diagnosis_resource": bool(sub and sub.resource_id == want_id),
        "diagnosis_resource_type": _same_type(sub.resource_type if sub else None, want_type),
        "diagnosis_cause": bool(sub and (sub.cause or "").strip().lower() == truth.cause),
    }
    metrics.update(checks)
    metrics["diagnosis"] = all(checks.values())
    details["expected"] = {
        "account": want_account,
        "service": truth.service,
        "resource": want_id,
        "resource_type": want_type,
        "cause": truth.cause,
    }
    return all(checks.values())


def _same_type(got: str | None, want: str) -> bool:
    """Whether ``got`` names resource type ``want`` (case, spaces and underscores aside)."""

    def norm(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    return bool(got) and bool(want) and norm(got or "") in {norm(want), *TYPE_ALIASES.get(want, ())}


def _idle(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    allowed = removable_ids(t)
    left = sorted(i for i in allowed if i in t.final and _still_paying(t, i))
    metrics["waste_remaining"] = len(left)
    details["waste_remaining"] = left
    frac = metrics["savings_fraction"]
    return frac is not None and frac >= t.spec.truth.pass_fraction


def _still_paying(t: Trial, rid: str) -> bool:
    item = t.final[rid]
    return not (
        item.kind in ("instance",)
        and item.attrs["state"] != "running"
        and not _instances_of(t.final, rid)
    )


def _rightsizing(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    s, sub = t.spec, t.submission
    recs = {r.resource_id: r.recommended_type for r in (sub.recommendations if sub else [])}
    proximities = []
    per: dict[str, Any] = {}
    unsafe = []
    for name in s.truth.targets:
        inst = s.resource(name)
        assert isinstance(inst, Instance)
        rid = t.ids[name]
        best, need = rightsizing_target(t.prices, inst, s.truth.target_cpu)
        if s.truth.mode == "recommend":
            chosen = recs.get(rid)
        else:
            item = t.final.get(rid)
            chosen = item.attrs["type"] if item else None
        if chosen is None:
            prox = 0.0
        else:
            try:
                price = t.prices.instance(chosen)
            except KeyError:
                prox, price = 0.0, None
            if price is not None:
                opt = t.prices.instance(best).hourly
                prox = max(0.0, 1 - abs(price.hourly - opt) / opt)
                if price.vcpu < need - 1e-9:
                    unsafe.append(f"{rid}: {chosen} has {price.vcpu} vCPU, needs {need:.1f}")
                    prox = 0.0
        proximities.append(prox)
        per[rid] = {"chosen": chosen, "optimal": best, "proximity": round(prox, 4)}
    metrics["proximity"] = round(sum(proximities) / len(proximities), 4) if proximities else None
    details["targets"] = per
    if unsafe:
        details["unsafe_recommendations"] = unsafe
        metrics["harm_count"] += len(unsafe)
        t.harms.extend(unsafe)
    return bool(proximities) and min(proximities) >= s.truth.pass_fraction


def _budget(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    want = t.spec.truth.budget
    if want is None:
        return False
    got = t.final.get(f"budget:{want.name}")
    expected_notes = sorted(
        (
            (
                n.notification_type,
                n.comparison,
                float(n.threshold),
                n.threshold_type,
                tuple(sorted(n.subscribers)),
            )
            for n in want.notifications
        ),
        key=repr,
    )
    fixed = False
    if got is not None:
        # Sorted by their text: agent-made notifications may hold values of any type.
        notes = sorted(
            (
                (
                    n["notification_type"],
                    n["comparison"],
                    n["threshold"],
                    n["threshold_type"],
                    tuple(n["subscribers"]),
                )
                for n in got.attrs["notifications"]
            ),
            key=repr,
        )
        fixed = (
            abs(got.attrs["amount"] - want.amount) < 0.005
            and got.attrs["time_unit"] == want.time_unit
            and notes == expected_notes
        )
        details["final_budget"] = got.attrs
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


def owner_of_row(t: Trial, row: dict[str, Any]) -> str:
    """Owner of a billing row by the allocation rules (its tag, else the truth's owner)."""
    import json

    tags = json.loads(row["Tags"]) if row["Tags"] else {}
    if tags.get(OWNER_TAG):
        return str(tags[OWNER_TAG])
    return t.spec.truth.owners.get(row["ResourceName"], "unallocated")


def expected_allocation(t: Trial) -> dict[str, float]:
    """Cost per owner over the export's period."""
    out: dict[str, float] = {}
    for row in t.rows:
        o = owner_of_row(t, row)
        out[o] = out.get(o, 0.0) + row["BilledCost"]
    return {k: round(v, 2) for k, v in out.items()}


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
    """Hourly compute usage, the best commitment and its savings."""
    usage_by_hour = hourly_compute(t.rows)
    usage = [usage_by_hour.get(h, 0.0) for h in period_hours(t)]
    best, best_savings = best_commitment(usage, t.prices.savings_plan_discount)
    return usage, best, best_savings


def _commitment(t: Trial, metrics: dict[str, Any], details: dict[str, Any]) -> bool:
    usage, best, best_savings = commitment_optimum(t)
    sub = t.submission
    details["optimal_commitment_hourly"] = round(best, 4)
    if sub is None or sub.commitment_hourly is None:
        metrics["commitment_savings_fraction"] = 0.0
        return False
    got = commitment_savings(usage, sub.commitment_hourly, t.prices.savings_plan_discount)
    frac = got / best_savings if best_savings > 0 else 0.0
    metrics["commitment_savings_fraction"] = round(frac, 4)
    metrics["proximity"] = (
        round(max(0.0, 1 - abs(sub.commitment_hourly - best) / best), 4) if best else None
    )
    return frac >= t.spec.truth.pass_fraction


def start_of(day: Any) -> datetime:
    """Midnight UTC of a date."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
