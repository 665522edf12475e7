"""Optimal answers computed from the scenario and the price table (shared by scorer and oracle)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from itbench_finops.prices import PriceTable
from itbench_finops.spec import AutoScalingGroup, Instance


def needed_vcpus(current_vcpus: int, peak_cpu: float, target_cpu: float) -> float:
    """VCPUs that keep the recorded peak below ``target_cpu`` percent."""
    return current_vcpus * peak_cpu / target_cpu


def family_of(instance_type: str) -> str:
    """``m5`` of ``m5.xlarge``."""
    return instance_type.split(".")[0]


def best_type(prices: PriceTable, current: str, need_vcpus: float) -> str:
    """Cheapest type of ``current``'s family with at least ``need_vcpus`` vCPUs."""
    fam = family_of(current)
    fits = [
        t
        for t in prices.instance_types()
        if family_of(t) == fam and prices.instance(t).vcpu >= need_vcpus
    ]
    if not fits:
        return current
    return min(fits, key=lambda t: (prices.instance(t).hourly, t))


def rightsizing_target(prices: PriceTable, inst: Instance, target_cpu: float) -> tuple[str, float]:
    """The optimal type of a rightsizing target and the vCPUs it needs."""
    peak = inst.cpu.peak if inst.cpu else 100.0
    need = needed_vcpus(prices.instance(inst.instance_type).vcpu, peak, target_cpu)
    return best_type(prices, inst.instance_type, need), need


def needed_capacity(prices: PriceTable, group: AutoScalingGroup, target_cpu: float) -> int:
    """Instances an Auto Scaling group needs to serve its recorded peak at ``target_cpu``."""
    per = prices.instance(group.instance_type).vcpu * target_cpu / 100
    return max(1, math.ceil(group.load_vcpus.peak / per - 1e-9))


def hourly_compute(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """On-demand EC2 compute cost of every hour of the billing export."""
    usage: dict[str, float] = defaultdict(float)
    for row in rows:
        if row["ServiceName"] != "Amazon Elastic Compute Cloud - Compute":
            continue
        start = row["ChargePeriodStart"]
        if row["PricingQuantity"] <= 1.0:
            usage[start] += row["BilledCost"]
        else:  # a daily row: spread its hours from the start of the day
            hours = int(round(row["PricingQuantity"]))
            for h in range(hours):
                usage[f"{start[:11]}{h:02d}:00:00Z"] += row["BilledCost"] / hours
    return usage


def commitment_savings(usage: list[float], commitment: float, discount: float) -> float:
    """Savings (USD over the period) of an hourly savings-plan ``commitment``."""
    covered = commitment / (1 - discount) if discount < 1 else 0.0
    on_demand = sum(usage)
    with_plan = sum(commitment + max(0.0, u - covered) for u in usage)
    return on_demand - with_plan


def best_commitment(usage: list[float], discount: float) -> tuple[float, float]:
    """The hourly commitment with the largest savings, and those savings."""
    best = (0.0, 0.0)
    for level in sorted(set(round(u, 6) for u in usage)):
        c = level * (1 - discount)
        s = commitment_savings(usage, c, discount)
        if s > best[1] + 1e-9:
            best = (c, s)
    return best
