"""The environment seen from outside: the real AWS CLI, billing consistency, harm, teardown."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.spec import FinOpsSpec, FinOpsSubmission

from itbench.catalog import Catalog
from itbench.errors import ToolError
from itbench.process import port_open
from itbench.testing import free_port, live_processes
from itbench.tools import Toolbox

from .conftest import live, toolbox_and_task
from .test_models import telltales


def _aws_cli() -> list[str]:
    exe = Path(sys.executable).with_name("aws")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("aws")
    if found is None:
        pytest.fail("the AWS CLI (PyPI package awscli) is not installed")
    return [found]


def _cli(env_ctx: dict[str, Any], *args: str, flag: bool = True) -> Any:
    """Run the AWS CLI configured by the task context alone.

    Args:
        env_ctx: The task context.
        args: The CLI's arguments.
        flag: Pass ``--endpoint-url`` (the CLI's rds commands ignore ``AWS_ENDPOINT_URL``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(env_ctx["environment_variables"])
    env.update(AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    endpoint = ["--endpoint-url", env_ctx["endpoint_url"]] if flag else []
    out = subprocess.run(
        [*_aws_cli(), *endpoint, "--output", "json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-2000:])
    return json.loads(out.stdout) if out.stdout.strip() else None


def _when(stamp: str | float) -> datetime:
    """A CLI timestamp (ISO text or epoch seconds, by protocol) in UTC."""
    if isinstance(stamp, int | float):
        return datetime.fromtimestamp(stamp, UTC)
    return datetime.fromisoformat(stamp).astimezone(UTC)


def endpoint_processes(port: int) -> list[int]:
    """Pids of live endpoint processes serving ``port`` (zombies count as gone)."""
    serving = live_processes("itbench_finops.endpoint")
    return [p.pid for p in serving if str(port) in p.argv]


def delete_everything(toolbox: Toolbox) -> None:
    """An agent that deletes every resource it can find."""

    def d(service: str, op: str, **p: Any) -> Any:
        return toolbox.call("aws_describe", service=service, operation=op, params=p)

    def a(service: str, op: str, **p: Any) -> None:
        with contextlib.suppress(ToolError):
            toolbox.call("aws_call", service=service, operation=op, params=p)

    ids = [
        i["InstanceId"]
        for r in d("ec2", "DescribeInstances")["Reservations"]
        for i in r["Instances"]
    ]
    a("ec2", "TerminateInstances", InstanceIds=ids)
    for v in d("ec2", "DescribeVolumes")["Volumes"]:
        a("ec2", "DeleteVolume", VolumeId=v["VolumeId"])
    for s in d("ec2", "DescribeSnapshots", OwnerIds=["self"])["Snapshots"]:
        a("ec2", "DeleteSnapshot", SnapshotId=s["SnapshotId"])
    for e in d("ec2", "DescribeAddresses")["Addresses"]:
        a("ec2", "ReleaseAddress", AllocationId=e["AllocationId"])
    for lb in d("elbv2", "DescribeLoadBalancers")["LoadBalancers"]:
        a("elbv2", "DeleteLoadBalancer", LoadBalancerArn=lb["LoadBalancerArn"])
    for db in d("rds", "DescribeDBInstances")["DBInstances"]:
        a(
            "rds",
            "DeleteDBInstance",
            DBInstanceIdentifier=db["DBInstanceIdentifier"],
            SkipFinalSnapshot=True,
        )


def test_cli_billing_harm_and_teardown(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["finops/idle-orphans"]
    assert isinstance(spec, FinOpsSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        context = env.context()
        port = env.server.port
        assert context["endpoint_url"] == f"http://127.0.0.1:{port}"
        # The real AWS CLI sees the planted resources through the endpoint.
        who = _cli(context, "sts", "get-caller-identity", flag=False)
        assert who["Account"] == context["account_id"]
        res = _cli(context, "ec2", "describe-instances", flag=False)
        names = {
            t["Value"]
            for r in res["Reservations"]
            for i in r["Instances"]
            for t in i["Tags"]
            if t["Key"] == "Name"
        }
        assert {"web-01", "web-02", "batch-07", "report-02"} <= names
        vols = _cli(context, "ec2", "describe-volumes", "--filters", "Name=status,Values=available")
        assert {v["VolumeId"] for v in vols["Volumes"]} == {
            env.seeded.ids["scratch-3"],
            env.seeded.ids["restore-tmp"],
        }
        # Hourly CloudWatch history over the metric window, with its daily and weekly shape.
        history = {}
        for metric, stat in (("CPUUtilization", "Maximum"), ("NetworkOut", "Sum")):
            points = _cli(
                context,
                "cloudwatch",
                "get-metric-statistics",
                "--namespace",
                "AWS/EC2",
                "--metric-name",
                metric,
                "--dimensions",
                f"Name=InstanceId,Value={env.seeded.ids['web-01']}",
                "--start-time",
                (env.seeded.now - timedelta(days=spec.metric_days + 1)).isoformat(),
                "--end-time",
                env.seeded.now.isoformat(),
                "--period",
                "3600",
                "--statistics",
                stat,
            )["Datapoints"]
            history[metric] = {_when(p["Timestamp"]): p[stat] for p in points}
        cpu = history["CPUUtilization"]
        assert len(cpu) == spec.metric_days * 24
        assert max(cpu.values()) == pytest.approx(70, abs=0.01)
        assert statistics.mean(cpu.values()) == pytest.approx(35, abs=1)
        day = [v for t, v in cpu.items() if t.weekday() < 5 and 12 <= t.hour < 18]
        night = [v for t, v in cpu.items() if t.weekday() < 5 and 0 <= t.hour < 6]
        weekend = [v for t, v in cpu.items() if t.weekday() >= 5 and 12 <= t.hour < 18]
        assert statistics.mean(day) > statistics.mean(weekend) > statistics.mean(night)
        assert statistics.stdev(day) > 0.5  # noise, not a pure curve
        assert max(history["NetworkOut"].values()) == pytest.approx(2400e6, rel=1e-3)
        dbs = _cli(context, "rds", "describe-db-instances")
        assert {d["DBInstanceIdentifier"] for d in dbs["DBInstances"]} == {
            "orders-db",
            "reporting-db",
        }
        lbs = _cli(context, "elbv2", "describe-load-balancers")
        assert {lb["LoadBalancerName"] for lb in lbs["LoadBalancers"]} == {"lb-web", "lb-api"}
        # The FOCUS export in the bucket and Cost Explorer agree with each other.
        bucket, key = context["billing_export"]["uri"][5:].split("/", 1)
        body = env.clients.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read().decode()
        rows = list(csv.DictReader(io.StringIO(body)))
        assert rows and {
            "BilledCost",
            "ServiceName",
            "ResourceId",
            "ChargePeriodStart",
            "SubAccountId",
        } <= set(rows[0])
        export_total = sum(float(r["BilledCost"]) for r in rows)
        ce = _cli(
            context,
            "ce",
            "get-cost-and-usage",
            "--time-period",
            f"Start={context['billing_export']['period_start']},End={context['billing_export']['period_end']}",
            "--granularity",
            "DAILY",
            "--metrics",
            "UnblendedCost",
            "--group-by",
            "Type=DIMENSION,Key=SERVICE",
        )
        ce_total = sum(
            float(g["Metrics"]["UnblendedCost"]["Amount"])
            for day in ce["ResultsByTime"]
            for g in day["Groups"]
        )
        assert abs(ce_total - export_total) < 0.01
        # ... day by day and service by service, not only in total.
        export_cells: dict[tuple[str, str], float] = defaultdict(float)
        for r in rows:
            export_cells[(r["ChargePeriodStart"][:10], r["ServiceName"])] += float(r["BilledCost"])
        ce_cells = {
            (day["TimePeriod"]["Start"], g["Keys"][0]): float(
                g["Metrics"]["UnblendedCost"]["Amount"]
            )
            for day in ce["ResultsByTime"]
            for g in day["Groups"]
        }
        assert set(ce_cells) == set(export_cells)
        assert all(abs(ce_cells[k] - v) < 1e-6 for k, v in export_cells.items())
        assert len(ce["ResultsByTime"]) == spec.billing_days
        # Every row is priced from the price table: cost = quantity x list unit price.
        for r in rows:
            cost = float(r["PricingQuantity"]) * float(r["ListUnitPrice"])
            assert abs(float(r["BilledCost"]) - cost) < 1e-5, r
        per_instance = {
            r["ResourceId"]: float(r["ListUnitPrice"])
            for r in rows
            if r["ResourceType"] == "Instance"
        }
        assert per_instance[env.seeded.ids["web-01"]] == env.prices.instance("m5.large").hourly
        assert env.seeded.ids["scratch-3"] in {r["ResourceId"] for r in rows}
        # Every billed resource is in the inventory, and every billable one is billed.
        billed = {r["ResourceId"] for r in rows}
        inventory = {rid for rid, item in env.initial.items() if item.kind != "budget"}
        assert billed <= inventory, billed - inventory
        assert {env.seeded.ids[n] for n in ("orders-db", "lb-api", "restore-tmp")} <= billed
        # The ground truth reaches the agent nowhere, and nothing in the account names it.
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        public = task.model_dump_json()
        assert "removable" not in public and "reporting-db" not in json.dumps(context)
        seen = [
            text
            for item in env.read_state().values()
            for text in (item.name, *item.tags, *item.tags.values())
            if telltales(text)
        ]
        assert not seen, seen
        snaps = _cli(context, "ec2", "describe-snapshots", "--owner-ids", "self")["Snapshots"]
        assert not [s["Description"] for s in snaps if telltales(s["Description"])]
        # An agent that deletes everything saves money but fails through the harm rule.
        delete_everything(toolbox)
        result = domain.evaluate(spec, env, FinOpsSubmission(), toolbox, ctx)
        assert not result.passed
        assert result.metrics["harm_count"] >= 5
        assert (result.metrics["savings_fraction"] or 0) > 1
        assert any("orders-db" in h for h in result.details["harm"])
    assert not port_open(port)
    assert not list((tmp_path / "trial" / "pids").glob("*.pid"))
    assert not endpoint_processes(port)


@pytest.mark.parametrize(
    ("sid", "passes"), [("finops/idle-member-accounts", True), ("finops/idle-orphans", False)]
)
def test_baseline_solves_some_but_not_all(
    sid: str, passes: bool, domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios[sid]
    assert isinstance(spec, FinOpsSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        result = domain.evaluate(spec, env, domain.baseline(task, toolbox), toolbox, ctx)
        assert result.passed is passes, result.details


def test_tools_refuse_writes_through_describe_and_bad_accounts(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["finops/budget-control"]
    assert isinstance(spec, FinOpsSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        with pytest.raises(ToolError, match="changes the account"):
            toolbox.call(
                "aws_describe",
                service="ec2",
                operation="TerminateInstances",
                params={"InstanceIds": ["i-1"]},
            )
        with pytest.raises(ToolError, match="unknown account"):
            toolbox.call(
                "aws_describe",
                service="ec2",
                operation="DescribeVolumes",
                account_id="999999999999",
            )
        with pytest.raises(ToolError, match="no operation"):
            toolbox.call("aws_describe", service="ec2", operation="DescribeNothing")
        by_service = toolbox.call("billing_query", group_by=["ServiceName"])
        assert by_service[0]["ServiceName"] == "Amazon Elastic Compute Cloud - Compute"
        assert toolbox.call("price_list", section="ec2")["m5.large"]["vcpu"] == 2


def test_downsizing_below_need_and_stopping_in_use_instances_is_harm(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Scoring reads the account itself: changes made straight through boto3 count too."""
    spec = catalog.scenarios["finops/rightsizing-c5-2xlarge-12-30"]
    assert isinstance(spec, FinOpsSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        ec2 = env.clients.client("ec2")
        target, canary = env.seeded.ids["api-main"], env.seeded.ids["api-canary"]
        ec2.stop_instances(InstanceIds=[target, canary])
        # Peak 30 % of 8 vCPU needs 3 vCPU at 80 %: c5.large (2 vCPU) is too small.
        ec2.modify_instance_attribute(InstanceId=target, InstanceType={"Value": "c5.large"})
        ec2.start_instances(InstanceIds=[target])
        result = domain.evaluate(spec, env, FinOpsSubmission(), toolbox, ctx)
        assert not result.passed
        assert result.metrics["proximity"] == 0.0
        harms = " | ".join(result.details["harm"])
        assert f"{canary} (api-canary) left stopped" in harms
        assert f"{target} (api-main) downsized to c5.large" in harms
        assert (result.metrics["savings_fraction"] or 0) > 1


def test_recover_stops_an_endpoint_a_dead_harness_left(
    domain: FinOpsDomain, tmp_path: Path
) -> None:
    from itbench_finops.server import MotoServer

    server = MotoServer(free_port(), tmp_path / "trial")
    server.start()
    try:
        assert port_open(server.port)
        assert endpoint_processes(server.port)
        domain.recover(tmp_path / "trial")
        assert not port_open(server.port)
        assert not endpoint_processes(server.port)
        assert not list((tmp_path / "trial" / "pids").glob("*.pid"))
    finally:
        server.stop()


def test_cli_reads_and_fixes_a_budget_subscriber(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The endpoint serves the Budgets subscriber operations moto lacks, to the real CLI."""
    spec = catalog.scenarios["finops/budget-subscriber"]
    assert isinstance(spec, FinOpsSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        context = env.context()
        account = ["--account-id", context["account_id"], "--budget-name", "monthly-cost"]
        notes = _cli(context, "budgets", "describe-notifications-for-budget", *account)
        note = notes["Notifications"][0]
        note_arg = json.dumps(
            {
                k: note[k]
                for k in ("NotificationType", "ComparisonOperator", "Threshold", "ThresholdType")
            }
        )
        subs = _cli(
            context,
            "budgets",
            "describe-subscribers-for-notification",
            *account,
            "--notification",
            note_arg,
        )
        assert subs["Subscribers"] == [
            {"SubscriptionType": "EMAIL", "Address": "finops@example.co"}
        ]
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        noop = domain.evaluate(spec, env, FinOpsSubmission(cause="subscriber"), toolbox, ctx)
        assert not noop.passed and noop.metrics["budget_fixed"] is False
        _cli(
            context,
            "budgets",
            "update-subscriber",
            *account,
            "--notification",
            note_arg,
            "--old-subscriber",
            "SubscriptionType=EMAIL,Address=finops@example.co",
            "--new-subscriber",
            "SubscriptionType=EMAIL,Address=finops@example.com",
        )
        result = domain.evaluate(spec, env, FinOpsSubmission(cause="subscriber"), toolbox, ctx)
        assert result.passed, result.details
        wrong = domain.evaluate(spec, env, FinOpsSubmission(cause="threshold"), toolbox, ctx)
        assert not wrong.passed and wrong.metrics["diagnosis_cause"] is False
        # In-place updates of the budget and its notification are read back by the scorer.
        budgets = env.clients.client("budgets")
        ids = {"AccountId": context["account_id"], "BudgetName": "monthly-cost"}
        doc = budgets.describe_budget(**ids)["Budget"]
        budgets.update_budget(
            AccountId=context["account_id"],
            NewBudget={**doc, "BudgetLimit": {"Amount": "9000.00", "Unit": "USD"}},
        )
        old_note = json.loads(note_arg)
        budgets.update_notification(
            **ids, OldNotification=old_note, NewNotification={**old_note, "Threshold": 90.0}
        )
        final = env.read_state()["budget:monthly-cost"].attrs
        assert final["amount"] == 9000.0
        assert final["notifications"][0]["threshold"] == 90.0
        assert final["notifications"][0]["subscribers"] == ["finops@example.com"]
        after = domain.evaluate(spec, env, FinOpsSubmission(cause="subscriber"), toolbox, ctx)
        assert not after.passed and after.metrics["budget_fixed"] is False
