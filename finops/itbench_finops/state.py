"""Reads the account's actual state through the AWS API: the basis of billing and scoring."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from itbench_finops.aws import Clients
from itbench_finops.server import MANAGEMENT_ACCOUNT


@dataclass
class Item:
    """One billable or scorable resource as the API shows it.

    Attributes:
        kind: instance, volume, snapshot, address, load_balancer, database, bucket, asg, budget.
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


def _tagmap(tags: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags or []}


def read_state(clients: Clients, accounts: list[str]) -> dict[str, Item]:
    """Every resource of the given accounts (plus the main one), by id."""
    items: dict[str, Item] = {}
    for account in dict.fromkeys([MANAGEMENT_ACCOUNT, *accounts]):
        for item in _account_items(clients, account):
            items[item.id] = item
    for item in _budgets(clients):
        items[item.id] = item
    return items


def _account_items(clients: Clients, account: str) -> list[Item]:
    out: list[Item] = []
    ec2 = clients.client("ec2", account)
    for res in ec2.describe_instances()["Reservations"]:
        for i in res["Instances"]:
            state = i["State"]["Name"]
            if state in ("terminated", "shutting-down"):
                continue
            tags = _tagmap(i.get("Tags"))
            out.append(
                Item(
                    "instance",
                    i["InstanceId"],
                    tags.get("Name", i["InstanceId"]),
                    account,
                    {
                        "type": i["InstanceType"],
                        "state": state,
                        "group": tags.get("aws:autoscaling:groupName"),
                    },
                    tags,
                )
            )
    for v in ec2.describe_volumes()["Volumes"]:
        tags = _tagmap(v.get("Tags"))
        attached = [
            a["InstanceId"] for a in v.get("Attachments", []) if a.get("State") != "detached"
        ]
        out.append(
            Item(
                "volume",
                v["VolumeId"],
                tags.get("Name", v["VolumeId"]),
                account,
                {
                    "size": v["Size"],
                    "volume_type": v["VolumeType"],
                    "iops": v.get("Iops", 0) or 0,
                    "instance": attached[0] if attached else None,
                },
                tags,
            )
        )
    images = ec2.describe_images(Owners=["self"])["Images"]
    used = {
        m["Ebs"]["SnapshotId"]
        for img in images
        for m in img.get("BlockDeviceMappings", [])
        if "Ebs" in m and m["Ebs"].get("SnapshotId")
    }
    for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]:
        tags = _tagmap(s.get("Tags"))
        out.append(
            Item(
                "snapshot",
                s["SnapshotId"],
                tags.get("Name", s["SnapshotId"]),
                account,
                {
                    "size": s["VolumeSize"],
                    "volume": s.get("VolumeId"),
                    "image": s["SnapshotId"] in used,
                },
                tags,
            )
        )
    for a in ec2.describe_addresses()["Addresses"]:
        tags = _tagmap(a.get("Tags"))
        out.append(
            Item(
                "address",
                a["AllocationId"],
                tags.get("Name", a["AllocationId"]),
                account,
                {"instance": a.get("InstanceId") or None, "ip": a.get("PublicIp")},
                tags,
            )
        )
    elb = clients.client("elbv2", account)
    for lb in elb.describe_load_balancers()["LoadBalancers"]:
        arn = lb["LoadBalancerArn"]
        targets = 0
        for tg in elb.describe_target_groups(LoadBalancerArn=arn)["TargetGroups"]:
            health = elb.describe_target_health(TargetGroupArn=tg["TargetGroupArn"])
            targets += len(health["TargetHealthDescriptions"])
        tag_desc = elb.describe_tags(ResourceArns=[arn])["TagDescriptions"]
        tags = _tagmap(tag_desc[0]["Tags"] if tag_desc else [])
        out.append(
            Item(
                "load_balancer",
                arn,
                lb["LoadBalancerName"],
                account,
                {"lb_type": lb.get("Type", "application"), "targets": targets},
                tags,
            )
        )
    rds = clients.client("rds", account)
    for db in rds.describe_db_instances()["DBInstances"]:
        out.append(
            Item(
                "database",
                db["DBInstanceIdentifier"],
                db["DBInstanceIdentifier"],
                account,
                {
                    "class": db["DBInstanceClass"],
                    "state": db["DBInstanceStatus"],
                    "storage": db["AllocatedStorage"],
                },
                _tagmap(db.get("TagList")),
            )
        )
    s3 = clients.client("s3", account)
    for b in s3.list_buckets().get("Buckets", []):
        try:
            tags = _tagmap(s3.get_bucket_tagging(Bucket=b["Name"])["TagSet"])
        except Exception:  # a bucket without tags answers NoSuchTagSet
            tags = {}
        out.append(Item("bucket", b["Name"], b["Name"], account, {}, tags))
    asg = clients.client("autoscaling", account)
    for g in asg.describe_auto_scaling_groups()["AutoScalingGroups"]:
        lt = g.get("LaunchTemplate") or {}
        out.append(
            Item(
                "asg",
                g["AutoScalingGroupName"],
                g["AutoScalingGroupName"],
                account,
                {
                    "min": g["MinSize"],
                    "max": g["MaxSize"],
                    "desired": g["DesiredCapacity"],
                    "template": lt.get("LaunchTemplateName"),
                },
                {t["Key"]: t["Value"] for t in g.get("Tags", [])},
            )
        )
    return out


def _amount(budget: dict[str, Any]) -> float:
    """The budget's limit; NaN when an update left it without one (it then matches nothing)."""
    try:
        return float(budget["BudgetLimit"]["Amount"])
    except (KeyError, TypeError, ValueError):
        return float("nan")


def _threshold(note: dict[str, Any]) -> float:
    try:
        return float(note["Threshold"])
    except (KeyError, TypeError, ValueError):
        return float("nan")


def _budgets(clients: Clients) -> list[Item]:
    """Every budget of the main account.

    The endpoint's ``UpdateBudget`` and ``UpdateNotification`` store what the caller sent, so
    fields may be missing: they read as absent values (which match no policy), never as a
    crash of the reader.
    """
    budgets = clients.client("budgets")
    out = []
    for b in budgets.describe_budgets(AccountId=MANAGEMENT_ACCOUNT).get("Budgets", []):
        name = b.get("BudgetName", "")
        notes = budgets.describe_notifications_for_budget(
            AccountId=MANAGEMENT_ACCOUNT, BudgetName=name
        ).get("Notifications", [])
        out.append(
            Item(
                "budget",
                f"budget:{name}",
                name,
                MANAGEMENT_ACCOUNT,
                {
                    "amount": _amount(b),
                    "time_unit": b.get("TimeUnit"),
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
    return out
