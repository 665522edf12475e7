"""Which waste items of a trial the final state (or the report) fixes, and what each is worth.

Every item of the truth's ``waste`` counts once: a trial passes only when all are fixed
(``items_fixed`` = ``items_total``), whatever they cost; the dollars are reported beside.
"""

from __future__ import annotations

from itbench_finops.costs import Usage, bucket_month, monthly_cost, nat_month
from itbench_finops.optimum import (
    iops_allowance,
    rightsizing_target,
    throughput_allowance,
    volume_iops_need,
    volume_throughput_need,
)
from itbench_finops.seed import S3_SERVICE, Nat
from itbench_finops.spec import Bucket, Database, Instance, NatGateway
from itbench_finops.state import Item
from itbench_finops.trial import Outcome, Trial


def volumes_of(state: dict[str, Item], instance_id: str) -> list[str]:
    """Ids of the volumes of ``state`` attached to ``instance_id``."""
    return [
        i.id
        for i in state.values()
        if i.kind == "volume" and i.attrs.get("instance") == instance_id
    ]


def dependents(t: Trial, rid: str) -> set[str]:
    """What goes with a removed resource: an instance's volumes, a NAT gateway's address.

    A NAT gateway's route tables lose their route to it: they may change too.
    """
    item = t.initial.get(rid)
    if item is None:
        return set()
    if item.kind == "instance":
        return set(volumes_of(t.initial, rid))
    if item.kind == "nat_gateway":
        tables = {
            i.id
            for i in t.initial.values()
            if i.kind == "route_table" and any(target == rid for _, target in i.attrs["routes"])
        }
        return set(item.attrs.get("allocations") or []) | tables
    return set()


def removable_ids(t: Trial) -> set[str]:
    """Ids an idle trial may remove: the waste and what goes with it."""
    if t.spec.family != "idle":
        return set()
    out: set[str] = set()
    for name in t.spec.truth.waste:
        rid = t.ids[name]
        out |= {rid, *dependents(t, rid)}
    return out


def offloaded(t: Trial, state: dict[str, Item]) -> frozenset[str]:
    """NAT gateways of ``state`` whose private route table an S3 gateway endpoint serves."""
    served = {
        (i.attrs.get("vpc"), table)
        for i in state.values()
        if i.kind == "gateway_endpoint" and i.attrs.get("service") == S3_SERVICE
        for table in i.attrs.get("route_tables") or []
    }
    return frozenset(
        nat.nat_id for nat in t.seeded.nats.values() if (nat.vpc_id, nat.route_table_id) in served
    )


def usage(t: Trial, state: dict[str, Item]) -> Usage:
    """What pricing ``state`` needs besides the state itself."""
    return Usage(t.spec, t.names, offloaded(t, state))


def outcomes(t: Trial) -> list[Outcome]:
    """Every waste item of the trial with its outcome (empty for families without items)."""
    family = t.spec.family
    if family == "commitment" and t.spec.truth.plan != "reserved":
        return []
    check = {
        "idle": _removed,
        "rightsizing": _resized,
        "storage": _stored,
        "transfer": _routed,
        "commitment": _reserved,
    }.get(family)
    if check is None:
        return []
    return [check(t, name) for name in t.spec.truth.waste]


def _removed(t: Trial, name: str) -> Outcome:
    rid = t.ids[name]
    before = t.initial[rid]
    cost = sum(
        monthly_cost(t.initial[i], t.prices, usage(t, t.initial))
        for i in {rid, *dependents(t, rid)}
    )
    gone = {rid, *(d for d in dependents(t, rid) if t.initial[d].kind != "route_table")}
    left = sorted(i for i in gone if i in t.final)
    if left:
        what = "still there" if rid in left else f"left {', '.join(left)} behind"
        return Outcome(name, False, f"{before.kind} {rid} ({name}) {what}", cost)
    return Outcome(name, True, "", cost)


def _resized(t: Trial, name: str) -> Outcome:
    r = t.spec.resource(name)
    assert isinstance(r, Instance | Database)
    rid = t.ids[name]
    table = "ec2" if isinstance(r, Instance) else "rds"
    current = r.instance_type if isinstance(r, Instance) else r.instance_class
    best, cpu, memory = rightsizing_target(t.prices, r, t.spec.truth)
    opt = t.prices.find_sized(table, best)
    was = t.prices.find_sized(table, current)
    assert opt is not None and was is not None
    saving = (was.hourly - opt.hourly) * t.prices.hours_per_month
    if t.spec.truth.mode == "recommend":
        recs = (
            {x.resource_id: x.recommended_type for x in t.submission.recommendations}
            if t.submission
            else {}
        )
        chosen = recs.get(rid)
    else:
        item = t.final.get(rid)
        chosen = item.attrs.get("type" if table == "ec2" else "class") if item else None
        running = item is not None and item.attrs.get("state") in ("running", "available")
        if item is not None and not running:
            return Outcome(name, False, f"{rid} ({name}) left {item.attrs.get('state')}", saving)
    t.proximity[rid] = {"chosen": chosen, "optimal": best, "proximity": 0.0}
    if chosen is None:
        return Outcome(name, False, f"{rid} ({name}): no type chosen", saving)
    have = t.prices.find_sized(table, str(chosen))
    if have is None:
        return Outcome(name, False, f"{rid} ({name}): {chosen} is not priced", saving)
    if have.vcpu < cpu - 1e-9 or have.memory_gib < memory - 1e-9:
        if t.spec.truth.mode == "recommend":  # an applied one is the harm rule's
            t.unsafe.append(
                f"{rid} ({name}): {chosen} has {have.vcpu} vCPU and {have.memory_gib:g} GiB, "
                f"needs {cpu:.1f} vCPU and {memory:.1f} GiB"
            )
        return Outcome(name, False, f"{rid} ({name}): {chosen} is below its need", saving)
    proximity = max(0.0, 1 - abs(have.hourly - opt.hourly) / opt.hourly)
    t.proximity[rid]["proximity"] = round(proximity, 4)
    if proximity < t.spec.truth.pass_fraction:
        return Outcome(
            name,
            False,
            f"{rid} ({name}): {chosen} is {proximity:.2f} of the optimum {best}",
            saving,
        )
    return Outcome(name, True, "", saving)


def _stored(t: Trial, name: str) -> Outcome:
    r = t.spec.resource(name)
    if isinstance(r, Bucket):
        return _lifecycle(t, r)
    assert isinstance(r, Instance)
    problems = []
    saving = 0.0
    for vid, v in zip(t.seeded.data_volumes.get(name, []), r.volumes, strict=False):
        if v.volume_type != "gp2":
            continue
        need = volume_iops_need(v)
        speed = volume_throughput_need(v)
        after = t.final.get(vid)
        saving += t.prices.volume_month("gp2", v.size) - t.prices.volume_month(
            "gp3", v.size, need, speed
        )
        if after is None:
            problems.append(f"volume {vid} is gone")
            continue
        a = after.attrs
        if a.get("volume_type") != "gp3":
            problems.append(f"volume {vid} is {a.get('volume_type')}, not gp3")
        elif not need <= (a.get("iops") or 0) <= iops_allowance(need):
            problems.append(
                f"volume {vid} has {a.get('iops')} IOPS; its peak needs {need} to "
                f"{iops_allowance(need)}"
            )
        elif not speed <= (a.get("throughput") or 0) <= throughput_allowance(speed):
            problems.append(
                f"volume {vid} has {a.get('throughput')} MB/s; its peak needs {speed} to "
                f"{throughput_allowance(speed)}"
            )
    if problems:
        return Outcome(name, False, f"{name}: {'; '.join(problems)}", saving)
    return Outcome(name, True, "", saving)


def _lifecycle(t: Trial, r: Bucket) -> Outcome:
    truth = t.spec.truth
    item = t.final.get(r.name)
    rules = (item.attrs.get("lifecycle") or []) if item else []
    whole = [rule for rule in rules if rule.get("prefix") == ""]
    moved = any(
        (rule.get("transitions") or {}).get(truth.storage_class) == truth.transition_days
        for rule in whole
    )
    pruned = not r.versions_gb or any(
        rule.get("noncurrent_days") == truth.noncurrent_days for rule in whole
    )
    before = bucket_month(r, t.prices, [])
    after = bucket_month(
        r,
        t.prices,
        [
            {
                "prefix": "",
                "transitions": {truth.storage_class: truth.transition_days},
                "noncurrent_days": truth.noncurrent_days if r.versions_gb else None,
            }
        ],
    )
    missing = []
    if not moved:
        missing.append(
            f"no rule moves it to {truth.storage_class} within {truth.transition_days} days"
        )
    if not pruned:
        missing.append(f"no rule expires noncurrent versions within {truth.noncurrent_days} days")
    if missing:
        return Outcome(r.name, False, f"bucket {r.name}: {'; '.join(missing)}", before - after)
    return Outcome(r.name, True, "", before - after)


def _routed(t: Trial, name: str) -> Outcome:
    r = t.spec.resource(name)
    assert isinstance(r, NatGateway)
    nat: Nat = t.seeded.nats[name]
    saving = nat_month(r, t.prices, False) - nat_month(r, t.prices, True)
    if nat.nat_id not in offloaded(t, t.final):
        return Outcome(
            name,
            False,
            f"{nat.nat_id} ({name}): no S3 gateway endpoint serves route table "
            f"{nat.route_table_id}",
            saving,
        )
    return Outcome(name, True, "", saving)


def _reserved(t: Trial, name: str) -> Outcome:
    rid = t.ids[name]
    recs = {x.resource_id for x in t.submission.recommendations} if t.submission else set()
    r = t.spec.resource(name)
    assert isinstance(r, Instance)
    price = t.prices.instance(r.instance_type).hourly
    saving = price * t.prices.reserved_discount * t.prices.hours_per_month
    if rid not in recs:
        return Outcome(name, False, f"{rid} ({name}) not recommended", saving)
    return Outcome(name, True, "", saving)
