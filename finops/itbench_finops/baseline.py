"""A deterministic rule-based agent: utilization thresholds and attachment state.

It sees only the task view and tools. Its rules are the usual first-pass FinOps checks, so it
solves the plain cases and misses the look-alikes that need a closer reading of the policy.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from itbench import TaskView, Toolbox, ToolError
from itbench_finops.spec import FinOpsSubmission

#: Peak CPU (percent) under which an instance counts as over-provisioned.
LOW_CPU = 40.0


class _Agent:
    def __init__(self, task: TaskView, toolbox: Toolbox) -> None:
        self.task = task
        self.toolbox = toolbox
        self.goal = task.goal.lower()
        self.accounts = [a["account_id"] for a in task.context.get("accounts", [])] or [None]

    def d(self, service: str, op: str, account: str | None = None, **params: Any) -> Any:
        return self.toolbox.call(
            "aws_describe", service=service, operation=op, params=params, account_id=account
        )

    def a(self, service: str, op: str, account: str | None = None, **params: Any) -> Any:
        return self.toolbox.call(
            "aws_call", service=service, operation=op, params=params, account_id=account
        )

    def peak(
        self, namespace: str, metric: str, dim: str, value: str, account: str | None
    ) -> float | None:
        now = datetime.now(UTC)
        res = self.d(
            "cloudwatch",
            "GetMetricStatistics",
            account,
            Namespace=namespace,
            MetricName=metric,
            Dimensions=[{"Name": dim, "Value": value}],
            StartTime=(now - timedelta(days=31)).isoformat(),
            EndTime=(now + timedelta(hours=1)).isoformat(),
            Period=3600,
            Statistics=["Maximum"],
        )
        points = [p["Maximum"] for p in res.get("Datapoints", [])]
        return max(points) if points else None

    # --- strategies ---------------------------------------------------------------------

    def run(self) -> FinOpsSubmission | None:
        g = self.goal
        if "reserved instances" in g:
            return self.reserved()
        if "savings plan" in g or "commitment" in g:
            return self.commitment()
        if "allocat" in g:
            return self.allocation()
        if "budget alert" in g or "forecast" in g:
            return self.anomaly()
        if "budget" in g:
            return self.budget()
        if "auto scaling" in g:
            return self.autoscaling()
        if "rightsiz" in g or "over-provisioned" in g:
            return self.rightsizing()
        if "storage" in g:
            return self.storage()
        if "data transfer" in g:
            return self.transfer()
        if "idle" in g or "orphaned" in g:
            return self.idle()
        if "spike" in g or "anomal" in g or "spend went up" in g:
            return self.anomaly()
        return None

    def idle(self) -> FinOpsSubmission:
        changed = 0
        for acct in self.accounts:

            def ec2(op: str, acct: str | None = acct, **p: Any) -> Any:
                return self.d("ec2", op, acct, **p)

            instances = [
                i for r in ec2("DescribeInstances")["Reservations"] for i in r["Instances"]
            ]
            for inst in instances:
                if inst["State"]["Name"] == "stopped":
                    vols = [
                        m["Ebs"]["VolumeId"]
                        for m in inst.get("BlockDeviceMappings", [])
                        if "Ebs" in m
                    ]
                    self.a("ec2", "TerminateInstances", acct, InstanceIds=[inst["InstanceId"]])
                    left = {v["VolumeId"] for v in ec2("DescribeVolumes")["Volumes"]}
                    for v in vols:
                        if v in left:
                            self.a("ec2", "DeleteVolume", acct, VolumeId=v)
                    changed += 1
            volumes = ec2("DescribeVolumes")["Volumes"]
            for v in volumes:
                if v["State"] == "available":
                    self.a("ec2", "DeleteVolume", acct, VolumeId=v["VolumeId"])
                    changed += 1
            for addr in ec2("DescribeAddresses")["Addresses"]:
                if not addr.get("AssociationId") and not addr.get("InstanceId"):
                    self.a("ec2", "ReleaseAddress", acct, AllocationId=addr["AllocationId"])
                    changed += 1
            existing = {v["VolumeId"] for v in ec2("DescribeVolumes")["Volumes"]}
            for snap in ec2("DescribeSnapshots", OwnerIds=["self"])["Snapshots"]:
                if snap.get("VolumeId") not in existing:
                    try:
                        self.a("ec2", "DeleteSnapshot", acct, SnapshotId=snap["SnapshotId"])
                        changed += 1
                    except ToolError:
                        pass
            for lb in self.d("elbv2", "DescribeLoadBalancers", acct)["LoadBalancers"]:
                groups = self.d(
                    "elbv2", "DescribeTargetGroups", acct, LoadBalancerArn=lb["LoadBalancerArn"]
                )
                targets = sum(
                    len(
                        self.d(
                            "elbv2",
                            "DescribeTargetHealth",
                            acct,
                            TargetGroupArn=tg["TargetGroupArn"],
                        )["TargetHealthDescriptions"]
                    )
                    for tg in groups["TargetGroups"]
                )
                if targets == 0:
                    self.a(
                        "elbv2", "DeleteLoadBalancer", acct, LoadBalancerArn=lb["LoadBalancerArn"]
                    )
                    changed += 1
            for db in self.d("rds", "DescribeDBInstances", acct)["DBInstances"]:
                ident = db["DBInstanceIdentifier"]
                if (
                    self.peak("AWS/RDS", "DatabaseConnections", "DBInstanceIdentifier", ident, acct)
                    or 0
                ) == 0:
                    self.a(
                        "rds",
                        "DeleteDBInstance",
                        acct,
                        DBInstanceIdentifier=ident,
                        SkipFinalSnapshot=True,
                    )
                    changed += 1
        return FinOpsSubmission(incident=changed > 0, notes=f"{changed} changes")

    def _smaller(self, instance_type: str) -> str | None:
        prices = self.toolbox.call("price_list", section="ec2")
        fam = instance_type.split(".")[0]
        cur = prices[instance_type]["vcpu"]
        halves = [t for t, p in prices.items() if t.split(".")[0] == fam and p["vcpu"] == cur // 2]
        return halves[0] if halves else None

    def rightsizing(self) -> FinOpsSubmission:
        recommend_only = any(
            w in self.goal for w in ("do not change", "change nothing", "recommend")
        )
        recs = []
        for acct in self.accounts:
            res = self.d("ec2", "DescribeInstances", acct)["Reservations"]
            for inst in [i for r in res for i in r["Instances"]]:
                tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                if inst["State"]["Name"] != "running" or "aws:autoscaling:groupName" in tags:
                    continue
                peak = self.peak(
                    "AWS/EC2", "CPUUtilization", "InstanceId", inst["InstanceId"], acct
                )
                if peak is None or peak >= LOW_CPU:
                    continue
                smaller = self._smaller(inst["InstanceType"])
                if smaller is None:
                    continue
                iid = inst["InstanceId"]
                recs.append({"resource_id": iid, "recommended_type": smaller})
                if not recommend_only:
                    self.a("ec2", "StopInstances", acct, InstanceIds=[iid])
                    self.a(
                        "ec2",
                        "ModifyInstanceAttribute",
                        acct,
                        InstanceId=iid,
                        InstanceType={"Value": smaller},
                    )
                    self.a("ec2", "StartInstances", acct, InstanceIds=[iid])
        return FinOpsSubmission.model_validate({"incident": bool(recs), "recommendations": recs})

    def storage(self) -> FinOpsSubmission:
        """Every gp2 volume in use moves to gp3 (a common first-pass rule)."""
        changed = 0
        for acct in self.accounts:
            for v in self.d("ec2", "DescribeVolumes", acct)["Volumes"]:
                if v["VolumeType"] == "gp2" and v.get("Attachments"):
                    self.a("ec2", "ModifyVolume", acct, VolumeId=v["VolumeId"], VolumeType="gp3")
                    changed += 1
        return FinOpsSubmission(incident=changed > 0)

    def transfer(self) -> FinOpsSubmission:
        """Every private subnet behind a NAT gateway gets an S3 gateway endpoint."""
        changed = 0
        for acct in self.accounts:
            for t in self.d("ec2", "DescribeRouteTables", acct)["RouteTables"]:
                if any(r.get("NatGatewayId") for r in t.get("Routes", [])):
                    self.a(
                        "ec2",
                        "CreateVpcEndpoint",
                        acct,
                        VpcEndpointType="Gateway",
                        VpcId=t["VpcId"],
                        ServiceName="com.amazonaws.us-east-1.s3",
                        RouteTableIds=[t["RouteTableId"]],
                    )
                    changed += 1
        return FinOpsSubmission(incident=changed > 0)

    def reserved(self) -> FinOpsSubmission:
        """Every running instance is proposed for a reservation."""
        recs = [
            {"resource_id": i["InstanceId"], "recommended_type": i["InstanceType"]}
            for acct in self.accounts
            for r in self.d("ec2", "DescribeInstances", acct)["Reservations"]
            for i in r["Instances"]
            if i["State"]["Name"] == "running"
        ]
        return FinOpsSubmission.model_validate({"incident": bool(recs), "recommendations": recs})

    def budget(self) -> FinOpsSubmission:
        budgets = self.d("budgets", "DescribeBudgets", AccountId=self.task.context["account_id"])[
            "Budgets"
        ]
        for b in budgets:
            name = b["BudgetName"]
            notes = self.d(
                "budgets",
                "DescribeNotificationsForBudget",
                AccountId=self.task.context["account_id"],
                BudgetName=name,
            )["Notifications"]
            for n in notes:
                if (
                    n.get("ThresholdType", "PERCENTAGE") == "PERCENTAGE"
                    and float(n["Threshold"]) > 100
                ):
                    self.a(
                        "budgets",
                        "DeleteNotification",
                        AccountId=self.task.context["account_id"],
                        BudgetName=name,
                        Notification=n,
                    )
                    fixed = {**n, "Threshold": float(n["Threshold"]) / 10}
                    self.a(
                        "budgets",
                        "CreateNotification",
                        AccountId=self.task.context["account_id"],
                        BudgetName=name,
                        Notification=fixed,
                        Subscribers=[
                            {"SubscriptionType": "EMAIL", "Address": "finops@example.com"}
                        ],
                    )
                    return FinOpsSubmission(cause="threshold")
        return FinOpsSubmission(incident=False)

    def autoscaling(self) -> FinOpsSubmission:
        m = re.search(r"(\d+)\s*%", self.goal)
        target = float(m.group(1)) if m else 70.0
        groups = self.d("autoscaling", "DescribeAutoScalingGroups")["AutoScalingGroups"]
        changed = 0
        for g in groups:
            name = g["AutoScalingGroupName"]
            peak = self.peak("AWS/EC2", "CPUUtilization", "AutoScalingGroupName", name, None)
            if peak is None:
                continue
            need = max(1, math.ceil(g["DesiredCapacity"] * peak / target - 1e-9))
            if need < g["DesiredCapacity"]:
                self.a(
                    "autoscaling",
                    "UpdateAutoScalingGroup",
                    AutoScalingGroupName=name,
                    MinSize=min(g["MinSize"], need),
                    DesiredCapacity=need,
                )
                changed += 1
        return FinOpsSubmission(incident=changed > 0)

    def anomaly(self) -> FinOpsSubmission:
        rows = self.toolbox.call(
            "billing_query",
            group_by=["SubAccountId", "ServiceName", "ResourceId", "ResourceType", "SkuId"],
            granularity="daily",
            limit=1000,
        )
        days = sorted({r["period"] for r in rows})
        recent, before = set(days[-7:]), set(days[-14:-7])
        delta: dict[tuple[str, str, str], float] = {}
        types: dict[str, str] = {}
        skus_recent: dict[str, set[str]] = {}
        skus_before: dict[str, set[str]] = {}
        cost_before: dict[str, float] = {}
        for r in rows:
            key = (r["SubAccountId"], r["ServiceName"], r["ResourceId"])
            # A resource's first line names its main type (an instance before its storage).
            types.setdefault(r["ResourceId"], r["ResourceType"])
            if r["period"] in recent:
                delta[key] = delta.get(key, 0.0) + r["cost"]
                skus_recent.setdefault(r["ResourceId"], set()).add(r["SkuId"])
            elif r["period"] in before:
                delta[key] = delta.get(key, 0.0) - r["cost"]
                skus_before.setdefault(r["ResourceId"], set()).add(r["SkuId"])
                cost_before[r["ResourceId"]] = cost_before.get(r["ResourceId"], 0.0) + r["cost"]
        if not delta:
            return FinOpsSubmission(incident=False)
        account, service, rid = max(delta, key=lambda k: delta[k])
        if cost_before.get(rid, 0.0) == 0:
            cause = "new_resource"
        elif skus_recent.get(rid, set()) - skus_before.get(rid, set()):
            cause = "type_change"
        else:
            cause = "usage_spike"
        # The change began on the first day of the last week that cost more than the week before.
        before_daily = cost_before.get(rid, 0.0) / 7
        daily = {
            r["period"]: r["cost"] for r in rows if r["ResourceId"] == rid and r["period"] in recent
        }
        start = next((d for d in sorted(daily) if daily[d] > before_daily * 1.2), min(recent))
        return FinOpsSubmission(
            account_id=account,
            service=service,
            resource_id=rid,
            resource_type=types.get(rid),
            cause=cause,
            start_date=date.fromisoformat(start),
        )

    def allocation(self) -> FinOpsSubmission:
        rules = re.findall(r"`([a-z0-9-]+)`[^`]*?team `([a-z0-9-]+)`", self.task.goal)
        owner_by_prefix = dict(rules)

        def owner_of(name: str) -> str | None:
            for prefix, team in owner_by_prefix.items():
                if name.startswith(prefix):
                    return str(team)
            return None

        for acct in self.accounts:
            res = self.d("ec2", "DescribeInstances", acct)["Reservations"]
            for inst in [i for r in res for i in r["Instances"]]:
                tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                owner = owner_of(tags.get("Name", ""))
                if "team" not in tags and owner:
                    self.a(
                        "ec2",
                        "CreateTags",
                        acct,
                        Resources=[inst["InstanceId"]],
                        Tags=[{"Key": "team", "Value": owner}],
                    )
        rows = self.toolbox.call(
            "billing_query", group_by=["ResourceName", "Tags.team"], limit=100000
        )
        alloc: dict[str, float] = {}
        for r in rows:
            owner = r["Tags.team"] or owner_of(r["ResourceName"]) or "unallocated"
            alloc[owner] = alloc.get(owner, 0.0) + r["cost"]
        return FinOpsSubmission(allocations={k: round(v, 2) for k, v in alloc.items()})

    def commitment(self) -> FinOpsSubmission:
        prices = self.toolbox.call("price_list", section="savings_plan")
        rows = self.toolbox.call(
            "billing_query", group_by=["ServiceName"], granularity="daily", limit=1000
        )
        compute = [r["cost"] for r in rows if "Compute" in r["ServiceName"]]
        if not compute:
            return FinOpsSubmission(incident=False)
        hourly = sum(compute) / len(compute) / 24
        return FinOpsSubmission(
            commitment_hourly=round(hourly * (1 - prices["savings_plan_discount"]), 4)
        )


def solve(task: TaskView, toolbox: Toolbox) -> FinOpsSubmission | None:
    """Run the rules that fit the task's goal."""
    return _Agent(task, toolbox).run()
