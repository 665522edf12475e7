"""Billing: the FOCUS-format usage history of the account.

The export, Cost Explorer (:mod:`itbench_finops.cost_explorer`) and the scorer's prices
(:mod:`itbench_finops.costs`) use the shipped price table, so they agree to the cent.
"""

from __future__ import annotations

import csv
import io
import json
import zlib
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from itbench_finops.prices import PriceTable
from itbench_finops.spec import (
    Bucket,
    Database,
    FinOpsSpec,
    Instance,
    NatGateway,
    Resource,
    Snapshot,
    Volume,
)
from itbench_finops.state import Item

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
_ZONAL = {"Instance", "Volume", "NatGateway"}

_CATEGORY = {
    "ec2_compute": "Compute",
    "ec2_other": "Storage",
    "elb": "Networking",
    "rds": "Databases",
    "s3": "Storage",
}


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
    list_price: float | None = None
    commitment: str = ""
    zone: str = ""


def _active(days: int, k: int, launched: int | None) -> bool:
    return launched is None or days - k <= launched


def _business_hours_of(day: date) -> int:
    return 12 if day.weekday() < 5 else 0


def _spiked(
    base: float, spike: float, spike_days: int, days: int, k: int, ramp: list[float]
) -> float:
    """Usage on day ``k``: the base, plus the spike on its days (its ramp on the first ones)."""
    if days - k > spike_days:
        return base
    j = spike_days - (days - k)  # 0 on the spike's first day
    return base + (ramp[j] if j < len(ramp) else spike)


#: A storage day: storage is priced per GB-month and one day is 1/30.4 of a month.
GB_DAY = 1 / 30.4


class _Lines:
    """The usage lines of one state, built resource by resource."""

    def __init__(self, spec: FinOpsSpec, names: dict[str, str], prices: PriceTable, start: date):
        self.spec = spec
        self.names = names
        self.prices = prices
        self.start = start
        self.days = spec.billing_days
        self.by_name: dict[str, Resource] = {r.name: r for r in spec.resources}
        self.out: list[BillItem] = []

    def resource(self, rid: str) -> Resource | None:
        return self.by_name.get(self.names.get(rid, ""))

    def active(self, launched: int | None) -> list[bool]:
        return [_active(self.days, k, launched) for k in range(self.days)]

    def spiked(self, r: Instance | Bucket | NatGateway, base: float, on: list[bool]) -> list[float]:
        """Daily usage ``base`` plus ``r``'s spike on its last days, while ``on``."""
        spike = r.spike_gb_day
        return [
            _spiked(base, spike, r.spike_days, self.days, k, r.spike_ramp) if a else 0.0
            for k, a in enumerate(on)
        ]

    def add(
        self,
        item: Item,
        usage: tuple[str, str, str, str, float],
        quantities: list[float],
        **extra: Any,
    ) -> None:
        """One usage line: (service, resource type, SKU, unit, unit price) and the quantities."""
        if not any(quantities):
            return
        service, rtype, sku, unit, price = usage
        tags = {k: v for k, v in item.tags.items() if not k.startswith("aws:")}
        self.out.append(
            BillItem(
                resource_id=item.id,
                name=item.name,
                account=item.account,
                tags=tags,
                service=service,
                resource_type=rtype,
                sku=sku,
                unit=unit,
                unit_price=price,
                quantities=quantities,
                **extra,
            )
        )

    def instance(self, item: Item) -> None:
        r = self.resource(item.id)
        inst = r if isinstance(r, Instance) else None
        group = item.attrs.get("group")
        if inst is None and group is None:
            return
        launched = inst.launched_days_ago if inst else None
        cur = item.attrs["type"]
        prev = inst.previous_type if inst else None
        changed = inst.changed_days_ago if inst else None
        stopped = inst.stopped_days_ago if inst else None
        business = inst.schedule == "business_hours" if inst else False
        stopped_all = item.attrs["state"] == "stopped" and stopped is None
        q_cur = [0.0] * self.days
        q_prev = [0.0] * self.days
        for k, on in enumerate(self.active(launched)):
            ago = self.days - k
            if not on or stopped_all or (stopped is not None and ago <= stopped):
                continue
            day = self.start + timedelta(days=k)
            hours = float(_business_hours_of(day)) if business else 24.0
            if prev and changed is not None and ago > changed:
                q_prev[k] = hours
            else:
                q_cur[k] = hours
        zone = inst.zone if inst else ""
        for typ, q in ((cur, q_cur), (prev, q_prev)):
            if not typ:
                continue
            price = self.prices.instance(typ).hourly
            reserved = bool(inst and inst.reserved)
            rate = price * (1 - self.prices.reserved_discount) if reserved else price
            self.add(
                item,
                ("ec2_compute", "Instance", f"BoxUsage:{typ}", "Hours", rate),
                q,
                list_price=price,
                commitment=(
                    f"arn:aws:ec2:{REGION}:{item.account}:reserved-instances/"
                    f"{zlib.crc32(f'{item.account}/{typ}'.encode()):010d}"
                    if reserved
                    else ""
                ),
                business_hours=business,
                zone=zone,
            )
        if inst is not None and (inst.cross_az_gb_day or inst.spike_gb_day):
            self.add(
                item,
                (
                    "ec2_other",
                    "Instance",
                    "DataTransfer-Regional-Bytes",
                    "GB",
                    self.prices.inter_az_gb,
                ),
                self.spiked(inst, inst.cross_az_gb_day, self.active(launched)),
                zone=zone,
            )

    def volume(self, item: Item) -> None:
        r = self.resource(item.id)
        parent = self.by_name.get(self.names.get(item.attrs.get("instance") or "", ""))
        if isinstance(r, Volume):
            launched: int | None = r.created_days_ago
        elif isinstance(parent, Instance):
            launched = parent.launched_days_ago
        else:
            launched = None
        size = item.attrs["size"]
        month = self.prices.volume_month(
            item.attrs["volume_type"],
            size,
            item.attrs.get("iops", 0),
            item.attrs.get("throughput", 0),
        )
        self.add(
            item,
            (
                "ec2_other",
                "Volume",
                f"EBS:VolumeUsage.{item.attrs['volume_type']}",
                "GB-Mo",
                month / size,
            ),
            [GB_DAY * size if on else 0.0 for on in self.active(launched)],
            zone=parent.zone if isinstance(parent, Instance) else "us-east-1a",
        )

    def snapshot(self, item: Item) -> None:
        r = self.resource(item.id)
        launched = r.created_days_ago if isinstance(r, Snapshot) else None
        size = item.attrs["size"]
        self.add(
            item,
            ("ec2_other", "Snapshot", "EBS:SnapshotUsage", "GB-Mo", self.prices.snapshot_month(1)),
            [GB_DAY * size if on else 0.0 for on in self.active(launched)],
        )

    def address(self, item: Item) -> None:
        r = self.resource(item.id)
        launched = r.launched_days_ago if r is not None else None
        associated = item.attrs["instance"] or item.attrs.get("eni")
        self.add(
            item,
            (
                "ec2_other",
                "ElasticIP",
                "PublicIPv4:InUseAddress" if associated else "PublicIPv4:IdleAddress",
                "Hours",
                self.prices.public_ip_hour,
            ),
            [24.0 if on else 0.0 for on in self.active(launched)],
        )

    def load_balancer(self, item: Item) -> None:
        r = self.resource(item.id)
        launched = r.launched_days_ago if r is not None else None
        self.add(
            item,
            (
                "elb",
                "LoadBalancer",
                "LoadBalancerUsage",
                "Hours",
                self.prices.load_balancer_hour(item.attrs["lb_type"]),
            ),
            [24.0 if on else 0.0 for on in self.active(launched)],
        )

    def database(self, item: Item) -> None:
        r = self.resource(item.id)
        launched = r.launched_days_ago if isinstance(r, Database) else None
        running = item.attrs["state"] not in ("stopped", "stopping")
        cls = item.attrs["class"]
        self.add(
            item,
            (
                "rds",
                "DBInstance",
                f"InstanceUsage:{cls}",
                "Hours",
                self.prices.database(cls).hourly,
            ),
            [24.0 if running and on else 0.0 for on in self.active(launched)],
        )
        self.add(
            item,
            ("rds", "DBStorage", "RDS:GP2-Storage", "GB-Mo", self.prices.rds_storage_month),
            [GB_DAY * item.attrs["storage"] if on else 0.0 for on in self.active(launched)],
        )

    def bucket(self, item: Item) -> None:
        r = self.resource(item.id) or self.by_name.get(item.id)
        if not isinstance(r, Bucket):
            return
        on = self.active(r.launched_days_ago)
        stored = r.size_gb + r.versions_gb
        self.add(
            item,
            ("s3", "Bucket", "S3:TimedStorage-ByteHrs", "GB-Mo", self.prices.s3_month),
            [GB_DAY * stored if a else 0.0 for a in on],
        )
        if r.reads is not None:
            self.add(
                item,
                ("s3", "Bucket", "S3:Requests-Tier2", "Requests", self.prices.s3_get),
                [r.reads.mean * 24 if a else 0.0 for a in on],
            )
        self.add(
            item,
            ("s3", "Bucket", "S3:DataTransfer-Out-Bytes", "GB", self.prices.transfer_gb),
            self.spiked(r, r.egress_gb_day, on),
        )

    def nat_gateway(self, item: Item) -> None:
        r = self.resource(item.id)
        nat = r if isinstance(r, NatGateway) else None
        on = self.active(nat.launched_days_ago if nat else None)
        self.add(
            item,
            ("ec2_other", "NatGateway", "NatGateway-Hours", "Hours", self.prices.nat_hour),
            [24.0 if a else 0.0 for a in on],
            zone="us-east-1a",
        )
        if nat is not None:
            self.add(
                item,
                ("ec2_other", "NatGateway", "NatGateway-Bytes", "GB", self.prices.nat_gb),
                self.spiked(nat, nat.gb_day, on),
                zone="us-east-1a",
            )


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
    lines = _Lines(spec, names, prices, start)
    for item in items.values():
        handler = getattr(lines, item.kind, None)
        if handler is not None and item.kind in BILLED_KINDS:
            handler(item)
    return lines.out


#: Kinds the export bills.
BILLED_KINDS = frozenset(
    {
        "instance",
        "volume",
        "snapshot",
        "address",
        "load_balancer",
        "database",
        "bucket",
        "nat_gateway",
    }
)
#: The region every row is in.
REGION = "us-east-1"


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
        list_price = line.list_price if line.list_price is not None else line.unit_price
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
            "AvailabilityZone": (line.zone or zone) if line.resource_type in _ZONAL else "",
            "ResourceId": line.resource_id,
            "ResourceName": line.name,
            "ResourceType": line.resource_type,
            "SkuId": line.sku,
            "SkuPriceId": f"{line.sku}:{region}:{'Reserved' if line.commitment else 'OnDemand'}",
            "PricingCategory": "Committed" if line.commitment else "Standard",
            "PricingUnit": line.unit,
            "ListUnitPrice": list_price,
            "ContractedUnitPrice": line.unit_price,
            "BillingCurrency": "USD",
            "ChargeClass": "",
            "ChargeFrequency": "Usage-Based",
            "CommitmentDiscountCategory": "Usage" if line.commitment else "",
            "CommitmentDiscountId": line.commitment,
            "CommitmentDiscountName": line.commitment.rsplit("/", 1)[-1] if line.commitment else "",
            "CommitmentDiscountStatus": "Used" if line.commitment else "",
            "CommitmentDiscountType": "Reserved Instance" if line.commitment else "",
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
                    ListCost=round(qty * list_price, 10),
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
