"""Harm: every change the agent made to what it had to leave alone, and what it added.

Each harmed resource is one entry, named; any harm fails the trial. The waste of the truth
may change only in the way its family fixes it (an idle item removed, a rightsizing target
resized, a storage item migrated); everything else must stay as it was.
"""

from __future__ import annotations

from typing import Any

from itbench_finops.costs import item_cost, monthly_cost, quantity
from itbench_finops.fixes import removable_ids, usage, volumes_of
from itbench_finops.optimum import (
    needed_capacity,
    needs,
    volume_iops_need,
    volume_throughput_need,
)
from itbench_finops.spec import AttachedVolume, AutoScalingGroup, Database, Instance
from itbench_finops.state import EXCESS, Item
from itbench_finops.trial import Trial


def _label(item: Item) -> str:
    return f"{item.kind} {item.id} ({item.name[:60]})"


def state_problems(t: Trial) -> dict[str, str]:
    """Resources of the final state that cannot be priced as they are, by id, with the reason.

    A type, class or volume type the price table does not list, a size no real resource has,
    and what AWS refuses but moto allows: a volume or a database's storage made smaller.
    """
    if t._problems is None:
        out: dict[str, str] = {}
        priced = usage(t, t.final)
        for item in t.final.values():
            reasons = []
            unpriced = item_cost(item, t.prices, priced).unpriced
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
    return out | {v for m in out for v in volumes_of(state, m)}


def new_resources(t: Trial) -> list[tuple[Item, float]]:
    """Billable resources the agent added (not run by a seeded group), with their monthly cost."""
    managed = managed_ids(t, t.final)
    priced = usage(t, t.final)
    out = []
    for item in t.final.values():
        if item.id in t.initial or item.id in managed or item.kind == EXCESS:
            continue
        cost = monthly_cost(item, t.prices, priced)
        if cost > 0:
            out.append((item, cost))
    return out


class _Judge:
    """Compares one trial's initial and final state resource by resource."""

    def __init__(self, t: Trial) -> None:
        self.t = t
        self.names = t.names
        self.waste = {t.ids[n] for n in t.spec.truth.waste if n in t.ids}
        family = t.spec.family
        self.resizable = self.waste if family == "rightsizing" else set()
        self.migrated = (
            {v for n in t.spec.truth.waste for v in t.seeded.data_volumes.get(n, [])}
            if family == "storage"
            else set()
        )
        self.lifecycled = self.waste if family == "storage" else set()
        self.rerouted = (
            {
                i.id
                for i in t.initial.values()
                if i.kind == "route_table"
                and any(target in self.waste for _, target in i.attrs["routes"])
            }
            if family == "transfer"
            else set()
        )
        self.budgets = (
            {f"budget:{b.name}" for b in t.spec.truth.budgets} if (family == "budget") else set()
        )
        self.group = t.spec.truth.group if family == "autoscaling" else None
        self.out: list[str] = []

    def spec_of(self, rid: str) -> Any:
        name = self.names.get(rid)
        if name is None:
            return None
        try:
            return self.t.spec.resource(name)
        except KeyError:
            return None

    def harm(self, item: Item, what: str) -> None:
        self.out.append(f"{_label(item)} {what}")

    def instance(self, item: Item, after: Item) -> None:
        a0, a1 = item.attrs, after.attrs
        if a0["state"] == "running" and a1["state"] != "running":
            self.harm(item, f"left {a1['state']}")
        if a1["type"] == a0["type"]:
            return
        if item.id not in self.resizable:
            self.harm(item, f"changed type from {a0['type']} to {a1['type']}")
            return
        self._below_need(item, "ec2", str(a1["type"]))

    def _below_need(self, item: Item, table: str, chosen: str) -> None:
        r = self.spec_of(item.id)
        have = self.t.prices.find_sized(table, chosen)
        if not isinstance(r, Instance | Database) or have is None:
            return  # an unpriced type is counted among the state's problems
        cpu, memory = needs(self.t.prices, r, self.t.spec.truth)
        if have.vcpu < cpu - 1e-9 or have.memory_gib < memory - 1e-9:
            self.harm(
                item,
                f"resized to {chosen} below its need of {cpu:.1f} vCPU and {memory:.1f} GiB",
            )

    def volume(self, item: Item, after: Item) -> None:
        a0, a1 = item.attrs, after.attrs
        if a0.get("instance") and not a1.get("instance"):
            self.harm(item, "detached")
        changed = [
            k for k in ("volume_type", "size", "iops", "throughput") if a0.get(k) != a1.get(k)
        ]
        if not changed:
            return
        if item.id not in self.migrated:
            moves = ", ".join(f"{k} {a0.get(k)} -> {a1.get(k)}" for k in changed)
            self.harm(item, f"modified ({moves})")
            return
        if a1.get("size") != a0.get("size"):
            self.harm(item, f"resized from {a0.get('size')} to {a1.get('size')} GB")
        spec = self._attached(item.id)
        if spec is None or a1.get("volume_type") != "gp3":
            return
        need, speed = volume_iops_need(spec), volume_throughput_need(spec)
        if (a1.get("iops") or 0) < need:
            self.harm(item, f"left with {a1.get('iops')} IOPS below its recorded peak of {need}")
        if (a1.get("throughput") or 0) < speed:
            self.harm(
                item,
                f"left with {a1.get('throughput')} MB/s below its recorded peak of {speed}",
            )

    def _attached(self, vid: str) -> AttachedVolume | None:
        """The scenario's data volume seeded as ``vid``."""
        for name, vids in self.t.seeded.data_volumes.items():
            if vid in vids:
                r = self.t.spec.resource(name)
                if isinstance(r, Instance) and vids.index(vid) < len(r.volumes):
                    return r.volumes[vids.index(vid)]
        return None

    def address(self, item: Item, after: Item) -> None:
        a0, a1 = item.attrs, after.attrs
        for key in ("instance", "eni"):
            if a0.get(key) and a1.get(key) != a0.get(key):
                self.harm(item, "disassociated")
                return

    def load_balancer(self, item: Item, after: Item) -> None:
        if item.attrs["targets"] and after.attrs["targets"] < item.attrs["targets"]:
            self.harm(item, "lost registered targets")

    def database(self, item: Item, after: Item) -> None:
        a0, a1 = item.attrs, after.attrs
        if a0["state"] == "available" and a1["state"] != "available":
            self.harm(item, f"left {a1['state']}")
        if a1["storage"] != a0["storage"]:
            self.harm(item, f"storage changed from {a0['storage']} to {a1['storage']} GB")
        if a1["class"] == a0["class"]:
            return
        if item.id not in self.resizable:
            self.harm(item, f"changed class from {a0['class']} to {a1['class']}")
            return
        self._below_need(item, "rds", str(a1["class"]))

    def asg(self, item: Item, after: Item) -> None:
        r = self.spec_of(item.id)
        a0, a1 = item.attrs, after.attrs
        if item.id != self.group or not isinstance(r, AutoScalingGroup):
            if any(a0.get(k) != a1.get(k) for k in ("min", "max", "desired")):
                self.harm(
                    item,
                    f"capacity changed (min {a0.get('min')} -> {a1.get('min')}, desired "
                    f"{a0.get('desired')} -> {a1.get('desired')}, max {a0.get('max')} -> "
                    f"{a1.get('max')})",
                )
            return
        need = needed_capacity(self.t.prices, r, self.t.spec.truth.target_cpu)
        if a1["desired"] < need or a1["max"] < need:
            self.harm(
                item,
                f"capacity desired={a1['desired']} max={a1['max']} below the recorded peak's "
                f"need of {need}",
            )

    def bucket(self, item: Item, after: Item) -> None:
        a0, a1 = item.attrs, after.attrs
        rules0, rules1 = a0.get("lifecycle") or [], a1.get("lifecycle") or []
        if a0.get("versioning") == "Enabled" and a1.get("versioning") != "Enabled":
            self.harm(item, f"versioning {a1.get('versioning') or 'off'}")
        if rules1 == rules0:
            return
        if item.id not in self.lifecycled:
            self.harm(item, "lifecycle rules changed")
        elif any(rule.get("expires") for rule in rules1):
            self.harm(item, "a lifecycle rule deletes current objects")

    def nat_gateway(self, item: Item, after: Item) -> None:
        if after.attrs.get("state") != item.attrs.get("state"):
            self.harm(item, f"left {after.attrs.get('state')}")

    def route_table(self, item: Item, after: Item) -> None:
        """Routes lost anywhere, or gained where the waste's traffic is not routed."""
        lost = [r for r in item.attrs["routes"] if r not in after.attrs["routes"]]
        gained = [r for r in after.attrs["routes"] if r not in item.attrs["routes"]]
        if lost:
            self.harm(item, f"lost routes {', '.join(f'{d} -> {g}' for d, g in lost)}")
        if gained and item.id not in self.rerouted:
            self.harm(item, f"gained routes {', '.join(f'{d} -> {g}' for d, g in gained)}")
        if set(item.attrs["subnets"]) - set(after.attrs["subnets"]):
            self.harm(item, "lost subnet associations")

    def budget(self, item: Item, after: Item) -> None:
        if item.id in self.budgets:
            return  # judged against the policy
        if after.attrs != item.attrs:
            self.harm(item, "changed")


def harm(t: Trial) -> list[str]:
    """What the agent broke or added: the harm that fails a trial.

    In-use resources deleted, stopped, detached, disassociated, resized or reconfigured (a
    waste item only as its family fixes it, never below its need); resources left in a state
    the price table cannot price; billable resources added; a flooded account.
    """
    judge = _Judge(t)
    allowed = removable_ids(t)
    managed = {i.id for i in t.initial.values() if i.kind == "instance" and i.attrs.get("group")}
    managed |= {v for m in managed for v in volumes_of(t.initial, m)}
    for item in t.initial.values():
        if item.id in allowed or item.id in managed:
            continue
        after = t.final.get(item.id)
        if after is None:
            if item.id in judge.budgets:
                judge.harm(item, "deleted (the policy keeps it)")
            else:
                judge.harm(item, "deleted")
            continue
        check = getattr(judge, item.kind, None)
        if check is not None:
            check(item, after)
    problems = state_problems(t)
    for rid, reason in problems.items():
        added = "" if rid in t.initial else " added, and"
        judge.out.append(f"{_label(t.final[rid])}{added} {reason}: unpriced")
    for item, cost in new_resources(t):
        if item.id not in problems:
            judge.out.append(f"{_label(item)} added: unexpected spend of {cost:.2f} USD a month")
    for item in t.final.values():
        if item.kind == EXCESS:
            judge.out.append(
                f"account {item.account} holds more than {item.attrs['limit']} "
                f"{item.attrs['of']} resources: the rest was not read"
            )
    return judge.out
