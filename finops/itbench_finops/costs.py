"""The monthly cost of a resource in its current state, from the shipped price table.

The scorer prices the initial and the final state with these functions (savings), and the
environment checks that every seeded resource can be priced. Usage the API does not show (a
bucket's size and traffic, a NAT gateway's processed data) comes from the scenario.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from itbench_finops.prices import PriceTable
from itbench_finops.server import REGION
from itbench_finops.spec import Bucket, FinOpsSpec, NatGateway
from itbench_finops.state import NETWORK_KINDS, Item

#: Kinds the state reader finds but the price table cannot price (none is ever seeded).
UNPRICED_KINDS = frozenset(kind for kind, *_ in NETWORK_KINDS)
#: Kinds that cost nothing by themselves.
FREE_KINDS = frozenset({"asg", "budget", "route_table", "gateway_endpoint", "db_cluster"})
#: Largest size or rate the cost model takes at face value (far beyond any AWS limit).
_MAX_QUANTITY = 1e12
#: Days in a billing month, for usage given per day.
DAYS_PER_MONTH = 30


def quantity(value: Any) -> float | None:
    """``value`` as a size, rate or count the cost model can use, or None.

    None for what no real resource has (negative, not a number, beyond any AWS limit), which
    agent-made state can hold all the same: moto stores the sizes and types it is sent.
    """
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(number) or number < 0 or number > _MAX_QUANTITY:
        return None
    return number


@dataclass(frozen=True)
class Cost:
    """The monthly cost of one resource, and why the price table could not price it.

    When ``unpriced`` is set, ``monthly`` is a stand-in: the dearest entry of the table for a
    type it lacks, nothing for a quantity no real resource has (the scorer never counts such a
    resource below what it cost at the start, and counts it as harm).
    """

    monthly: float
    unpriced: str | None = None


@dataclass(frozen=True)
class Usage:
    """What pricing needs besides the resource as the API shows it.

    Attributes:
        spec: The scenario (buckets' sizes and traffic, NAT gateways' processed data).
        names: Resource id -> the scenario's name of it (the seeded resources).
        offloaded: NAT gateways whose S3 traffic a gateway endpoint carries instead.
    """

    spec: FinOpsSpec | None = None
    names: Mapping[str, str] = field(default_factory=dict)
    offloaded: frozenset[str] = frozenset()

    def resource(self, rid: str) -> Any:
        """The scenario's resource seeded as ``rid`` (by its id, never its tags), or None."""
        if self.spec is None:
            return None
        name = self.names.get(rid, rid)
        return next((r for r in self.spec.resources if r.name == name), None)


def bucket_month(r: Bucket, prices: PriceTable, lifecycle: list[dict[str, Any]]) -> float:
    """Monthly cost of a bucket: storage in the class its rules move it to, versions, traffic.

    A whole-bucket rule that transitions current objects puts the bucket's size in the
    cheapest class it names; a rule expiring noncurrent versions removes their cost.
    """
    classes = [
        c
        for rule in lifecycle
        if rule.get("prefix") == ""
        for c, days in (rule.get("transitions") or {}).items()
        if days is not None
    ]
    rate = min([prices.s3_class_month(c) for c in classes], default=prices.s3_month)
    versions_kept = not any(
        rule.get("prefix") == "" and rule.get("noncurrent_days") is not None for rule in lifecycle
    )
    reads = (r.reads.mean * 24 * DAYS_PER_MONTH * prices.s3_get) if r.reads else 0.0
    return (
        r.size_gb * rate
        + (r.versions_gb * prices.s3_month if versions_kept else 0.0)
        + r.egress_gb_day * DAYS_PER_MONTH * prices.transfer_gb
        + reads
    )


def nat_month(r: NatGateway | None, prices: PriceTable, offloaded: bool) -> float:
    """Monthly cost of a NAT gateway: its hours and the data it processes."""
    hours = prices.nat_hour * prices.hours_per_month
    if r is None:
        return hours
    share = 1 - r.s3_share if offloaded and r.s3_region == REGION else 1.0
    return hours + r.gb_day * share * DAYS_PER_MONTH * prices.nat_gb


def item_cost(item: Item, prices: PriceTable, usage: Usage | None = None) -> Cost:
    """Monthly on-demand cost of one resource in its current state; never raises."""
    usage = usage or Usage()
    a = item.attrs
    h = prices.hours_per_month
    problems: list[str] = []

    def amount(key: str, what: str) -> float:
        q = quantity(a.get(key, 0))
        if q is None:
            problems.append(f"has {what} {str(a.get(key))[:40]}, which no real resource has")
            return 0.0
        return q

    def sized(table: str, name: str, what: str) -> float:
        found = prices.find_sized(table, name)
        if found is None:
            problems.append(
                f"has {what} {str(name)[:40]!r}, which the price table lacks (priced as its dearest)"
            )
            return prices.dearest_sized(table).hourly
        return found.hourly

    def rate(table: str, name: str, what: str) -> float:
        found = prices.find_rate(table, name)
        if found is None:
            problems.append(
                f"has {what} {str(name)[:40]!r}, which the price table lacks (priced as its dearest)"
            )
            return prices.dearest_rate(table)
        return found

    monthly = 0.0
    if item.kind == "instance":
        hourly = sized("ec2", a.get("type", ""), "instance type")
        monthly = hourly * h if a.get("state") in ("running", "pending") else 0.0
    elif item.kind == "volume":
        vtype = a.get("volume_type", "")
        per_gb = rate("ebs_gb_month", vtype, "volume type")
        size = amount("size", "size (GB)")
        iops = amount("iops", "IOPS")
        throughput = amount("throughput", "throughput (MB/s)")
        if prices.find_rate("ebs_gb_month", vtype) is None:
            extra = iops * float(prices.raw["ebs_iops_month"])
        else:
            extra = prices.volume_extras(vtype, iops, throughput)
        monthly = per_gb * size + extra
    elif item.kind == "snapshot":
        monthly = prices.snapshot_month(amount("size", "size (GB)"))
    elif item.kind == "address":
        monthly = prices.public_ip_hour * h
    elif item.kind == "load_balancer":
        monthly = rate("load_balancer_hour", a.get("lb_type", ""), "load balancer type") * h
    elif item.kind == "database":
        hourly = sized("rds", a.get("class", ""), "database class")
        monthly = prices.rds_storage_month * amount("storage", "storage (GB)")
        if a.get("state") not in ("stopped", "stopping", "deleting"):
            monthly += hourly * h
    elif item.kind == "nat_gateway":
        r = usage.resource(item.id)
        monthly = nat_month(
            r if isinstance(r, NatGateway) else None, prices, item.id in usage.offloaded
        )
    elif item.kind in UNPRICED_KINDS:
        problems.append(f"is a {item.kind.replace('_', ' ')}, which the price table does not price")
    elif item.kind == "db_cluster" and a.get("engine_mode") == "serverless":
        problems.append("is a serverless database cluster, which the price table does not price")
    elif item.kind == "bucket":
        r = usage.resource(item.id)
        if isinstance(r, Bucket):
            monthly = bucket_month(r, prices, a.get("lifecycle") or [])
    return Cost(monthly, "; ".join(problems) or None)


def monthly_cost(item: Item, prices: PriceTable, usage: Usage | None = None) -> float:
    """Monthly on-demand cost of one resource in its current state (see :func:`item_cost`)."""
    return item_cost(item, prices, usage).monthly
