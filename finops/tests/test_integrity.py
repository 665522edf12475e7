"""What an agent cannot do to its judge: the guarded admin API, a lost endpoint, the fingerprint,
the probes, and what it can see of the scenario.

Every test runs a real endpoint over HTTP; the "agent's turn" is played by code acting the way
an unsandboxed program could (reading the pid file, signalling the server, raw requests).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError  # type: ignore[import-untyped]
from itbench_finops.domain import FinOpsDomain
from itbench_finops.environment import FinOpsEnvironment
from itbench_finops.prices import PriceTable
from itbench_finops.spec import FinOpsSpec, FinOpsSubmission, Truth

from itbench import testing
from itbench.catalog import Catalog
from itbench.errors import IntegrityError
from itbench.testing import free_port
from itbench.tools import Toolbox

from .conftest import concrete_spec, live, toolbox_and_task
from .test_models import telltales
from .test_scenarios import _ALL

FINGERPRINT_KEYS = {
    "scenario",
    "seeded_ids",
    "initial_state",
    "billing_export",
    "cost_explorer",
    "price_table",
    "price_table_file",
}


def _request(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
    """HTTP status of one request, as any program on the endpoint's port could send it."""
    req = urllib.request.Request(url, data=b"{}" if method == "POST" else None, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # local URL
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _endpoint_pid(ctx_trial_dir: Path) -> int:
    """The endpoint's pid as an unsandboxed agent finds it: the harness's pid file."""
    return int((ctx_trial_dir / "pids" / "aws-endpoint.pid").read_text().split()[0])


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        if "State:\tZ" in status:
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} still running")


@contextlib.contextmanager
def impostor(port: int) -> Iterator[list[str]]:
    """An HTTP server on ``port`` that answers every request with 200 and a plausible body."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's naming
            seen.append(self.path)
            body = b"0" * 64
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    # A killed multi-threaded server's leader turns zombie before its last thread lets the
    # socket go: retry the bind for a moment.
    end = time.monotonic() + 10
    while True:
        try:
            server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            break
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def test_admin_api_answers_only_the_harness(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = concrete_spec(catalog, "finops/budget-control")
    with live(domain, spec, tmp_path) as (env, _):
        url = env.context()["endpoint_url"]
        before = set(env.read_state())
        # What an agent on the port would try: wipe the account, dump it, rewrite Cost Explorer.
        attempts = [
            ("POST", "/moto-api/reset", {}),
            ("GET", "/moto-api/data.json", {}),
            ("GET", "/moto-api/", {}),
            ("POST", "/moto-api/static/ce/cost-and-usage-results", {}),
            ("POST", "/moto-api/reset", {"X-Endpoint-Admin": "0" * 64}),
            ("POST", "/moto-api/reset?x=1", {"Host": "moto_api"}),
            ("GET", "/moto-api/identity?nonce=abc", {}),
            ("POST", "/moto-api/harness/times", {}),
            ("POST", "/moto-api/harness/billing", {}),
            ("POST", "/moto-api/harness/billing", {"X-Endpoint-Admin": "0" * 64}),
        ]
        for method, path, headers in attempts:
            assert _request(url + path, method, headers) == 403, path
        assert set(env.read_state()) == before
        # The harness's own admin call (the Cost Explorer preload) went through at setup.
        ce = env.clients.client("ce").get_cost_and_usage(
            TimePeriod={
                "Start": env.context()["billing_export"]["period_start"],
                "End": env.context()["billing_export"]["period_end"],
            },
            Granularity="DAILY",
            Metrics=["UnblendedCost"],
        )
        assert len(ce["ResultsByTime"]) == spec.billing_days
        assert env.harness_problems() == []
        assert json.loads(env.server.admin("harness/times", {"resources": []})) == {"dated": 0}


def test_endpoint_refuses_to_start_without_its_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ENDPOINT_KEY"}
    port = free_port()
    out = subprocess.run(
        [sys.executable, "-m", "itbench_finops.endpoint", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0
    assert "ENDPOINT_KEY is not set" in out.stderr


def test_killed_endpoint_makes_the_trial_invalid_not_an_error(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = concrete_spec(catalog, "finops/idle-volumes", {"scratch-3": "old"})
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        before = env.fingerprint()
        assert env.harness_problems() == []
        # The agent's turn: it finds the endpoint's pid in the trial directory and kills it.
        pid = _endpoint_pid(ctx.trial_dir)
        assert pid == env.server.process.proc.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)
        problems = env.harness_problems()
        assert problems and "exited" in problems[0], problems
        with pytest.raises(IntegrityError, match="exited"):
            domain.evaluate(spec, env, FinOpsSubmission(incident=False), toolbox, ctx)
        # The evaluator's own inputs are held by the harness: unchanged, endpoint or not.
        assert env.fingerprint() == before


def test_replaced_or_frozen_endpoint_is_a_harness_problem(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = concrete_spec(catalog, "finops/budget-control")
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        pid = _endpoint_pid(ctx.trial_dir)
        # Frozen: the process lives but never answers.
        os.kill(pid, signal.SIGSTOP)
        try:
            problems = env.server.problems(timeout=1.0)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert problems and "does not answer" in problems[0], problems
        assert env.harness_problems() == []
        # Replaced: the agent kills the endpoint and serves the port itself.
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)
        # The replacement can only stand in when the process handle says "alive": check the
        # identity answer alone by pretending the harness's process still runs.
        with impostor(env.server.port) as seen:
            assert _request(f"http://127.0.0.1:{env.server.port}/moto-api/reset") == 200
            problems = env.server.identity_problems(timeout=2.0)
            assert problems and "another server" in problems[0], problems
            assert any(p.startswith("/moto-api/identity?nonce=") for p in seen)
            with pytest.raises(IntegrityError):
                domain.evaluate(spec, env, FinOpsSubmission(incident=False), toolbox, ctx)


def test_fingerprint_covers_what_scoring_reads_and_not_what_the_agent_may_change(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = concrete_spec(catalog, "finops/allocation-prefix", {"pay-api-1": "untagged"})
    with live(domain, spec, tmp_path) as (env, ctx):
        before = env.fingerprint()
        assert set(before) == FINGERPRINT_KEYS
        assert env.fingerprint() == before  # deterministic
        # Everything the agent may do leaves it unchanged: acting on the account (the oracle's
        # tagging) and overwriting its own copy of the export in the bucket.
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        submission = domain.oracle(spec, task, toolbox)
        bucket, key = task.context["billing_export"]["uri"][5:].split("/", 1)
        toolbox.call(
            "aws_call",
            service="s3",
            operation="PutObject",
            params={"Bucket": bucket, "Key": key, "Body": "BilledCost\n0\n"},
        )
        assert env.fingerprint() == before
        result = domain.evaluate(spec, env, submission, toolbox, ctx)
        assert result.passed, result.details  # the scorer reads its own rows, not the bucket

        def changed() -> set[str]:
            now = env.fingerprint()
            return {k for k in before if now[k] != before[k]}

        # What the harness holds for scoring: each change shows under its own name.
        row = env.rows[0]
        cost = row["BilledCost"]
        row["BilledCost"] = cost + 1
        assert changed() == {"billing_export"}
        row["BilledCost"] = cost
        prices = env.prices
        env.prices = PriceTable({**prices.raw, "savings_plan_discount": 0.5})
        assert changed() == {"price_table"}
        env.prices = prices
        original = env.spec
        env.spec = original.model_copy(update={"truth": Truth(owners={"pay-api-1": "search"})})
        assert changed() == {"scenario"}
        env.spec = original
        env.initial.popitem()
        assert changed() == {"initial_state"}


#: Scenarios every probe runs on in the default suite: one of each family (a control among them).
PROBED = [
    "finops/anomaly-launch",
    "finops/forecast-data",
    "finops/idle-stopped",
    "finops/rightsizing-ec2",
    "finops/storage-buckets",
    "finops/transfer-nat",
    "finops/budget-control",
    "finops/autoscaling-web",
    "finops/allocation-prefix",
    "finops/commitment-savings-plan",
]
_PROBED = _ALL if os.environ.get("ITBENCH_FINOPS_ALL") == "1" else PROBED


def _observed(
    toolbox: Toolbox, env: FinOpsEnvironment, accounts: list[str]
) -> tuple[str, list[str]]:
    """What an agent can read of the account, and the names the seeding chose in it.

    Returns:
        The whole text, and the values named by the scenario (names, tags, descriptions).
    """

    def d(service: str, op: str, account: str, **params: Any) -> Any:
        return toolbox.call(
            "aws_describe", service=service, operation=op, params=params, account_id=account
        )

    dumps: list[Any] = []
    named: list[str] = []
    for acct in accounts:
        ec2 = {
            op: d("ec2", op, acct, **params)
            for op, params in (
                ("DescribeInstances", {}),
                ("DescribeVolumes", {}),
                ("DescribeSnapshots", {"OwnerIds": ["self"]}),
                ("DescribeAddresses", {}),
                ("DescribeImages", {"Owners": ["self"]}),
                ("DescribeLaunchTemplates", {}),
            )
        }
        lbs = d("elbv2", "DescribeLoadBalancers", acct)["LoadBalancers"]
        groups = d("elbv2", "DescribeTargetGroups", acct)["TargetGroups"]
        lb_tags = (
            d("elbv2", "DescribeTags", acct, ResourceArns=[lb["LoadBalancerArn"] for lb in lbs])
            if lbs
            else {}
        )
        dbs = d("rds", "DescribeDBInstances", acct)["DBInstances"]
        asgs = d("autoscaling", "DescribeAutoScalingGroups", acct)["AutoScalingGroups"]
        metrics = d("cloudwatch", "ListMetrics", acct)
        users = d("iam", "ListUsers", acct)["Users"]
        buckets = d("s3", "ListBuckets", acct)["Buckets"]
        dumps += [ec2, lbs, groups, lb_tags, dbs, asgs, metrics, users, buckets]
        for r in ec2["DescribeInstances"]["Reservations"]:
            for i in r["Instances"]:
                named += [v for t in i.get("Tags", []) for v in (t["Key"], t["Value"])]
        for key in ("Volumes", "Snapshots", "Addresses"):
            op = {"Volumes": "DescribeVolumes", "Snapshots": "DescribeSnapshots"}.get(
                key, "DescribeAddresses"
            )
            for x in ec2[op][key]:
                named += [v for t in x.get("Tags", []) for v in (t["Key"], t["Value"])]
                named.append(x.get("Description", ""))
        named += [i.get("Name", "") for i in ec2["DescribeImages"]["Images"]]
        named += [
            t["LaunchTemplateName"] for t in ec2["DescribeLaunchTemplates"]["LaunchTemplates"]
        ]
        named += [lb["LoadBalancerName"] for lb in lbs] + [g["TargetGroupName"] for g in groups]
        named += [db["DBInstanceIdentifier"] for db in dbs]
        named += [g["AutoScalingGroupName"] for g in asgs] + [u["UserName"] for u in users]
        named += [b["Name"] for b in buckets]
    budgets = d("budgets", "DescribeBudgets", accounts[0], AccountId=accounts[0])["Budgets"]
    for b in budgets:
        dumps.append(
            d(
                "budgets",
                "DescribeNotificationsForBudget",
                accounts[0],
                AccountId=accounts[0],
                BudgetName=b["BudgetName"],
            )
        )
    named += [b["BudgetName"] for b in budgets]
    dumps.append(budgets)
    s3 = env.clients.client("s3")
    export = env.context()["billing_export"]["uri"][5:].split("/", 1)
    body = s3.get_object(Bucket=export[0], Key=export[1])["Body"].read()
    handbook = env.spec.handbook_bucket
    for obj in s3.list_objects_v2(Bucket=handbook).get("Contents", []):
        body += s3.get_object(Bucket=handbook, Key=obj["Key"])["Body"].read()
    named += sorted(
        {row["ResourceName"] for row in env.rows} | {r["SubAccountName"] for r in env.rows}
    )
    return json.dumps(dumps, default=str) + body.decode(), named


def _raw_budgets(context: dict[str, Any], operation: str, body: dict[str, Any]) -> tuple[int, str]:
    """One Budgets call as a hand-written JSON request (moto routes it by the credential scope)."""
    req = urllib.request.Request(
        context["endpoint_url"] + "/",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/x-amz-json-1.1",
            "X-Amz-Target": f"AWSBudgetServiceGateway.{operation}",
            "Authorization": (
                f"AWS4-HMAC-SHA256 Credential={context['access_key_id']}/20250101/"
                f"{context['region']}/budgets/aws4_request, SignedHeaders=host, Signature=0"
            ),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # local URL
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


@pytest.mark.parametrize("sid", _PROBED)
def test_nothing_seen_names_the_scenario_and_probes_fail(
    sid: str, domain: FinOpsDomain, catalog: Catalog, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # A neutral directory: pytest's own would carry the test's parameters in its name.
    tmp = tmp_path_factory.mktemp("t")
    with testing.trial_context(tmp / "draw", secret=sid.encode()) as draw:
        spec, _ = domain.draw(catalog.scenarios[sid], draw)  # type: ignore[arg-type]
    assert isinstance(spec, FinOpsSpec)
    with live(domain, spec, tmp) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        accounts = [a["account_id"] for a in task.context["accounts"]]
        text, named = _observed(toolbox, env, accounts)
        view = task.model_dump(mode="json")
        goal = view.pop("goal")
        text += json.dumps(view)
        stem = spec.id.split("/", 1)[1]
        file_stem = spec.source_path.stem if spec.source_path else stem
        forbidden = {spec.id, stem, str(ctx.trial_dir)}
        # A file holding a family's matrix is named for the family, which the goal states.
        if file_stem != spec.family:
            forbidden.add(file_stem)
        if spec.title:
            forbidden.add(spec.title)
        assert not [f for f in forbidden if f.lower() in goal.lower()], sid
        # The goal lists every possible cause; nothing else may state this variant's.
        forbidden |= {
            form
            for k, v in spec.params.items()
            if isinstance(v, str)
            for form in (f"{k}: {v}", f'"{k}": "{v}"', f"{k}={v}")
        }
        lowered = text.lower()
        assert not [f for f in forbidden if f.lower() in lowered], sid
        assert not [n for n in named if telltales(n)], [n for n in named if telltales(n)]

        # probe/constant: a fixed answer, no look at the account.
        constant = domain.probe("constant", task, Toolbox.of(env.tools()))
        result = domain.evaluate(spec, env, constant, toolbox, ctx)
        if "control" not in spec.tags:
            assert not result.passed, (result.metrics, result.details)
        assert result.metrics["harm_count"] == 0  # it changed nothing

        # probe/thrash: stop every running instance, then the same answer.
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        thrash = domain.probe("thrash", task, toolbox)
        assert toolbox.action_calls, "thrash made no action"
        result = domain.evaluate(spec, env, thrash, toolbox, ctx)
        assert not result.passed, (result.metrics, result.details)
        assert result.metrics["harm_count"] > 0
        assert any("left stopped" in h for h in result.details["harm"])


def test_malformed_budgets_sent_by_hand_are_refused(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A budget without its required fields would break every later read of the account."""
    from botocore.config import Config  # type: ignore[import-untyped]

    spec = concrete_spec(
        catalog,
        "finops/budget-policy",
        {"monthly-cost": "subscriber"},
        {"mail": "finops@example.com", "org_amount": 12000},
    )
    with live(domain, spec, tmp_path) as (env, _):
        import boto3  # type: ignore[import-untyped]

        context = env.context()
        raw = boto3.session.Session().client(
            "budgets",
            endpoint_url=context["endpoint_url"],
            region_name=context["region"],
            aws_access_key_id=context["access_key_id"],
            aws_secret_access_key=context["secret_access_key"],
            config=Config(parameter_validation=False, retries={"max_attempts": 1}),
        )
        acct = context["account_id"]
        note = {"NotificationType": "ACTUAL", "ComparisonOperator": "GREATER_THAN"}
        attempts = [
            lambda: raw.create_budget(
                AccountId=acct,
                Budget={
                    "BudgetName": "x",
                    "TimeUnit": "MONTHLY",
                    "BudgetLimit": {"Amount": "1", "Unit": "USD"},
                },
            ),
            lambda: raw.update_budget(AccountId=acct, NewBudget={"BudgetName": "monthly-cost"}),
            lambda: raw.update_budget(
                AccountId=acct,
                NewBudget={
                    "BudgetName": "monthly-cost",
                    "TimeUnit": "MONTHLY",
                    "BudgetType": "COST",
                    "BudgetLimit": {"Amount": "lots", "Unit": "USD"},
                },
            ),
            lambda: raw.create_notification(
                AccountId=acct, BudgetName="monthly-cost", Notification=note, Subscribers=[]
            ),
        ]
        for attempt in attempts:
            with pytest.raises(ClientError, match="InvalidParameterException"):
                attempt()
        # A threshold that is not a number cannot even be serialized by boto3: send it raw.
        status, body = _raw_budgets(
            context,
            "CreateNotification",
            {
                "AccountId": acct,
                "BudgetName": "monthly-cost",
                "Notification": {**note, "Threshold": "high"},
                "Subscribers": [],
            },
        )
        assert status == 400 and "InvalidParameterException" in body, (status, body)
        state = env.read_state()
        assert state["budget:monthly-cost"].attrs["amount"] == 12000.0
        assert "budget:x" not in state
