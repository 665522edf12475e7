"""The oracle: solves each family from ground truth, acting only through the agent's tools."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

from itbench import TaskView, Toolbox, ToolError
from itbench_finops.optimum import (
    best_commitment,
    hourly_compute,
    needed_capacity,
    rightsizing_target,
    volume_iops_need,
    volume_throughput_need,
)
from itbench_finops.prices import load_prices
from itbench_finops.seed import S3_SERVICE, budget_document, data_device, notifications_document
from itbench_finops.server import MANAGEMENT_ACCOUNT
from itbench_finops.spec import (
    AutoScalingGroup,
    Bucket,
    Database,
    FinOpsSpec,
    FinOpsSubmission,
    Instance,
    Resource,
)
from itbench_finops.timeline import start_date


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
    if r.kind == "nat_gateway":
        # DescribeNatGateways filters by id, VPC, subnet and state only: match the tag here.
        nats = _d(toolbox, "ec2", "DescribeNatGateways", acct)["NatGateways"]
        return str(
            next(
                n["NatGatewayId"]
                for n in nats
                if n.get("State") == "available"
                and {"Key": "Name", "Value": r.name} in n.get("Tags", [])
            )
        )
    return r.name


def solve(spec: FinOpsSpec, task: TaskView, toolbox: Toolbox) -> FinOpsSubmission:
    """Solve ``spec`` and return the report."""
    truth = spec.truth
    if not truth.incident:
        explained = [resource_id(toolbox, spec.resource(n)) for n in truth.explained]
        return FinOpsSubmission(incident=False, explained_by=explained, notes="nothing to fix")
    if spec.family in ("commitment", "anomaly", "forecast"):
        return {"commitment": _commitment, "anomaly": _anomaly, "forecast": _anomaly}[spec.family](
            spec, toolbox, task
        )
    return {
        "idle": _idle,
        "rightsizing": _rightsizing,
        "storage": _storage,
        "transfer": _transfer,
        "budget": _budget,
        "autoscaling": _autoscaling,
        "allocation": _allocation,
    }[spec.family](spec, toolbox)


def _anomaly(spec: FinOpsSpec, toolbox: Toolbox, task: TaskView) -> FinOpsSubmission:
    from itbench_finops.scoring import RESOURCE_TYPES

    t = spec.truth
    r = spec.resource(t.resource or "")
    end = date.fromisoformat(task.context["billing_export"]["period_end"])
    return FinOpsSubmission(
        account_id=t.account or MANAGEMENT_ACCOUNT,
        service=load_prices().service_name(t.service or ""),
        resource_id=resource_id(toolbox, r),
        resource_type=RESOURCE_TYPES[r.kind],
        cause=t.cause,
        start_date=start_date(spec, end, r.name),
    )


def _nat_route_table(toolbox: Toolbox, r: Resource, nat_id: str) -> dict[str, Any]:
    tables = _d(toolbox, "ec2", "DescribeRouteTables", r.account)["RouteTables"]
    return next(
        t for t in tables if any(x.get("NatGatewayId") == nat_id for x in t.get("Routes", []))
    )


def _idle(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    for name in spec.truth.waste:
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
        elif r.kind == "nat_gateway":
            nat = _d(toolbox, "ec2", "DescribeNatGateways", acct, NatGatewayIds=[rid])
            table = _nat_route_table(toolbox, r, rid)
            _a(
                toolbox,
                "ec2",
                "DeleteRoute",
                acct,
                RouteTableId=table["RouteTableId"],
                DestinationCidrBlock="0.0.0.0/0",
            )
            _a(toolbox, "ec2", "DeleteNatGateway", acct, NatGatewayId=rid)
            for address in nat["NatGateways"][0]["NatGatewayAddresses"]:
                _a(
                    toolbox,
                    "ec2",
                    "DisassociateAddress",
                    acct,
                    AssociationId=address["AssociationId"],
                )
                _a(toolbox, "ec2", "ReleaseAddress", acct, AllocationId=address["AllocationId"])
    return FinOpsSubmission(notes=f"removed {len(spec.truth.waste)} idle resources")


def _rightsizing(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    prices = load_prices()
    recs = []
    for name in spec.truth.waste:
        r = spec.resource(name)
        assert isinstance(r, Instance | Database)
        best, _, _ = rightsizing_target(prices, r, spec.truth)
        rid = resource_id(toolbox, r)
        recs.append({"resource_id": rid, "recommended_type": best})
        if spec.truth.mode == "recommend":
            continue
        acct = r.account
        if isinstance(r, Database):
            _a(
                toolbox,
                "rds",
                "ModifyDBInstance",
                acct,
                DBInstanceIdentifier=rid,
                DBInstanceClass=best,
                ApplyImmediately=True,
            )
            continue
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


def _storage(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    truth = spec.truth
    for name in truth.waste:
        r = spec.resource(name)
        if isinstance(r, Bucket):
            rule: dict[str, Any] = {
                "ID": "cold-data",
                "Status": "Enabled",
                "Filter": {"Prefix": ""},
                "Transitions": [
                    {"Days": truth.transition_days, "StorageClass": truth.storage_class}
                ],
            }
            if r.versions_gb:
                rule["NoncurrentVersionExpiration"] = {"NoncurrentDays": truth.noncurrent_days}
            _a(
                toolbox,
                "s3",
                "PutBucketLifecycleConfiguration",
                r.account,
                Bucket=r.name,
                LifecycleConfiguration={"Rules": [rule]},
            )
            continue
        assert isinstance(r, Instance)
        rid = resource_id(toolbox, r)
        inst = _d(toolbox, "ec2", "DescribeInstances", r.account, InstanceIds=[rid])
        mappings = inst["Reservations"][0]["Instances"][0]["BlockDeviceMappings"]
        by_device = {m["DeviceName"]: m["Ebs"]["VolumeId"] for m in mappings}
        for i, v in enumerate(r.volumes):
            if v.volume_type != "gp2":
                continue
            _a(
                toolbox,
                "ec2",
                "ModifyVolume",
                r.account,
                VolumeId=by_device[data_device(i)],
                VolumeType="gp3",
                Iops=volume_iops_need(v),
                Throughput=volume_throughput_need(v),
            )
    return FinOpsSubmission(notes=f"fixed {len(truth.waste)} storage items")


def _transfer(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    for name in spec.truth.waste:
        r = spec.resource(name)
        rid = resource_id(toolbox, r)
        table = _nat_route_table(toolbox, r, rid)
        _a(
            toolbox,
            "ec2",
            "CreateVpcEndpoint",
            r.account,
            VpcEndpointType="Gateway",
            VpcId=table["VpcId"],
            ServiceName=S3_SERVICE,
            RouteTableIds=[table["RouteTableId"]],
        )
    return FinOpsSubmission(notes=f"routed S3 traffic of {len(spec.truth.waste)} subnets")


def _budget(spec: FinOpsSpec, toolbox: Toolbox) -> FinOpsSubmission:
    for want in spec.truth.budgets:
        _a(toolbox, "budgets", "DeleteBudget", AccountId=MANAGEMENT_ACCOUNT, BudgetName=want.name)
        _a(
            toolbox,
            "budgets",
            "CreateBudget",
            AccountId=MANAGEMENT_ACCOUNT,
            Budget=budget_document(want),
            NotificationsWithSubscribers=notifications_document(want),
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
    if r.kind in ("instance", "volume", "snapshot", "address", "nat_gateway"):
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
    from itbench_finops.scoring import OWNER_TAG, allocate

    for name, owner in spec.truth.owners.items():
        r = spec.resource(name)
        _tag(toolbox, r, resource_id(toolbox, r), OWNER_TAG, owner)
    rows = toolbox.call(
        "billing_query", group_by=["ResourceName", f"Tags.{OWNER_TAG}"], limit=100000
    )
    costs = [
        {
            "ResourceName": row["ResourceName"],
            "Tags": json.dumps({OWNER_TAG: row[f"Tags.{OWNER_TAG}"]}),
            "BilledCost": row["cost"],
        }
        for row in rows
    ]
    return FinOpsSubmission(allocations=allocate(costs, spec.truth.owners, spec.truth.shared))


def _commitment(spec: FinOpsSpec, toolbox: Toolbox, task: TaskView) -> FinOpsSubmission:
    if spec.truth.plan == "reserved":
        recs = []
        for name in spec.truth.waste:
            r = spec.resource(name)
            assert isinstance(r, Instance)
            recs.append(
                {"resource_id": resource_id(toolbox, r), "recommended_type": r.instance_type}
            )
        return FinOpsSubmission.model_validate({"recommendations": recs})
    rows = toolbox.call(
        "billing_query",
        group_by=["ServiceName", "ResourceName"],
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
        if r["ResourceName"] not in spec.truth.exclude
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
