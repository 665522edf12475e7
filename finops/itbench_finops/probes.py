"""Probe agents that every FinOps scenario must fail: a constant answer, and stopping everything.

``itbench validate`` runs them beside the oracle and noop. The constant answer is what an agent
could submit without looking at the account; the thrash probe stops every running instance of
every account in the task context (the blunt way to cut a bill) and then submits the same
answer. Both must fail: the first because every scenario's answer depends on what is in the
account, the second because stopping in-use instances is harm.
"""

from __future__ import annotations

import contextlib
from typing import Any

from itbench import TaskView, Toolbox, ToolError
from itbench_finops.server import MANAGEMENT_ACCOUNT
from itbench_finops.spec import FinOpsSubmission

KINDS = ("constant", "thrash")


def constant_answer() -> FinOpsSubmission:
    """A fixed, plausible report: an incident, a new EC2 instance, a round commitment."""
    return FinOpsSubmission(
        incident=True,
        account_id=MANAGEMENT_ACCOUNT,
        service="Amazon Elastic Compute Cloud - Compute",
        resource_id="i-0123456789abcdef0",
        resource_type="Instance",
        cause="new_resource",
        allocations={"platform": 1000.0},
        commitment_hourly=1.0,
    )


def thrash(task: TaskView, toolbox: Toolbox) -> list[str]:
    """Stop every running instance of every account in the task context; returns their ids."""
    accounts = [a["account_id"] for a in task.context.get("accounts", [])] or [None]
    stopped: list[str] = []
    for account in accounts:
        try:
            res: Any = toolbox.call(
                "aws_describe",
                service="ec2",
                operation="DescribeInstances",
                params={},
                account_id=account,
            )
        except ToolError:
            continue
        running = [
            i["InstanceId"]
            for r in res.get("Reservations", [])
            for i in r.get("Instances", [])
            if i.get("State", {}).get("Name") in ("running", "pending")
        ]
        if not running:
            continue
        with contextlib.suppress(ToolError):
            toolbox.call(
                "aws_call",
                service="ec2",
                operation="StopInstances",
                params={"InstanceIds": running},
                account_id=account,
            )
            stopped.extend(running)
    return stopped


def run(kind: str, task: TaskView, toolbox: Toolbox) -> FinOpsSubmission:
    """Run probe ``kind`` (``constant`` or ``thrash``).

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown probe {kind!r}; FinOps has {', '.join(KINDS)}")
    if kind == "thrash":
        thrash(task, toolbox)
    return constant_answer()
