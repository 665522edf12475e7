"""Optimal answers computed from the scenario and the price table (shared by scorer and oracle)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from itbench_finops.prices import GP3_IOPS, GP3_THROUGHPUT, PriceTable
from itbench_finops.spec import AttachedVolume, AutoScalingGroup, Database, Instance, Truth


def needed_vcpus(current_vcpus: float, peak_cpu: float, target_cpu: float) -> float:
    """VCPUs that keep the recorded peak below ``target_cpu`` percent."""
    return current_vcpus * peak_cpu / target_cpu


def family_of(instance_type: str) -> str:
    """``m5`` of ``m5.xlarge``, ``db.m5`` of ``db.m5.large``."""
    return instance_type.rsplit(".", 1)[0]


def _table(r: Instance | Database) -> str:
    return "ec2" if isinstance(r, Instance) else "rds"


def _type(r: Instance | Database) -> str:
    return r.instance_type if isinstance(r, Instance) else r.instance_class


def needs(prices: PriceTable, r: Instance | Database, truth: Truth) -> tuple[float, float]:
    """The vCPUs and memory (GiB) that keep ``r``'s recorded peaks under the targets.

    Without a profile a resource needs all it has.
    """
    have = prices.find_sized(_table(r), _type(r))
    if have is None:
        raise KeyError(f"no price for {_type(r)!r}")
    cpu = r.cpu.peak if r.cpu else truth.target_cpu
    memory = r.memory.peak if r.memory else 0.0
    return (
        needed_vcpus(have.vcpu, cpu, truth.target_cpu),
        have.memory_gib * memory / truth.target_memory,
    )


def best_type(
    prices: PriceTable,
    current: str,
    need_vcpus: float,
    need_memory: float = 0.0,
    table: str = "ec2",
) -> str:
    """Cheapest type of ``current``'s family with at least the needed vCPUs and memory."""
    fam = family_of(current)
    fits = []
    for t in prices.raw[table]:
        p = prices.find_sized(table, t)
        if (
            p is not None
            and family_of(t) == fam
            and p.vcpu >= need_vcpus - 1e-9
            and p.memory_gib >= need_memory - 1e-9
        ):
            fits.append((p.hourly, t))
    return min(fits)[1] if fits else current


def rightsizing_target(
    prices: PriceTable, r: Instance | Database, truth: Truth
) -> tuple[str, float, float]:
    """The optimal type of a rightsizing target and the vCPUs and memory it needs."""
    cpu, memory = needs(prices, r, truth)
    return best_type(prices, _type(r), cpu, memory, _table(r)), cpu, memory


def volume_iops_need(v: AttachedVolume) -> int:
    """The IOPS a volume must keep: its recorded peak (the gp3 baseline at least)."""
    peak = v.ops.peak if v.ops else 0.0
    return max(GP3_IOPS, math.ceil(peak - 1e-9))


def volume_throughput_need(v: AttachedVolume) -> int:
    """The MB/s a volume must keep: its recorded peak (the gp3 baseline at least)."""
    peak = v.mbps.peak if v.mbps else 0.0
    return max(GP3_THROUGHPUT, math.ceil(peak - 1e-9))


def _tenth_above(need: int) -> int:
    return -(-need * 11 // 10)  # integer ceiling: no float rounding at the bound


def iops_allowance(need: int) -> int:
    """The most IOPS a migrated volume may provision (a tenth above its need)."""
    return max(GP3_IOPS, _tenth_above(need))


def throughput_allowance(need: int) -> int:
    """The most MB/s a migrated volume may provision (a tenth above its need)."""
    return max(GP3_THROUGHPUT, _tenth_above(need))


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
