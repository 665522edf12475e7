"""The live environment of one FinOps trial: a seeded moto server and its billing data."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from datetime import date, timedelta
from importlib import resources
from typing import Any

from itbench import Environment, InfrastructureError, Tool, TrialContext
from itbench_finops.aws import Clients
from itbench_finops.billing import bill_items, focus_rows, to_csv
from itbench_finops.cost_explorer import ce_rows, forecast_daily, row_filter
from itbench_finops.costs import Usage, item_cost
from itbench_finops.prices import PriceTable, load_prices
from itbench_finops.seed import Seeded, Seeder
from itbench_finops.server import ACCESS_KEY, MANAGEMENT_ACCOUNT, REGION, SECRET_KEY, MotoServer
from itbench_finops.spec import Budget, FinOpsSpec
from itbench_finops.state import EXCESS, Item, budgets_of, read_state
from itbench_finops.timeline import Timeline
from itbench_finops.tools import make_tools


class FinOpsEnvironment(Environment):
    """A moto server on the trial's first port, seeded with the scenario's account.

    Args:
        spec: The scenario.
        ctx: The trial context.
    """

    def __init__(self, spec: FinOpsSpec, ctx: TrialContext) -> None:
        self.spec = spec
        self.ctx = ctx
        self.prices: PriceTable = load_prices()
        self.server = MotoServer(ctx.port(0), ctx.trial_dir, [a.id for a in spec.accounts])
        self.clients = Clients(self.server.url, harness_headers=self.server.admin_headers)
        # The judge reads every account through the harness's account header: an agent that
        # deletes or rotates a member account's keys cannot make it read another account.
        self.reader = Clients(
            self.server.url, harness_headers=self.server.admin_headers, by_header=True
        )
        self.seeded = Seeded()
        self.initial: dict[str, Item] = {}
        self.rows: list[dict[str, Any]] = []
        self.period_start = date.today()
        self.export_bucket = f"billing-exports-{MANAGEMENT_ACCOUNT}"
        self.export_key = ""
        self.cost_explorer: list[dict[str, Any]] = []
        self.timeline: Timeline | None = None
        #: When the agent's clock started (epoch seconds): the start of time to detect and
        #: time to mitigate.
        self.agent_started_at: float | None = None
        self._tools: list[Tool] | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def setup(self) -> None:
        """Start the endpoint and seed the account, its metrics, budgets and billing."""
        self.server.launch()
        # Build the clients while the server boots: both take a noticeable part of a second.
        for service in ("ec2", "iam", "elbv2", "rds", "s3", "cloudwatch", "autoscaling", "budgets"):
            self.clients.client(service)
            self.reader.client(service)
        self.server.wait()
        try:
            seeder = Seeder(self.spec, self.clients, self.ctx.seed, self._harness)
            self.seeded = seeder.run()
            self.timeline = seeder.timeline
            self.initial = self.read_state()
            self._check_initial()
            self._billing(seeder)
        except InfrastructureError:
            raise
        except Exception as exc:
            raise InfrastructureError(
                f"seeding the account failed: {type(exc).__name__}: {exc}; "
                f"endpoint log: {self.server.process.log_tail()}"
            ) from exc

    def _check_initial(self) -> None:
        """Every seeded resource is read and priced, or the scenario cannot be scored.

        Raises:
            InfrastructureError: the seeded account exceeds the reader's bound or holds a
                resource the price table cannot price.
        """
        wrong = [
            f"{i.kind} {i.id}: {why}"
            for i in self.initial.values()
            for why in [
                "more than the reader reads" if i.kind == EXCESS else None,
                item_cost(i, self.prices, Usage(self.spec, self._names())).unpriced,
            ]
            if why
        ]
        if wrong:
            raise InfrastructureError(f"the seeded account cannot be scored: {'; '.join(wrong)}")

    def _names(self) -> dict[str, str]:
        return {rid: name for name, rid in self.seeded.ids.items()}

    def _harness(self, path: str, body: dict[str, Any]) -> None:
        self.server.admin(f"harness/{path}", body)

    def _billing(self, seeder: Seeder) -> None:
        """The billing export, Cost Explorer's data and the budgets' spend, from one set of rows."""
        end = self.seeded.now.date()
        self.period_start = end - timedelta(days=self.spec.billing_days)
        names = {rid: name for name, rid in self.seeded.ids.items()}
        for inst, vol in self.seeded.root_volumes.items():
            names.setdefault(vol, f"{inst}-root")
        lines = bill_items(self.spec, self.initial, names, self.prices, self.period_start)
        account_names = {a.id: a.name for a in self.spec.accounts}
        account_names.setdefault(MANAGEMENT_ACCOUNT, "management")
        self.rows = focus_rows(
            lines,
            self.prices,
            self.period_start,
            MANAGEMENT_ACCOUNT,
            account_names,
            hourly=self.spec.hourly_billing,
        )
        s3 = self.clients.client("s3")
        s3.create_bucket(Bucket=self.export_bucket)
        self.export_key = f"focus/{self.period_start.isoformat()}_{end.isoformat()}/export.csv"
        s3.put_object(Bucket=self.export_bucket, Key=self.export_key, Body=to_csv(self.rows))
        self.cost_explorer = ce_rows(self.rows, account_names)
        self._harness(
            "billing",
            {
                "rows": self.cost_explorer,
                "accounts": account_names,
                "payer": MANAGEMENT_ACCOUNT,
                "end": end.isoformat(),
            },
        )
        seeder.budgets({b.name: self.budget_spend(b) for b in self._budgets()})
        created = self.seeded.now - timedelta(days=400)
        self._harness(
            "times",
            {
                "resources": [
                    {
                        "kind": "bucket",
                        "account": MANAGEMENT_ACCOUNT,
                        "id": self.export_bucket,
                        "created": created.isoformat(),
                    }
                ]
            },
        )
        # The export bucket and the budgets are part of the account: keep them in the initial
        # inventory.
        self.initial[self.export_bucket] = Item(
            "bucket", self.export_bucket, self.export_bucket, MANAGEMENT_ACCOUNT
        )
        for item in budgets_of(self.reader):
            self.initial[item.id] = item

    def _budgets(self) -> list[Budget]:
        return [r for r in self.spec.resources if isinstance(r, Budget)]

    def budget_spend(self, budget: Budget) -> tuple[float, float]:
        """A budget's spend this month and its forecast for the whole month, USD.

        The forecast adds, for each remaining day of the month, the mean daily spend of the
        last week (Cost Explorer's forecast over the same rows).
        """
        end = self.seeded.now.date()
        first = end.replace(day=1)
        month_end = (first + timedelta(days=32)).replace(day=1)
        scope = row_filter(budget_scope(budget, self.prices))
        actual = sum(
            r["cost"]
            for r in self.cost_explorer
            if first.isoformat() <= r["start"][:10] < end.isoformat() and scope(r)
        )
        daily = forecast_daily(self.cost_explorer, scope, end)
        return actual, actual + daily * (month_end - end).days

    def agent_started(self) -> None:
        """Note the start of the agent's clock."""
        self.agent_started_at = time.time()

    def read_state(self) -> dict[str, Item]:
        """The account's current resources, by id."""
        return read_state(self.reader, [a.id for a in self.spec.accounts])

    def tools(self) -> list[Tool]:
        """The agent's tools."""
        if self._tools is None:
            self._tools = make_tools(self)
        return self._tools

    def context(self) -> dict[str, Any]:
        """Endpoint, credentials, region, accounts and where the billing data is."""
        end = self.period_start + timedelta(days=self.spec.billing_days)
        accounts = [
            {
                "account_id": MANAGEMENT_ACCOUNT,
                "name": "management",
                "access_key_id": ACCESS_KEY,
                "secret_access_key": SECRET_KEY,
            }
        ]
        for a in self.spec.accounts:
            creds = self.clients.credentials.get(a.id)
            if creds is not None:
                accounts.append(
                    {
                        "account_id": a.id,
                        "name": a.name,
                        "access_key_id": creds.access_key_id,
                        "secret_access_key": creds.secret_access_key,
                    }
                )
        return {
            "endpoint_url": self.server.url,
            "region": REGION,
            "account_id": MANAGEMENT_ACCOUNT,
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            "accounts": accounts,
            "environment_variables": {
                "AWS_ENDPOINT_URL": self.server.url,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_DEFAULT_REGION": REGION,
            },
            "aws_cli": (
                f"aws --endpoint-url {self.server.url} <service> <command>: the environment "
                "variables configure boto3 and most CLI commands, but the CLI's rds commands "
                "need --endpoint-url."
            ),
            "billing_export": {
                "format": "FOCUS 1.0 CSV",
                "uri": f"s3://{self.export_bucket}/{self.export_key}",
                "period_start": self.period_start.isoformat(),
                "period_end": end.isoformat(),
                "granularity": "hourly compute, daily otherwise"
                if self.spec.hourly_billing
                else "daily",
            },
            "cost_explorer": (
                "Cost Explorer (GetCostAndUsage, GetCostAndUsageWithResources, "
                "GetDimensionValues, GetTags, GetCostForecast) answers from the billing data "
                "of the export: the management account sees every account, a member account "
                "its own."
            ),
            "handbook": (
                f"s3://{self.spec.handbook_bucket}/: the engineering handbook (conventions, "
                "runbooks, logs)."
            ),
            "metrics": f"CloudWatch holds {self.spec.metric_days} days of hourly datapoints.",
            "prices": (
                "On-demand list prices: the Price List API (pricing get-products) or the "
                "price_list tool. Hours per month: 730."
            ),
        }

    # --- integrity ------------------------------------------------------------------------

    def fingerprint(self) -> dict[str, str]:
        """Digests of what the evaluator reads and nobody may change.

        The scenario (ground truth included), the seeded ids (and the networks, data volumes
        and addresses seeding made) and the initial inventory that harm and savings are
        measured against, the billing rows the scorer and ``billing_query`` read (and the
        export generated from them), the Cost Explorer rows served from them, and the price
        table as loaded and as shipped. The copy of the
        export in the account's bucket is the agent's to read (and to spoil for itself): the
        scorer never reads it back.
        """
        seeded = {
            **dataclasses.asdict(self.seeded),
            "now": self.seeded.now.isoformat(),
        }
        initial = [dataclasses.asdict(i) for _, i in sorted(self.initial.items())]
        billing = {"period_start": self.period_start.isoformat(), "key": self.export_key}
        shipped = resources.files("itbench_finops").joinpath("data/prices.yaml").read_bytes()
        return {
            "scenario": _digest(self.spec.model_dump_json()),
            "seeded_ids": _digest(_canonical(seeded)),
            "initial_state": _digest(_canonical(initial)),
            "billing_export": _digest(_canonical(billing).encode() + to_csv(self.rows)),
            "cost_explorer": _digest(_canonical(self.cost_explorer)),
            "price_table": _digest(_canonical(self.prices.raw)),
            "price_table_file": _digest(shipped),
        }

    def harness_problems(self) -> list[str]:
        """The AWS endpoint dead, stopped or replaced since setup, or nothing."""
        return self.server.problems()

    def teardown(self) -> None:
        """Stop the endpoint (idempotent)."""
        self.server.stop()

    def dump(self) -> str:
        """A JSON summary of the seeded ids, for the trial's artifacts."""
        return json.dumps({"ids": self.seeded.ids, "accounts": self.seeded.accounts}, indent=1)


def budget_scope(budget: Budget, prices: PriceTable) -> dict[str, Any] | None:
    """A budget's filters as a Cost Explorer expression (None: every cost)."""
    parts: list[dict[str, Any]] = []
    if budget.team:
        parts.append({"Tags": {"Key": "team", "Values": [budget.team]}})
    if budget.accounts:
        parts.append({"Dimensions": {"Key": "LINKED_ACCOUNT", "Values": list(budget.accounts)}})
    if budget.services:
        names = [prices.service_name(s) for s in budget.services]
        parts.append({"Dimensions": {"Key": "SERVICE", "Values": names}})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"And": parts}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


def _digest(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()
