"""Two extreme FinOps agents every problem but the controls must fail.

- ``finops/destroy``: deletes or stops everything it finds in every account of the task
  context (instances, volumes, snapshots, addresses, load balancers, databases, NAT gateways,
  Auto Scaling capacity, budgets, bucket lifecycles), then reports an incident with a fixed
  diagnosis. The blunt way to cut a bill: harm in every scenario.
- ``finops/unchanged``: changes nothing and reports that there is nothing to fix, which only
  the controls accept.

Loaded in process like the heuristic (``--plugin finops_extremes`` with this directory on
``PYTHONPATH``); they use only the ``TaskView`` and the ``Toolbox``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from itbench import Agent, AgentSpec, TaskView, Toolbox, ToolError, hookimpl


class Destroy(Agent):
    """Delete or stop every resource of every account."""

    def run(self, task: TaskView, toolbox: Toolbox) -> dict[str, Any]:
        accounts = [a["account_id"] for a in task.context.get("accounts", [])]

        def d(service: str, op: str, acct: str, **p: Any) -> Any:
            try:
                return toolbox.call(
                    "aws_describe", service=service, operation=op, params=p, account_id=acct
                )
            except ToolError:
                return {}

        def a(service: str, op: str, acct: str, **p: Any) -> None:
            with contextlib.suppress(ToolError):
                toolbox.call("aws_call", service=service, operation=op, params=p, account_id=acct)

        steps: list[Callable[[str], None]] = [
            lambda acct: [
                a(
                    "autoscaling",
                    "UpdateAutoScalingGroup",
                    acct,
                    AutoScalingGroupName=g["AutoScalingGroupName"],
                    MinSize=0,
                    DesiredCapacity=0,
                )
                for g in d("autoscaling", "DescribeAutoScalingGroups", acct).get(
                    "AutoScalingGroups", []
                )
            ],
            lambda acct: [
                a("ec2", "TerminateInstances", acct, InstanceIds=[i["InstanceId"]])
                for r in d("ec2", "DescribeInstances", acct).get("Reservations", [])
                for i in r["Instances"]
            ],
            lambda acct: [
                a("elbv2", "DeleteLoadBalancer", acct, LoadBalancerArn=lb["LoadBalancerArn"])
                for lb in d("elbv2", "DescribeLoadBalancers", acct).get("LoadBalancers", [])
            ],
            lambda acct: [
                a(
                    "rds",
                    "DeleteDBInstance",
                    acct,
                    DBInstanceIdentifier=db["DBInstanceIdentifier"],
                    SkipFinalSnapshot=True,
                )
                for db in d("rds", "DescribeDBInstances", acct).get("DBInstances", [])
            ],
            lambda acct: [
                a("ec2", "DeleteNatGateway", acct, NatGatewayId=n["NatGatewayId"])
                for n in d("ec2", "DescribeNatGateways", acct).get("NatGateways", [])
            ],
            lambda acct: [
                a("ec2", "DeleteVolume", acct, VolumeId=v["VolumeId"])
                for v in d("ec2", "DescribeVolumes", acct).get("Volumes", [])
            ],
            lambda acct: [
                a("ec2", "DeleteSnapshot", acct, SnapshotId=s["SnapshotId"])
                for s in d("ec2", "DescribeSnapshots", acct, OwnerIds=["self"]).get("Snapshots", [])
            ],
            lambda acct: [
                a("ec2", "ReleaseAddress", acct, AllocationId=e["AllocationId"])
                for e in d("ec2", "DescribeAddresses", acct).get("Addresses", [])
            ],
            lambda acct: [
                a("budgets", "DeleteBudget", acct, AccountId=acct, BudgetName=b["BudgetName"])
                for b in d("budgets", "DescribeBudgets", acct, AccountId=acct).get("Budgets", [])
            ],
        ]
        for acct in accounts:
            for step in steps:
                step(acct)
        return {
            "incident": True,
            "account_id": task.context.get("account_id"),
            "service": "Amazon Elastic Compute Cloud - Compute",
            "resource_type": "Instance",
            "cause": "new_resource",
        }


class Unchanged(Agent):
    """Change nothing and report that nothing needs fixing."""

    def run(self, task: TaskView, toolbox: Toolbox) -> dict[str, Any]:
        return {"incident": False}


@hookimpl
def itbench_register_agents() -> list[AgentSpec]:
    """``finops/destroy`` and ``finops/unchanged``."""
    return [
        AgentSpec("finops/destroy", lambda ctx: Destroy(), "Delete or stop everything."),
        AgentSpec("finops/unchanged", lambda ctx: Unchanged(), "Change nothing; no incident."),
    ]
