"""The environment seen from outside: the real AWS CLI, billing consistency, harm, teardown."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.spec import FinOpsSubmission

from itbench.catalog import Catalog
from itbench.errors import ToolError
from itbench.process import port_open
from itbench.testing import free_port, live_processes
from itbench.tools import Toolbox

from .conftest import concrete_spec, live, toolbox_and_task
from .test_models import telltales


def _aws_cli() -> list[str]:
    exe = Path(sys.executable).with_name("aws")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("aws")
    if found is None:
        pytest.fail("the AWS CLI (PyPI package awscli) is not installed")
    return [found]


def _cli(env_ctx: dict[str, Any], *args: str, flag: bool = True, account: str | None = None) -> Any:
    """Run the AWS CLI configured by the task context alone.

    Args:
        env_ctx: The task context.
        args: The CLI's arguments.
        flag: Pass ``--endpoint-url`` (the CLI's rds commands ignore ``AWS_ENDPOINT_URL``).
        account: Use this member account's keys (default: the management account's).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(env_ctx["environment_variables"])
    if account is not None:
        keys = next(a for a in env_ctx["accounts"] if a["account_id"] == account)
        env.update(
            AWS_ACCESS_KEY_ID=keys["access_key_id"], AWS_SECRET_ACCESS_KEY=keys["secret_access_key"]
        )
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


def _hourly(
    context: dict[str, Any],
    namespace: str,
    metric: str,
    dimension: str,
    stat: str,
    now: datetime,
    spec: Any,
) -> dict[datetime, float]:
    """One statistic of a metric per hour over the metric history, read with the AWS CLI."""
    points = _cli(
        context,
        "cloudwatch",
        "get-metric-statistics",
        "--namespace",
        namespace,
        "--metric-name",
        metric,
        "--dimensions",
        dimension,
        "--start-time",
        (now - timedelta(days=spec.metric_days + 1)).isoformat(),
        "--end-time",
        now.isoformat(),
        "--period",
        "3600",
        "--statistics",
        stat,
    )["Datapoints"]
    return {_when(p["Timestamp"]): p[stat] for p in points}


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


#: idle-orphans with look-alikes of every kind: a standby, an open ticket, a stale snapshot.
ORPHAN_FORMS = {
    "batch-07": "standby",
    "scratch-3": "old",
    "restore-tmp": "ticket_open",
    "ip-web-2": "loose",
    "backup-2024": "old",
    "lb-api": "empty",
    "reporting-db": "silent",
}


def _cells(rows: list[dict[str, Any]], key: str) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        value = json.loads(r["Tags"]).get("team", "") if key == "Tags" else r[key]
        out[(r["ChargePeriodStart"][:10], value)] += float(r["BilledCost"])
    return out


def _ce(
    context: dict[str, Any], group: str, account: str | None = None
) -> dict[tuple[str, str], float]:
    """Daily UnblendedCost of the billing period from the real CLI's ``ce get-cost-and-usage``."""
    period = context["billing_export"]
    out = _cli(
        context,
        "ce",
        "get-cost-and-usage",
        "--time-period",
        f"Start={period['period_start']},End={period['period_end']}",
        "--granularity",
        "DAILY",
        "--metrics",
        "UnblendedCost",
        "--group-by",
        group,
        account=account,
    )
    assert (
        len(out["ResultsByTime"])
        == (
            date.fromisoformat(period["period_end"]) - date.fromisoformat(period["period_start"])
        ).days
    )
    return {
        (day["TimePeriod"]["Start"], g["Keys"][0].removeprefix("team$")): float(
            g["Metrics"]["UnblendedCost"]["Amount"]
        )
        for day in out["ResultsByTime"]
        for g in day["Groups"]
    }


def test_cli_times_billing_cost_explorer_pricing_harm_and_teardown(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = concrete_spec(catalog, "finops/idle-orphans", ORPHAN_FORMS)
    with live(domain, spec, tmp_path) as (env, ctx):
        context = env.context()
        port = env.server.port
        now = env.seeded.now
        assert context["endpoint_url"] == f"http://127.0.0.1:{port}"
        # The real AWS CLI sees the planted resources through the endpoint.
        who = _cli(context, "sts", "get-caller-identity", flag=False)
        assert who["Account"] == context["account_id"]
        res = _cli(context, "ec2", "describe-instances", flag=False)
        instances = {
            t["Value"]: i
            for r in res["Reservations"]
            for i in r["Instances"]
            for t in i["Tags"]
            if t["Key"] == "Name"
        }
        assert {"web-01", "web-02", "batch-07"} <= set(instances)
        # Realistic times: launches long before the period, a stop 75 days ago in the reason.
        period_start = date.fromisoformat(context["billing_export"]["period_start"])
        assert all(_when(i["LaunchTime"]).date() < period_start for i in instances.values())
        stopped = instances["batch-07"]["StateTransitionReason"]
        assert stopped.startswith(f"User initiated ({(now - timedelta(days=75)).date()}"), stopped
        # ... so the standard age filters find what they should.
        cutoff = (now - timedelta(days=30)).strftime("%Y-%m-%d")
        old = _cli(
            context,
            "ec2",
            "describe-volumes",
            "--filters",
            "Name=status,Values=available",
            "--query",
            f"Volumes[?CreateTime<='{cutoff}'].VolumeId",
        )
        assert set(old) == {env.seeded.ids["scratch-3"], env.seeded.ids["restore-tmp"]}
        snaps = _cli(
            context,
            "ec2",
            "describe-snapshots",
            "--owner-ids",
            "self",
            "--query",
            f"Snapshots[?StartTime<='{(now - timedelta(days=300)).strftime('%Y-%m-%d')}'].SnapshotId",
        )
        assert snaps == [env.seeded.ids["backup-2024"]]
        # Hourly CloudWatch history over the metric window, with its daily and weekly shape.
        history = {}
        for metric, stat in (("CPUUtilization", "Maximum"), ("NetworkOut", "Sum")):
            dimension = f"Name=InstanceId,Value={env.seeded.ids['web-01']}"
            history[metric] = _hourly(context, "AWS/EC2", metric, dimension, stat, now, spec)
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
        assert all(_when(d["InstanceCreateTime"]).date() < period_start for d in dbs["DBInstances"])
        lbs = _cli(context, "elbv2", "describe-load-balancers")
        assert {lb["LoadBalancerName"] for lb in lbs["LoadBalancers"]} == {"lb-web", "lb-api"}
        # S3: the handbook's pages and the FOCUS export, read with the CLI.
        handbook = context["handbook"].split()[0].rstrip(":")
        listing = _cli(context, "s3api", "list-objects-v2", "--bucket", handbook[5:].rstrip("/"))
        assert "finops/idle-resources.md" in {o["Key"] for o in listing["Contents"]}
        export = tmp_path / "export.csv"
        bucket, key = context["billing_export"]["uri"][5:].split("/", 1)
        _cli(context, "s3api", "get-object", "--bucket", bucket, "--key", key, str(export))
        rows = list(csv.DictReader(io.StringIO(export.read_text())))
        assert rows and {"BilledCost", "ServiceName", "ResourceId", "ChargePeriodStart"} <= set(
            rows[0]
        )
        # Cost Explorer answers with the account's own figures, day by day, by service and tag.
        for group, key in (
            ("Type=DIMENSION,Key=SERVICE", "ServiceName"),
            ("Type=TAG,Key=team", "Tags"),
        ):
            want = _cells(rows, key)
            got = _ce(context, group)
            assert set(got) == set(want), group
            assert all(abs(got[k] - v) < 1e-6 for k, v in want.items()), group
        # The Price List API answers from the price table.
        products = _cli(
            context,
            "pricing",
            "get-products",
            "--region",
            "us-east-1",
            "--service-code",
            "AmazonEC2",
            "--filters",
            "Type=TERM_MATCH,Field=instanceType,Value=m5.large",
        )["PriceList"]
        terms = json.loads(products[0])["terms"]["OnDemand"]
        (dim,) = next(iter(terms.values()))["priceDimensions"].values()
        assert float(dim["pricePerUnit"]["USD"]) == env.prices.instance("m5.large").hourly
        # Every row is priced from the price table: cost = quantity x contracted unit price.
        for r in rows:
            cost = float(r["PricingQuantity"]) * float(r["ContractedUnitPrice"])
            assert abs(float(r["BilledCost"]) - cost) < 1e-5, r
        # Billing follows the timeline: nothing before a resource existed, a stop, a launch.
        billed_days = {
            r["ChargePeriodStart"][:10] for r in rows if r["ResourceId"] == env.seeded.ids["lb-web"]
        }
        assert len(billed_days) == spec.billing_days
        assert not [
            r
            for r in rows
            if r["ResourceId"] == env.seeded.ids["batch-07"] and r["ResourceType"] == "Instance"
        ]
        # Every billed resource is in the inventory, and every billable one is billed.
        billed = {r["ResourceId"] for r in rows}
        inventory = {rid for rid, item in env.initial.items() if item.kind != "budget"}
        assert billed <= inventory, billed - inventory
        assert {env.seeded.ids[n] for n in ("orders-db", "lb-api", "restore-tmp")} <= billed
        # The ground truth reaches the agent nowhere, and nothing in the account names it.
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        public = task.model_dump_json()
        assert "waste" not in public and "reporting-db" not in json.dumps(context)
        seen = [
            text
            for item in env.read_state().values()
            for text in (item.name, *item.tags, *item.tags.values())
            if telltales(text)
        ]
        assert not seen, seen
        described = _cli(context, "ec2", "describe-snapshots", "--owner-ids", "self")["Snapshots"]
        assert not [s["Description"] for s in described if telltales(s["Description"])]
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


def test_member_accounts_see_their_own_costs(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Cost Explorer of a member account answers with that account's rows only."""
    spec = concrete_spec(catalog, "finops/idle-accounts", {"export-data": "old"})
    with live(domain, spec, tmp_path) as (env, ctx):
        context = env.context()
        by_account: dict[str, float] = defaultdict(float)
        for r in env.rows:
            by_account[r["SubAccountId"]] += r["BilledCost"]
        whole = _ce(context, "Type=DIMENSION,Key=LINKED_ACCOUNT")
        assert sum(whole.values()) == pytest.approx(sum(by_account.values()), abs=1e-6)
        member = _ce(context, "Type=DIMENSION,Key=LINKED_ACCOUNT", account="345678901234")
        assert {k[1] for k in member} == {"345678901234"}
        assert sum(member.values()) == pytest.approx(by_account["345678901234"], abs=1e-6)


@pytest.mark.parametrize(
    ("sid", "forms", "passes"),
    [
        # Every candidate waste: the first-pass rule (delete what is unattached) is enough.
        (
            "finops/idle-volumes",
            {
                "scratch-3": "old",
                "restore-orders": "ticket_closed",
                "restore-ledger": "ticket_closed",
                "build-cache": "old",
                "export-tmp": "old",
            },
            True,
        ),
        # A group held for an event in every draw: resizing every group harms it.
        ("finops/autoscaling-web", {"web-tier": "oversized", "api-tier": "right"}, False),
        ("finops/idle-orphans", ORPHAN_FORMS, False),
    ],
)
def test_baseline_solves_some_but_not_all(
    sid: str,
    forms: dict[str, str],
    passes: bool,
    domain: FinOpsDomain,
    catalog: Catalog,
    tmp_path: Path,
) -> None:
    spec = concrete_spec(catalog, sid, forms, {"target_cpu": 70} if "autoscaling" in sid else None)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        result = domain.evaluate(spec, env, domain.baseline(task, toolbox), toolbox, ctx)
        assert result.passed is passes, result.details


def test_tools_refuse_writes_through_describe_and_bad_accounts(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = concrete_spec(catalog, "finops/budget-control")
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        with pytest.raises(ToolError, match="changes the account"):
            toolbox.call(
                "aws_describe",
                service="ec2",
                operation="TerminateInstances",
                params={"InstanceIds": ["i-1"]},
            )
        # HeadBucket and HeadObject read: they are served like the Describe calls.
        [bucket, *_] = toolbox.call(
            "aws_describe", service="s3", operation="ListBuckets", params={}
        )["Buckets"]
        head = toolbox.call(
            "aws_describe", service="s3", operation="HeadBucket", params={"Bucket": bucket["Name"]}
        )
        assert isinstance(head, dict)
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
    spec = concrete_spec(
        catalog,
        "finops/rightsizing-ec2",
        {"api-main": "idle"},
        {"target_cpu": 80, "target_memory": 90},
    )
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        ec2 = env.clients.client("ec2")
        target, canary = env.seeded.ids["api-main"], env.seeded.ids["api-canary"]
        ec2.stop_instances(InstanceIds=[target, canary])
        # Peak 14 % of 16 vCPU needs 2.8 vCPU at 80 %: m5.large (2 vCPU) is too small.
        ec2.modify_instance_attribute(InstanceId=target, InstanceType={"Value": "m5.large"})
        ec2.start_instances(InstanceIds=[target])
        result = domain.evaluate(spec, env, FinOpsSubmission(), toolbox, ctx)
        assert not result.passed
        assert result.metrics["proximity"] == 0.0, (result.metrics, result.details)
        harms = " | ".join(result.details["harm"])
        assert f"{canary} (api-canary) left stopped" in harms
        assert f"{target} (api-main) resized to m5.large below its need" in harms
        assert (result.metrics["savings_fraction"] or 0) > 1, result.metrics


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
    spec = concrete_spec(
        catalog,
        "finops/budget-policy",
        {"monthly-cost": "subscriber"},
        {"mail": "finops@example.com", "threshold": 80, "org_amount": 12000},
    )
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


def test_the_busiest_hour_the_handbook_sizes_to_is_the_judge_s_need(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """storage.md sizes a gp3 volume to the busiest hour of reads plus writes: that hour, read
    from CloudWatch as the page says, is exactly what the judge requires at least."""
    from itbench_finops.optimum import volume_iops_need, volume_throughput_need

    spec = concrete_spec(
        catalog, "finops/storage-mixed", {"pg-analytics": "gp2_busy", "kafka-1": "gp2_big"}
    )
    with live(domain, spec, tmp_path) as (env, ctx):
        context = env.context()
        now = env.seeded.now
        for name in ("pg-analytics", "kafka-1"):
            [volume] = next(r for r in spec.resources if r.name == name).volumes  # type: ignore[union-attr]
            [vid] = env.seeded.data_volumes[name]
            hourly: dict[str, dict[datetime, float]] = {}
            for metric in (
                "VolumeReadOps",
                "VolumeWriteOps",
                "VolumeReadBytes",
                "VolumeWriteBytes",
            ):
                dimension = f"Name=VolumeId,Value={vid}"
                hourly[metric] = _hourly(context, "AWS/EBS", metric, dimension, "Sum", now, spec)
            hours = hourly["VolumeReadOps"].keys()
            iops = max(
                (hourly["VolumeReadOps"][t] + hourly["VolumeWriteOps"][t]) / 3600 for t in hours
            )
            mbps = max(
                (hourly["VolumeReadBytes"][t] + hourly["VolumeWriteBytes"][t]) / 3600e6
                for t in hours
            )
            assert math.ceil(iops - 1e-6) == volume_iops_need(volume), (name, iops)
            assert math.ceil(mbps - 1e-6) == volume_throughput_need(volume), (name, mbps)
