"""Reads the account's actual state through the AWS API: the basis of billing and scoring.

The reader is faithful and total: it reads every page of every listing, takes whatever values
the API shows (an instance type the price table lacks, a negative size, a tag without a value)
without judging them, and never stops on a field that agent-made state may leave out. Judging
is the scorer's: :mod:`itbench_finops.scoring` prices what it can and counts the rest as harm.

One bound: at most :data:`READ_LIMIT` resources of one kind are read per account. An account
holding more was flooded; the reader then records an ``excess`` item (which the scorer counts
as harm) instead of spending the judge's time on the rest.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from itbench_finops.aws import Clients
from itbench_finops.server import MANAGEMENT_ACCOUNT, REGION

#: Most resources of one kind read in one account (the scenarios hold a few dozen at most).
READ_LIMIT = 500
#: The ``kind`` of the item that stands for resources beyond :data:`READ_LIMIT`.
EXCESS = "excess"
#: Billable EC2 resources outside the price table: kind, listing, its key, the id field.
NETWORK_KINDS = (
    ("transit_gateway", "describe_transit_gateways", "TransitGateways", "TransitGatewayId"),
    ("vpn_connection", "describe_vpn_connections", "VpnConnections", "VpnConnectionId"),
    ("vpc_endpoint", "describe_vpc_endpoints", "VpcEndpoints", "VpcEndpointId"),
    ("dedicated_host", "describe_hosts", "Hosts", "HostId"),
)


@dataclass
class Item:
    """One billable or scorable resource as the API shows it.

    Attributes:
        kind: instance, volume, snapshot, address, load_balancer, database, db_cluster,
            bucket, asg, budget, nat_gateway, gateway_endpoint, route_table, one of
            :data:`NETWORK_KINDS`, or ``excess`` (more resources of ``attrs["of"]`` than the
            reader reads).
        id: Resource id (instance id, volume id, ARN, identifier, bucket name, ...).
        name: Name tag (or identifier when there is none).
        account: Owning account id.
        attrs: Kind-specific attributes (type, state, size, attachment, capacity, ...).
        tags: Resource tags.
    """

    kind: str
    id: str
    name: str
    account: str
    attrs: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


def _tagmap(tags: Any) -> dict[str, str]:
    """Tags as a mapping; a tag without a value (several APIs allow it) has the value ``""``."""
    out: dict[str, str] = {}
    for t in tags if isinstance(tags, list) else []:
        if isinstance(t, dict) and t.get("Key") is not None:
            out[str(t["Key"])] = str(t.get("Value") or "")
    return out


class _Reader:
    """The items of one account, each kind read up to :data:`READ_LIMIT`."""

    def __init__(self, clients: Clients, account: str) -> None:
        self.clients = clients
        self.account = account
        self.items: list[Item] = []

    def client(self, service: str) -> Any:
        return self.clients.client(service, self.account)

    def add(self, kind: str, rid: str, name: str, attrs: dict[str, Any], tags: Any) -> None:
        self.items.append(Item(kind, rid, name, self.account, attrs, _tagmap(tags)))

    def excess(self, kind: str) -> None:
        self.items.append(
            Item(
                EXCESS,
                f"{EXCESS}:{self.account}:{kind}",
                kind,
                self.account,
                {"of": kind, "limit": READ_LIMIT},
            )
        )

    def listing(
        self, service: str, operation: str, key: str, kind: str, **params: Any
    ) -> Iterator[dict[str, Any]]:
        """Every entry of a paginated listing, up to :data:`READ_LIMIT` (then an excess item)."""
        client = self.client(service)
        if client.can_paginate(operation):
            pages: Any = client.get_paginator(operation).paginate(**params)
        else:
            pages = [getattr(client, operation)(**params)]
        n = 0
        for page in pages:
            for entry in page.get(key) or []:
                if n >= READ_LIMIT:
                    self.excess(kind)
                    return
                n += 1
                yield entry

    def run(self, part: str) -> list[Item]:
        """The items of one part of the account (one of :data:`PARTS`)."""
        getattr(self, part)()
        return self.items

    def network(self) -> None:
        """Billable EC2 resources the scenarios never hold and the price table does not price.

        A gateway endpoint is free: it is read as a ``gateway_endpoint`` (with its service and
        route tables), the other endpoints as unpriced ``vpc_endpoint``.
        """
        for kind, operation, key, ident in NETWORK_KINDS:
            for r in self.listing("ec2", operation, key, kind):
                state = str(r.get("State") or r.get("state") or "")
                if state.lower() in ("deleted", "deleting", "failed", "released", "rejected"):
                    continue
                rid = str(r.get(ident, ""))
                tags = _tagmap(r.get("Tags"))
                attrs: dict[str, Any] = {"state": state}
                if kind == "vpc_endpoint" and r.get("VpcEndpointType") == "Gateway":
                    kind_of = "gateway_endpoint"
                    attrs.update(
                        service=str(r.get("ServiceName") or ""),
                        vpc=str(r.get("VpcId") or ""),
                        route_tables=sorted(str(t) for t in r.get("RouteTableIds") or []),
                    )
                else:
                    kind_of = kind
                self.add(kind_of, rid, tags.get("Name", rid), attrs, r.get("Tags"))

    def nat_gateways(self) -> None:
        for n in self.listing("ec2", "describe_nat_gateways", "NatGateways", "nat_gateway"):
            state = str(n.get("State") or "")
            if state in ("deleted", "deleting", "failed"):
                continue
            rid = str(n.get("NatGatewayId", ""))
            tags = _tagmap(n.get("Tags"))
            self.add(
                "nat_gateway",
                rid,
                tags.get("Name", rid),
                {
                    "state": state,
                    "vpc": str(n.get("VpcId") or ""),
                    "allocations": sorted(
                        str(a.get("AllocationId"))
                        for a in n.get("NatGatewayAddresses") or []
                        if a.get("AllocationId")
                    ),
                },
                n.get("Tags"),
            )

    def route_tables(self) -> None:
        for t in self.listing("ec2", "describe_route_tables", "RouteTables", "route_table"):
            rid = str(t.get("RouteTableId", ""))
            tags = _tagmap(t.get("Tags"))
            routes = sorted(
                (
                    str(r.get("DestinationCidrBlock") or r.get("DestinationPrefixListId") or ""),
                    str(r.get("NatGatewayId") or r.get("GatewayId") or r.get("InstanceId") or ""),
                )
                for r in t.get("Routes") or []
            )
            self.add(
                "route_table",
                rid,
                tags.get("Name", rid),
                {
                    "vpc": str(t.get("VpcId") or ""),
                    "routes": [list(r) for r in routes],
                    "subnets": sorted(
                        str(a.get("SubnetId"))
                        for a in t.get("Associations") or []
                        if a.get("SubnetId")
                    ),
                },
                t.get("Tags"),
            )

    def clusters(self) -> None:
        for c in self.listing("rds", "describe_db_clusters", "DBClusters", "db_cluster"):
            ident = c["DBClusterIdentifier"]
            self.add(
                "db_cluster",
                ident,
                ident,
                {
                    "engine_mode": str(c.get("EngineMode") or "provisioned"),
                    "members": sorted(
                        str(m.get("DBInstanceIdentifier", ""))
                        for m in c.get("DBClusterMembers") or []
                    ),
                },
                c.get("TagList"),
            )

    def instances(self) -> None:
        n = 0
        for res in self.listing("ec2", "describe_instances", "Reservations", "instance"):
            for i in res.get("Instances") or []:
                state = (i.get("State") or {}).get("Name", "")
                if state in ("terminated", "shutting-down"):
                    continue
                if n >= READ_LIMIT:
                    self.excess("instance")
                    return
                n += 1
                tags = _tagmap(i.get("Tags"))
                iid = i["InstanceId"]
                self.add(
                    "instance",
                    iid,
                    tags.get("Name", iid),
                    {
                        "type": str(i.get("InstanceType", "")),
                        "state": state,
                        "group": tags.get("aws:autoscaling:groupName"),
                    },
                    i.get("Tags"),
                )

    def volumes(self) -> None:
        for v in self.listing("ec2", "describe_volumes", "Volumes", "volume"):
            tags = _tagmap(v.get("Tags"))
            attached = [
                a.get("InstanceId")
                for a in v.get("Attachments") or []
                if a.get("State") != "detached" and a.get("InstanceId")
            ]
            self.add(
                "volume",
                v["VolumeId"],
                tags.get("Name", v["VolumeId"]),
                {
                    "size": v.get("Size", 0),
                    "volume_type": str(v.get("VolumeType", "")),
                    "iops": v.get("Iops", 0) or 0,
                    "throughput": v.get("Throughput", 0) or 0,
                    "instance": attached[0] if attached else None,
                },
                v.get("Tags"),
            )

    def snapshots(self) -> None:
        used: set[str] = set()
        for img in self.listing("ec2", "describe_images", "Images", "image", Owners=["self"]):
            for m in img.get("BlockDeviceMappings") or []:
                snap = (m.get("Ebs") or {}).get("SnapshotId")
                if snap:
                    used.add(snap)
        for s in self.listing(
            "ec2", "describe_snapshots", "Snapshots", "snapshot", OwnerIds=["self"]
        ):
            tags = _tagmap(s.get("Tags"))
            self.add(
                "snapshot",
                s["SnapshotId"],
                tags.get("Name", s["SnapshotId"]),
                {
                    "size": s.get("VolumeSize", 0),
                    "volume": s.get("VolumeId"),
                    "image": s["SnapshotId"] in used,
                },
                s.get("Tags"),
            )

    def addresses(self) -> None:
        for a in self.listing("ec2", "describe_addresses", "Addresses", "address"):
            # An address of the EC2-Classic domain has no allocation id: its IP names it.
            rid = a.get("AllocationId") or f"eip:{a.get('PublicIp', '')}"
            tags = _tagmap(a.get("Tags"))
            self.add(
                "address",
                rid,
                tags.get("Name", rid),
                {
                    "instance": a.get("InstanceId") or None,
                    "eni": a.get("NetworkInterfaceId") or None,
                    "ip": a.get("PublicIp"),
                },
                a.get("Tags"),
            )

    def load_balancers(self) -> None:
        lbs = list(
            self.listing("elbv2", "describe_load_balancers", "LoadBalancers", "load_balancer")
        )
        if not lbs:
            return
        elb = self.client("elbv2")
        arns = {lb["LoadBalancerArn"] for lb in lbs}
        targets = dict.fromkeys(arns, 0)
        for tg in self.listing("elbv2", "describe_target_groups", "TargetGroups", "target_group"):
            served = [a for a in tg.get("LoadBalancerArns") or [] if a in arns]
            if not served:
                continue
            health = elb.describe_target_health(TargetGroupArn=tg["TargetGroupArn"])
            count = len(health.get("TargetHealthDescriptions") or [])
            for arn in served:
                targets[arn] += count
        tags: dict[str, Any] = {}
        ordered = sorted(arns)
        for k in range(0, len(ordered), 20):
            for desc in elb.describe_tags(ResourceArns=ordered[k : k + 20]).get(
                "TagDescriptions", []
            ):
                tags[desc.get("ResourceArn", "")] = desc.get("Tags")
        for lb in lbs:
            arn = lb["LoadBalancerArn"]
            self.add(
                "load_balancer",
                arn,
                lb.get("LoadBalancerName", arn),
                {"lb_type": str(lb.get("Type") or "application"), "targets": targets[arn]},
                tags.get(arn),
            )

    def classic_load_balancers(self) -> None:
        lbs = list(
            self.listing("elb", "describe_load_balancers", "LoadBalancerDescriptions", "classic_lb")
        )
        if not lbs:
            return
        elb = self.client("elb")
        names = [lb["LoadBalancerName"] for lb in lbs]
        tags: dict[str, Any] = {}
        for k in range(0, len(names), 20):
            for desc in elb.describe_tags(LoadBalancerNames=names[k : k + 20]).get(
                "TagDescriptions", []
            ):
                tags[desc.get("LoadBalancerName", "")] = desc.get("Tags")
        for lb in lbs:
            name = lb["LoadBalancerName"]
            self.add(
                "load_balancer",
                f"arn:aws:elasticloadbalancing:{REGION}:{self.account}:loadbalancer/{name}",
                name,
                {"lb_type": "classic", "targets": len(lb.get("Instances") or [])},
                tags.get(name),
            )

    def databases(self) -> None:
        for db in self.listing("rds", "describe_db_instances", "DBInstances", "database"):
            ident = db["DBInstanceIdentifier"]
            self.add(
                "database",
                ident,
                ident,
                {
                    "class": str(db.get("DBInstanceClass", "")),
                    "state": db.get("DBInstanceStatus", ""),
                    "storage": db.get("AllocatedStorage", 0),
                },
                db.get("TagList"),
            )

    def buckets(self) -> None:
        s3 = self.client("s3")
        for b in self.listing("s3", "list_buckets", "Buckets", "bucket"):
            name = b["Name"]
            try:
                tags: Any = s3.get_bucket_tagging(Bucket=name)["TagSet"]
            except Exception:  # a bucket without tags answers NoSuchTagSet
                tags = []
            try:
                rules: Any = s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]
            except Exception:  # a bucket without rules answers NoSuchLifecycleConfiguration
                rules = []
            versioning = s3.get_bucket_versioning(Bucket=name).get("Status") or ""
            self.add(
                "bucket",
                name,
                name,
                {"lifecycle": lifecycle_of(rules), "versioning": str(versioning)},
                tags,
            )

    def groups(self) -> None:
        for g in self.listing(
            "autoscaling", "describe_auto_scaling_groups", "AutoScalingGroups", "asg"
        ):
            lt = g.get("LaunchTemplate") or {}
            name = g["AutoScalingGroupName"]
            self.add(
                "asg",
                name,
                name,
                {
                    "min": g.get("MinSize", 0),
                    "max": g.get("MaxSize", 0),
                    "desired": g.get("DesiredCapacity", 0),
                    "template": lt.get("LaunchTemplateName"),
                    "members": sorted(
                        str(i["InstanceId"])
                        for i in g.get("Instances") or []
                        if i.get("InstanceId")
                    ),
                },
                g.get("Tags"),
            )


#: The reader's parts of one account, read concurrently (each one reads its own listings).
PARTS = (
    "nat_gateways",
    "route_tables",
    "instances",
    "volumes",
    "snapshots",
    "addresses",
    "load_balancers",
    "classic_load_balancers",
    "databases",
    "clusters",
    "buckets",
    "groups",
    "network",
)
#: Concurrent reads of one state.
WORKERS = 8


def read_state(clients: Clients, accounts: list[str]) -> dict[str, Item]:
    """Every resource of the given accounts (plus the main one), by id.

    The parts of every account (and the budgets) are read concurrently; the result is in
    account and part order all the same.
    """
    tasks: list[Callable[[], list[Item]]] = [
        functools.partial(_Reader(clients, account).run, part)
        for account in dict.fromkeys([MANAGEMENT_ACCOUNT, *accounts])
        for part in PARTS
    ]
    tasks.append(functools.partial(budgets_of, clients))
    items: dict[str, Item] = {}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for part in [pool.submit(task) for task in tasks]:
            for item in part.result():
                items[item.id] = item
    return items


def _amount(budget: dict[str, Any]) -> float:
    """The budget's limit; NaN when an update left it without one (it then matches nothing)."""
    try:
        return float(budget["BudgetLimit"]["Amount"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return float("nan")


def _filters(budget: dict[str, Any]) -> dict[str, list[str]]:
    """The budget's cost filters, each with its sorted values (agent-made ones as text)."""
    raw = budget.get("CostFilters")
    if not isinstance(raw, dict):
        return {}
    return {
        str(k): sorted(str(v) for v in (vs if isinstance(vs, list) else [vs]))
        for k, vs in raw.items()
    }


def lifecycle_of(rules: Any) -> list[dict[str, Any]]:
    """The enabled lifecycle rules of a bucket, reduced to what the scorer judges.

    Each: ``prefix`` (the rule's filter, "" for the whole bucket; ``None`` when it filters on
    anything else), ``transitions`` (storage class -> days), ``expiration_days``,
    ``noncurrent_days`` and ``abort_days``; values an agent left malformed read as None.
    """
    out = []
    for r in rules if isinstance(rules, list) else []:
        if not isinstance(r, dict) or r.get("Status") != "Enabled":
            continue
        flt = r.get("Filter")
        if isinstance(flt, dict) and set(flt) - {"Prefix"}:
            prefix: str | None = None
        elif isinstance(flt, dict):
            prefix = str(flt.get("Prefix") or "")
        else:
            prefix = str(r.get("Prefix") or "")
        transitions = {
            str(t.get("StorageClass")): _int(t.get("Days"))
            for t in r.get("Transitions") or []
            if isinstance(t, dict)
        }
        expiration = r.get("Expiration") or {}
        noncurrent = r.get("NoncurrentVersionExpiration") or {}
        abort = r.get("AbortIncompleteMultipartUpload") or {}
        out.append(
            {
                "prefix": prefix,
                "transitions": transitions,
                "expiration_days": _int(expiration.get("Days")) if expiration else None,
                "expires": bool(expiration),
                "noncurrent_days": _int(noncurrent.get("NoncurrentDays")) if noncurrent else None,
                "abort_days": _int(abort.get("DaysAfterInitiation")) if abort else None,
            }
        )
    return out


def _int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number >= 0 else None


def _threshold(note: dict[str, Any]) -> float:
    try:
        return float(note["Threshold"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return float("nan")


def budgets_of(clients: Clients) -> list[Item]:
    """Every budget of the main account.

    The endpoint's ``UpdateBudget`` and ``UpdateNotification`` store what the caller sent, so
    fields may be missing: they read as absent values (which match no policy), never as a
    crash of the reader.
    """
    reader = _Reader(clients, MANAGEMENT_ACCOUNT)
    budgets = clients.client("budgets")
    for b in reader.listing(
        "budgets", "describe_budgets", "Budgets", "budget", AccountId=MANAGEMENT_ACCOUNT
    ):
        name = b.get("BudgetName", "")
        notes = list(
            reader.listing(
                "budgets",
                "describe_notifications_for_budget",
                "Notifications",
                "notification",
                AccountId=MANAGEMENT_ACCOUNT,
                BudgetName=name,
            )
        )
        reader.items.append(
            Item(
                "budget",
                f"budget:{name}",
                name,
                MANAGEMENT_ACCOUNT,
                {
                    "amount": _amount(b),
                    "time_unit": b.get("TimeUnit"),
                    "filters": _filters(b),
                    "notifications": [
                        {
                            "notification_type": n.get("NotificationType"),
                            "comparison": n.get("ComparisonOperator"),
                            "threshold": _threshold(n),
                            "threshold_type": n.get("ThresholdType", "PERCENTAGE"),
                            "subscribers": sorted(
                                str(s.get("Address", ""))
                                for s in budgets.describe_subscribers_for_notification(
                                    AccountId=MANAGEMENT_ACCOUNT,
                                    BudgetName=name,
                                    Notification=n,
                                ).get("Subscribers", [])
                            ),
                        }
                        for n in notes
                    ],
                },
            )
        )
    return reader.items
