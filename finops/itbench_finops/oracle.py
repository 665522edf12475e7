"""The oracle: solves each family from ground truth, acting only through the agent's tools."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

from itbench import TaskView, Toolbox, ToolError
from itbench_finops.optimum import (
    best_commitment,
    hourly_compute,
    needed_capacity,
    rightsizing_target,
)
from itbench_finops.prices import load_prices
from itbench_finops.seed import budget_document
from itbench_finops.server import MANAGEMENT_ACCOUNT
from itbench_finops.spec import (
    AutoScalingGroup,
    Budget,
    FinOpsSpec,
    FinOpsSubmission,
    Instance,
    Resource,
)


def _d(toolbox: Toolbox, service: str, op: str, account: str | None = None, **params: Any) -> Any:
    return toolbox.call(
        "aws_describe", service=service, operation=op, params=params, account_id=account
    )


def _a(toolbox: Toolbox, service: str, op: str, account: str | None = None, **params: Any) -> Any:
    return toolbox.call(
        "aws_call", service=service, operation=op, params=params, account_id=account
    )


def _by_name(name: str) -> list[dict[str, Any]]:
    return [{"Name": "tag:Name", "Values": [name]}]


def resource_id(toolbox: Toolbox, r: Resource) -> str:
    """Look a scenario resource up by its Name tag through the tools."""
    acct = r.account
    if r.kind == "instance":
        res = _d(
            toolbox,
            "ec2",
            "DescribeInstances",
            acct,
            Filters=[
                *_by_name(r.name),
                {
                    "Name": "instance-state-name",
                    "Values": ["running", "stopped", "pending", "stopping"],
                },
            ],
        )
        return str(res["Reservations"][0]["Instances"][0]["InstanceId"])
    if r.kind == "volume":
        return str(
            _d(toolbox, "ec2", "DescribeVolumes", acct, Filters=_by_name(r.name))["Volumes"][0][
                "VolumeId"
            ]
        )
    if r.kind == "snapshot":
        snaps = _d(
            toolbox, "ec2", "DescribeSnapshots", acct, OwnerIds=["self"], Filters=_by_name(r.name)
        )
        return str(snaps["Snapshots"][0]["SnapshotId"])
    if r.kind == "address":
        return str(
            _d(toolbox, "ec2", "DescribeAddresses", acct, Filters=_by_name(r.name))["Addresses"][0][
                "AllocationId"
            ]
        )
    if r.kind == "load_balancer":
        lbs = _d(toolbox, "elbv2", "DescribeLoadBalancers", acct, Names=[r.name])
        return str(lbs["LoadBalancers"][0]["LoadBalancerArn"])
    return r.name


def solve(spec: FinOpsSpec, task: TaskView, toolbox: Toolbox) -> FinOpsSubmission:
    """Solve ``spec`` and return the report."""
    truth = spec.truth
    if not truth.incident:
        return FinOpsSubmission(incident=False, notes="nothing to fix")
    if spec.family == "commitment":
        return _commitment(spec, toolbox, task)
    return {
        "anomaly": _anomaly,
        "idle": _idle,
        "rightsizing": _rightsizing,
        "budget": _budget,
        "autoscaling": _autoscaling,
        "allocation": _allocation,
    }[spec.family](spec, toolbox)


def _anomaly(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    from itbench_finops.scoring import RESOURCE_TYPES

    t = spec.truth
    r = spec.resource(t.resource or "")
    return FinOpsSubmission(
        account_id=t.account or MANAGEMENT_ACCOUNT,
        service=load_prices().service_name(t.service or ""),
        resource_id=resource_id(toolbox, r),
        resource_type=RESOURCE_TYPES[r.kind],
        cause=t.cause,
    )


def _idle(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    for name in spec.truth.removable:
        r = spec.resource(name)
        rid = resource_id(toolbox, r)
        acct = r.account
        if r.kind == "instance":
            vols = _d(
                toolbox,
                "ec2",
                "DescribeVolumes",
                acct,
                Filters=[{"Name": "attachment.instance-id", "Values": [rid]}],
            )
            _a(toolbox, "ec2", "TerminateInstances", acct, InstanceIds=[rid])
            left = {v["VolumeId"] for v in _d(toolbox, "ec2", "DescribeVolumes", acct)["Volumes"]}
            for v in vols["Volumes"]:
                if v["VolumeId"] in left:
                    _a(toolbox, "ec2", "DeleteVolume", acct, VolumeId=v["VolumeId"])
        elif r.kind == "volume":
            _a(toolbox, "ec2", "DeleteVolume", acct, VolumeId=rid)
        elif r.kind == "snapshot":
            _a(toolbox, "ec2", "DeleteSnapshot", acct, SnapshotId=rid)
        elif r.kind == "address":
            _a(toolbox, "ec2", "ReleaseAddress", acct, AllocationId=rid)
        elif r.kind == "load_balancer":
            _a(toolbox, "elbv2", "DeleteLoadBalancer", acct, LoadBalancerArn=rid)
        elif r.kind == "database":
            _a(
                toolbox,
                "rds",
                "DeleteDBInstance",
                acct,
                DBInstanceIdentifier=rid,
                SkipFinalSnapshot=True,
            )
    return FinOpsSubmission(notes=f"removed {len(spec.truth.removable)} idle resources")


def _rightsizing(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    prices = load_prices()
    recs = []
    for name in spec.truth.targets:
        inst = spec.resource(name)
        assert isinstance(inst, Instance)
        best, _ = rightsizing_target(prices, inst, spec.truth.target_cpu)
        rid = resource_id(toolbox, inst)
        recs.append({"resource_id": rid, "recommended_type": best})
        if spec.truth.mode == "apply":
            acct = inst.account
            _a(toolbox, "ec2", "StopInstances", acct, InstanceIds=[rid])
            _a(
                toolbox,
                "ec2",
                "ModifyInstanceAttribute",
                acct,
                InstanceId=rid,
                InstanceType={"Value": best},
            )
            _a(toolbox, "ec2", "StartInstances", acct, InstanceIds=[rid])
    return FinOpsSubmission.model_validate({"recommendations": recs})


def _budget(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    want = spec.truth.budget
    assert isinstance(want, Budget)
    _a(toolbox, "budgets", "DeleteBudget", AccountId=MANAGEMENT_ACCOUNT, BudgetName=want.name)
    _a(
        toolbox,
        "budgets",
        "CreateBudget",
        AccountId=MANAGEMENT_ACCOUNT,
        Budget=budget_document(want),
        NotificationsWithSubscribers=[
            {
                "Notification": {
                    "NotificationType": n.notification_type,
                    "ComparisonOperator": n.comparison,
                    "Threshold": n.threshold,
                    "ThresholdType": n.threshold_type,
                },
                "Subscribers": [{"SubscriptionType": "EMAIL", "Address": a} for a in n.subscribers],
            }
            for n in want.notifications
        ],
    )
    return FinOpsSubmission(cause=spec.truth.cause)


def _autoscaling(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    g = spec.resource(spec.truth.group or "")
    assert isinstance(g, AutoScalingGroup)
    need = needed_capacity(load_prices(), g, spec.truth.target_cpu)
    _a(
        toolbox,
        "autoscaling",
        "UpdateAutoScalingGroup",
        g.account,
        AutoScalingGroupName=g.name,
        MinSize=min(g.min_size, need),
        MaxSize=max(g.max_size, need),
        DesiredCapacity=need,
    )
    return FinOpsSubmission(notes=f"desired capacity {need}")


def _tag(toolbox: Toolbox, r: Resource, rid: str, key: str, value: str) -> None:
    acct = r.account
    if r.kind in ("instance", "volume", "snapshot", "address"):
        _a(toolbox, "ec2", "CreateTags", acct, Resources=[rid], Tags=[{"Key": key, "Value": value}])
    elif r.kind == "load_balancer":
        _a(
            toolbox,
            "elbv2",
            "AddTags",
            acct,
            ResourceArns=[rid],
            Tags=[{"Key": key, "Value": value}],
        )
    elif r.kind == "database":
        arn = _d(toolbox, "rds", "DescribeDBInstances", acct, DBInstanceIdentifier=rid)[
            "DBInstances"
        ][0]["DBInstanceArn"]
        _a(
            toolbox,
            "rds",
            "AddTagsToResource",
            acct,
            ResourceName=arn,
            Tags=[{"Key": key, "Value": value}],
        )
    elif r.kind == "bucket":
        current: list[dict[str, str]] = []
        with contextlib.suppress(ToolError):  # an untagged bucket answers NoSuchTagSet
            current = _d(toolbox, "s3", "GetBucketTagging", acct, Bucket=rid)["TagSet"]
        tags = [t for t in current if t["Key"] != key] + [{"Key": key, "Value": value}]
        _a(toolbox, "s3", "PutBucketTagging", acct, Bucket=rid, Tagging={"TagSet": tags})


def _allocation(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    from itbench_finops.scoring import OWNER_TAG

    for name, owner in spec.truth.owners.items():
        r = spec.resource(name)
        _tag(toolbox, r, resource_id(toolbox, r), OWNER_TAG, owner)
    rows = toolbox.call(
        "billing_query", group_by=["ResourceName", f"Tags.{OWNER_TAG}"], limit=100000
    )
    alloc: dict[str, float] = {}
    for row in rows:
        owner = row[f"Tags.{OWNER_TAG}"] or spec.truth.owners.get(
            row["ResourceName"], "unallocated"
        )
        alloc[owner] = alloc.get(owner, 0.0) + row["cost"]
    return FinOpsSubmission(allocations={k: round(v, 2) for k, v in alloc.items()})


def _commitment(spec: FinOpsSpec, toolbox: Toolbox, task: TaskView) -> FinOpsSubmission:
    rows = toolbox.call(
        "billing_query",
        group_by=["ServiceName"],
        filters={"ServiceName": load_prices().service_name("ec2_compute")},
        granularity="hourly",
        limit=100000,
    )
    by_hour = hourly_compute(
        {
            "ServiceName": r["ServiceName"],
            "ChargePeriodStart": r["period"],
            "PricingQuantity": 1.0,
            "BilledCost": r["cost"],
        }
        for r in rows
    )
    start = datetime.fromisoformat(task.context["billing_export"]["period_start"]).replace(
        tzinfo=UTC
    )
    hours = [
        (start + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for h in range(spec.billing_days * 24)
    ]
    usage = [by_hour.get(h, 0.0) for h in hours]
    best, _ = best_commitment(usage, load_prices().savings_plan_discount)
    return FinOpsSubmission(commitment_hourly=round(best, 4))
