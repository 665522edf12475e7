"""Billing: monthly cost of a state, and the FOCUS-format usage history of the account.

Both use the shipped price table, so the billing export, Cost Explorer and the savings score
agree to the cent.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from itbench_finops.prices import PriceTable
from itbench_finops.spec import Bucket, Database, FinOpsSpec, Instance, Resource, Snapshot, Volume
from itbench_finops.state import NETWORK_KINDS, Item

#: FOCUS 1.0 columns of the export, in order.
FOCUS_COLUMNS = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)

#: Resource types that live in one availability zone.
_ZONAL = {"Instance", "Volume"}

_CATEGORY = {
    "ec2_compute": "Compute",
    "ec2_other": "Storage",
    "elb": "Networking",
    "rds": "Databases",
    "s3": "Storage",
}


#: Kinds the state reader finds but the price table cannot price (none is ever seeded).
UNPRICED_KINDS = frozenset(kind for kind, *_ in NETWORK_KINDS)
#: Largest size or rate the cost model takes at face value (far beyond any AWS limit).
_MAX_QUANTITY = 1e12


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


def item_cost(item: Item, prices: PriceTable, spec: FinOpsSpec | None = None) -> Cost:
    """Monthly on-demand cost of one resource in its current state; never raises."""
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
        provisioned = vtype in ("io1", "io2") or prices.find_rate("ebs_gb_month", vtype) is None
        extra = iops * float(prices.raw["ebs_iops_month"]) if provisioned else 0.0
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
    elif item.kind in UNPRICED_KINDS:
        problems.append(f"is a {item.kind.replace('_', ' ')}, which the price table does not price")
    elif item.kind == "db_cluster" and a.get("engine_mode") == "serverless":
        problems.append("is a serverless database cluster, which the price table does not price")
    elif item.kind == "bucket" and spec is not None:
        for r in spec.resources:
            if isinstance(r, Bucket) and r.name == item.id:
                monthly = r.size_gb * prices.s3_month + r.egress_gb_day * 30 * prices.transfer_gb
    return Cost(monthly, "; ".join(problems) or None)


def monthly_cost(item: Item, prices: PriceTable, spec: FinOpsSpec | None = None) -> float:
    """Monthly on-demand cost of one resource in its current state (see :func:`item_cost`)."""
    return item_cost(item, prices, spec).monthly


@dataclass
class BillItem:
    """One priced usage line of one resource: a SKU and its quantity on each day.

    ``quantities[k]`` is the usage on day ``k`` of the period (hours, GB-months, GB).
    """

    resource_id: str
    name: str
    account: str
    service: str
    resource_type: str
    sku: str
    unit: str
    unit_price: float
    quantities: list[float]
    tags: dict[str, str] = field(default_factory=dict)
    business_hours: bool = False


def _active(days: int, k: int, launched: int | None) -> bool:
    return launched is None or days - k <= launched


def _business_hours_of(day: date) -> int:
    return 12 if day.weekday() < 5 else 0


def bill_items(
    spec: FinOpsSpec,
    items: dict[str, Item],
    names: dict[str, str],
    prices: PriceTable,
    start: date,
) -> list[BillItem]:
    """The usage lines of the seeded state over the spec's billing period.

    Args:
        spec: The scenario (its resources carry the usage history: launches, stops, changes).
        items: The state right after seeding, by id.
        names: Resource id -> spec resource name, for the resources seeded by name.
        prices: The price table.
        start: First day of the period.
    """
    days = spec.billing_days
    by_name: dict[str, Resource] = {r.name: r for r in spec.resources}
    out: list[BillItem] = []
    gb_day = 1 / 30.4  # storage is priced per GB-month; one day is 1/30.4 of a month
    for item in items.values():
        r = by_name.get(names.get(item.id, ""))
        parent = by_name.get(names.get(item.attrs.get("instance") or "", ""))
        group = item.attrs.get("group") if item.kind == "instance" else None
        tags = {k: v for k, v in item.tags.items() if not k.startswith("aws:")}
        base: dict[str, Any] = dict(
            resource_id=item.id, name=item.name, account=item.account, tags=tags
        )
        if item.kind == "instance":
            inst = r if isinstance(r, Instance) else None
            launched: int | None = inst.launched_days_ago if inst else None
            if inst is None and group is None:
                continue
            cur = item.attrs["type"]
            prev = inst.previous_type if inst else None
            changed = inst.changed_days_ago if inst else None
            stopped = inst.stopped_days_ago if inst else None
            business = inst.schedule == "business_hours" if inst else False
            stopped_all = item.attrs["state"] == "stopped" and stopped is None
            q_cur = [0.0] * days
            q_prev = [0.0] * days
            for k in range(days):
                ago = days - k
                if not _active(days, k, launched) or stopped_all:
                    continue
                if stopped is not None and ago <= stopped:
                    continue
                hours = float(_business_hours_of(start + timedelta(days=k))) if business else 24.0
                if prev and changed is not None and ago > changed:
                    q_prev[k] = hours
                else:
                    q_cur[k] = hours
            for typ, q in ((cur, q_cur), (prev, q_prev)):
                if typ and any(q):
                    out.append(
                        BillItem(
                            **base,
                            service="ec2_compute",
                            resource_type="Instance",
                            sku=f"BoxUsage:{typ}",
                            unit="Hours",
                            unit_price=prices.instance(typ).hourly,
                            quantities=q,
                            business_hours=business,
                        )
                    )
        elif item.kind == "volume":
            if isinstance(r, Volume):
                launched = r.created_days_ago
            elif isinstance(parent, Instance):
                launched = parent.launched_days_ago
            else:
                launched = None
            month = prices.volume_month(
                item.attrs["volume_type"], item.attrs["size"], item.attrs.get("iops", 0)
            )
            q = [
                gb_day * item.attrs["size"] if _active(days, k, launched) else 0.0
                for k in range(days)
            ]
            out.append(
                BillItem(
                    **base,
                    service="ec2_other",
                    resource_type="Volume",
                    sku=f"EBS:VolumeUsage.{item.attrs['volume_type']}",
                    unit="GB-Mo",
                    unit_price=month / item.attrs["size"],
                    quantities=q,
                )
            )
        elif item.kind == "snapshot":
            launched = r.created_days_ago if isinstance(r, Snapshot) else None
            size = item.attrs["size"]
            q = [gb_day * size if _active(days, k, launched) else 0.0 for k in range(days)]
            out.append(
                BillItem(
                    **base,
                    service="ec2_other",
                    resource_type="Snapshot",
                    sku="EBS:SnapshotUsage",
                    unit="GB-Mo",
                    unit_price=prices.snapshot_month(1),
                    quantities=q,
                )
            )
        elif item.kind in ("address", "load_balancer"):
            launched = r.launched_days_ago if r is not None else None
            q = [24.0 if _active(days, k, launched) else 0.0 for k in range(days)]
            if item.kind == "address":
                svc, rtype, sku, price = (
                    "ec2_other",
                    "ElasticIP",
                    "PublicIPv4:InUseAddress",
                    prices.public_ip_hour,
                )
                if not item.attrs["instance"]:
                    sku = "PublicIPv4:IdleAddress"
            else:
                svc, rtype, sku = "elb", "LoadBalancer", "LoadBalancerUsage"
                price = prices.load_balancer_hour(item.attrs["lb_type"])
            out.append(
                BillItem(
                    **base,
                    service=svc,
                    resource_type=rtype,
                    sku=sku,
                    unit="Hours",
                    unit_price=price,
                    quantities=q,
                )
            )
        elif item.kind == "database":
            launched = r.launched_days_ago if isinstance(r, Database) else None
            running = item.attrs["state"] not in ("stopped", "stopping")
            q = [24.0 if running and _active(days, k, launched) else 0.0 for k in range(days)]
            cls = item.attrs["class"]
            if any(q):
                out.append(
                    BillItem(
                        **base,
                        service="rds",
                        resource_type="DBInstance",
                        sku=f"InstanceUsage:{cls}",
                        unit="Hours",
                        unit_price=prices.database(cls).hourly,
                        quantities=q,
                    )
                )
            qs = [
                gb_day * item.attrs["storage"] if _active(days, k, launched) else 0.0
                for k in range(days)
            ]
            out.append(
                BillItem(
                    **base,
                    service="rds",
                    resource_type="DBStorage",
                    sku="RDS:GP2-Storage",
                    unit="GB-Mo",
                    unit_price=prices.rds_storage_month,
                    quantities=qs,
                )
            )
        elif item.kind == "bucket":
            if not isinstance(r, Bucket):
                continue
            launched = r.launched_days_ago
            qs = [gb_day * r.size_gb if _active(days, k, launched) else 0.0 for k in range(days)]
            out.append(
                BillItem(
                    **base,
                    service="s3",
                    resource_type="Bucket",
                    sku="S3:TimedStorage",
                    unit="GB-Mo",
                    unit_price=prices.s3_month,
                    quantities=qs,
                )
            )
            qe = [
                (r.egress_gb_day + (r.spike_gb_day if days - k <= r.spike_days else 0.0))
                if _active(days, k, launched)
                else 0.0
                for k in range(days)
            ]
            if any(qe):
                out.append(
                    BillItem(
                        **base,
                        service="s3",
                        resource_type="Bucket",
                        sku="S3:DataTransfer-Out-Bytes",
                        unit="GB",
                        unit_price=prices.transfer_gb,
                        quantities=qe,
                    )
                )
    return out


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _month_bounds(d: date) -> tuple[str, str]:
    first = d.replace(day=1)
    nxt = (first + timedelta(days=32)).replace(day=1)
    return f"{first.isoformat()}T00:00:00Z", f"{nxt.isoformat()}T00:00:00Z"


def focus_rows(
    lines: list[BillItem],
    prices: PriceTable,
    start: date,
    payer: str,
    account_names: dict[str, str],
    *,
    hourly: bool = False,
) -> list[dict[str, Any]]:
    """FOCUS rows of the usage lines, one per line and day (or hour of compute, if ``hourly``).

    Args:
        lines: Usage lines from :func:`bill_items`.
        prices: The price table (service names).
        start: First day of the period.
        payer: The billing (management) account id.
        account_names: Account id -> name.
        hourly: One row per running hour for instance usage.
    """
    rows: list[dict[str, Any]] = []
    service_names = {k: prices.service_name(k) for k in _CATEGORY}
    periods = _Periods(datetime(start.year, start.month, start.day, tzinfo=UTC))
    payer_name = account_names.get(payer, "management")
    region = str(prices.raw["region"])
    region_name = str(prices.raw["region_name"])
    zone = f"{region}a"
    for line in lines:
        tags = json.dumps(line.tags, sort_keys=True) if line.tags else "{}"
        fixed = {
            "BillingAccountId": payer,
            "BillingAccountName": payer_name,
            "SubAccountId": line.account,
            "SubAccountName": account_names.get(line.account, line.account),
            "ChargeCategory": "Usage",
            "ChargeDescription": f"{line.sku} {line.unit}",
            "ProviderName": "AWS",
            "PublisherName": "AWS",
            "InvoiceIssuerName": "AWS",
            "ServiceName": service_names[line.service],
            "ServiceCategory": _CATEGORY[line.service],
            "RegionId": region,
            "RegionName": region_name,
            "AvailabilityZone": zone if line.resource_type in _ZONAL else "",
            "ResourceId": line.resource_id,
            "ResourceName": line.name,
            "ResourceType": line.resource_type,
            "SkuId": line.sku,
            "SkuPriceId": f"{line.sku}:{region}:OnDemand",
            "PricingCategory": "Standard",
            "PricingUnit": line.unit,
            "ListUnitPrice": line.unit_price,
            "ContractedUnitPrice": line.unit_price,
            "BillingCurrency": "USD",
            "ChargeClass": "",
            "ChargeFrequency": "Usage-Based",
            "CommitmentDiscountCategory": "",
            "CommitmentDiscountId": "",
            "CommitmentDiscountName": "",
            "CommitmentDiscountStatus": "",
            "CommitmentDiscountType": "",
            "ConsumedUnit": line.unit,
            "Tags": tags,
        }
        per_hour = hourly and line.unit == "Hours" and line.service == "ec2_compute"
        first = 8 if line.business_hours else 0
        for k, q in enumerate(line.quantities):
            if q <= 0:
                continue
            bp_start, bp_end, day_start, day_end = periods.day(k)
            if per_hour:
                spans = [(*periods.hour(k, first + h), 1.0) for h in range(int(q))]
            else:
                spans = [(day_start, day_end, q)]
            for start_iso, end_iso, qty in spans:
                cost = round(qty * line.unit_price, 10)
                row = dict(fixed)
                row.update(
                    BillingPeriodStart=bp_start,
                    BillingPeriodEnd=bp_end,
                    ChargePeriodStart=start_iso,
                    ChargePeriodEnd=end_iso,
                    PricingQuantity=round(qty, 6),
                    ConsumedQuantity=round(qty, 6),
                    ListCost=cost,
                    ContractedCost=cost,
                    BilledCost=cost,
                    EffectiveCost=cost,
                )
                rows.append(row)
    return rows


class _Periods:
    """FOCUS timestamps of the days and hours of a period, formatted once each."""

    def __init__(self, day0: datetime) -> None:
        self.day0 = day0
        self._days: dict[int, tuple[str, str, str, str]] = {}
        self._hours: dict[tuple[int, int], tuple[str, str]] = {}

    def day(self, k: int) -> tuple[str, str, str, str]:
        """Billing period start and end, charge period start and end of day ``k``."""
        got = self._days.get(k)
        if got is None:
            day = self.day0 + timedelta(days=k)
            got = (*_month_bounds(day.date()), _iso(day), _iso(day + timedelta(days=1)))
            self._days[k] = got
        return got

    def hour(self, k: int, h: int) -> tuple[str, str]:
        """Charge period start and end of hour ``h`` of day ``k``."""
        got = self._hours.get((k, h))
        if got is None:
            t = self.day0 + timedelta(days=k, hours=h)
            got = (_iso(t), _iso(t + timedelta(hours=1)))
            self._hours[(k, h)] = got
        return got


def to_csv(rows: list[dict[str, Any]]) -> bytes:
    """The rows as a FOCUS CSV file."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(FOCUS_COLUMNS)
    writer.writerows([row[c] for c in FOCUS_COLUMNS] for row in rows)
    return buf.getvalue().encode()


def cost_explorer_result(rows: list[dict[str, Any]], start: date, days: int) -> dict[str, Any]:
    """Daily unblended cost by SERVICE, as ``GetCostAndUsage`` answers it."""
    by_day: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        by_day[row["ChargePeriodStart"][:10]][row["ServiceName"]] += row["BilledCost"]
    results = []
    for k in range(days):
        d = (start + timedelta(days=k)).isoformat()
        e = (start + timedelta(days=k + 1)).isoformat()
        groups = [
            {
                "Keys": [svc],
                "Metrics": {"UnblendedCost": {"Amount": f"{amt:.10f}", "Unit": "USD"}},
            }
            for svc, amt in sorted(by_day.get(d, {}).items())
        ]
        results.append(
            {
                "TimePeriod": {"Start": d, "End": e},
                "Total": {},
                "Groups": groups,
                "Estimated": False,
            }
        )
    return {
        "GroupDefinitions": [{"Type": "DIMENSION", "Key": "SERVICE"}],
        "ResultsByTime": results,
        "DimensionValueAttributes": [],
    }
