"""The agent's typed tools: AWS API calls, billing queries and the price list."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import date, datetime
from typing import Any, Literal, Protocol

from itbench import Tool, ToolError
from itbench_finops.aws import Clients
from itbench_finops.prices import PriceTable
from itbench_finops.server import MANAGEMENT_ACCOUNT
from itbench_finops.spec import FinOpsSpec

#: Largest tool result, in characters of JSON.
MAX_RESULT = 400_000
_READ_ONLY = re.compile(r"^(describe|list|get|head|lookup|search)_")
_GROUPABLE = (
    "SubAccountId",
    "SubAccountName",
    "ServiceName",
    "ServiceCategory",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "SkuId",
    "RegionId",
    "AvailabilityZone",
    "ChargeCategory",
    "PricingCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountType",
)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if hasattr(value, "read"):  # a streaming body (S3 GetObject)
        return value.read(MAX_RESULT + 1).decode("utf-8", errors="replace")
    return value


def _operation(client: Any, operation: str) -> str:
    from botocore import xform_name  # type: ignore[import-untyped]

    name = xform_name(operation) if not operation.islower() else operation
    name = name.replace("-", "_")
    if name not in client.meta.method_to_api_mapping:
        raise ToolError(f"{client.meta.service_model.service_name} has no operation {operation!r}")
    return str(name)


class Sandbox(Protocol):
    """What the tools act on and read: the seeded account of one trial (its environment).

    The tools read these attributes at every call, so they see the billing rows that setup
    generates even when they were made before it.
    """

    @property
    def spec(self) -> FinOpsSpec:
        """The scenario (for its member accounts)."""

    @property
    def clients(self) -> Clients:
        """boto3 clients of the sandbox endpoint, per account."""

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The FOCUS rows of the billing export."""

    @property
    def prices(self) -> PriceTable:
        """The price table."""


def make_tools(env: Sandbox) -> list[Tool]:
    """The tools of one environment."""
    accounts = {env.spec.accounts[i].id for i in range(len(env.spec.accounts))}

    def _call(
        service: str, operation: str, params: dict[str, Any], account_id: str | None, write: bool
    ) -> Any:
        if account_id is not None and account_id not in accounts | {MANAGEMENT_ACCOUNT}:
            raise ToolError(f"unknown account {account_id!r}; see the task context's accounts")
        try:
            client = env.clients.client(service.lower(), account_id)
        except Exception as exc:
            raise ToolError(f"unknown service {service!r}: {exc}") from None
        op = _operation(client, operation)
        if not write and not _READ_ONLY.match(op):
            raise ToolError(f"{operation} changes the account: use aws_call for it")
        try:
            result = _plain(getattr(client, op)(**params))
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"{service} {operation}: {exc}") from None
        text = json.dumps(result, default=str)
        if len(text) > MAX_RESULT:
            raise ToolError(f"result too large ({len(text)} characters): narrow the request")
        return result

    def aws_describe(
        service: str,
        operation: str,
        params: dict[str, Any] | None = None,
        account_id: str | None = None,
    ) -> Any:
        """Call a read-only AWS API operation (Describe*, List*, Get*, Head*) on the sandbox endpoint.

        A result longer than 400,000 characters of JSON is refused: narrow the request (its
        filters, ``MaxResults`` and the next page's token, a shorter time range).

        Args:
            service: boto3 service name, e.g. ec2, rds, elbv2, autoscaling, cloudwatch, budgets, ce, s3.
            operation: Operation name, e.g. DescribeVolumes or describe_volumes.
            params: The operation's parameters, as boto3 takes them.
            account_id: Account to act in (default: the management account).
        """
        return _call(service, operation, params or {}, account_id, write=False)

    def aws_call(
        service: str,
        operation: str,
        params: dict[str, Any] | None = None,
        account_id: str | None = None,
    ) -> Any:
        """Call any AWS API operation on the sandbox endpoint, including ones that change it.

        Args:
            service: boto3 service name, e.g. ec2, rds, elbv2, autoscaling, budgets.
            operation: Operation name, e.g. DeleteVolume or delete_volume.
            params: The operation's parameters, as boto3 takes them.
            account_id: Account to act in (default: the management account).
        """
        return _call(service, operation, params or {}, account_id, write=True)

    def billing_query(
        group_by: list[str] | None = None,
        filters: dict[str, str] | None = None,
        granularity: Literal["total", "daily", "hourly"] = "total",
        start: str | None = None,
        end: str | None = None,
        limit: int = 200,
    ) -> list[dict[str, Any]]:
        """Sum BilledCost of the FOCUS billing export, grouped and filtered by its columns.

        Args:
            group_by: FOCUS columns (SubAccountId, ServiceName, ResourceId, ResourceType, SkuId,
                ...) or ``Tags.<key>`` for a tag's value (empty string when untagged).
            filters: Column (or ``Tags.<key>``) -> required value.
            granularity: total, daily or hourly (hourly only where the export has hourly rows).
            start: First day (YYYY-MM-DD) to include.
            end: Day (YYYY-MM-DD) to stop before.
            limit: Most rows returned, biggest cost first.
        """
        keys = list(group_by or ["ServiceName"])
        for k in [*keys, *(filters or {})]:
            if k not in _GROUPABLE and not k.startswith("Tags."):
                raise ToolError(
                    f"cannot group or filter by {k!r}; use one of {', '.join(_GROUPABLE)} or Tags.<key>"
                )
        sums: dict[tuple[str, ...], float] = defaultdict(float)
        tag_cache: dict[str, dict[str, str]] = {}

        def value(row: dict[str, Any], key: str) -> str:
            if key.startswith("Tags."):
                raw = row["Tags"]
                tags = tag_cache.get(raw)
                if tags is None:
                    tags = tag_cache[raw] = json.loads(raw)
                return str(tags.get(key[5:], ""))
            return str(row[key])

        for row in env.rows:
            day = row["ChargePeriodStart"][:10]
            if start and day < start or end and day >= end:
                continue
            if filters and any(value(row, k) != v for k, v in filters.items()):
                continue
            period = {"total": "", "daily": day, "hourly": row["ChargePeriodStart"]}[granularity]
            sums[(period, *(value(row, k) for k in keys))] += row["BilledCost"]
        out = []
        for key, cost in sums.items():
            entry: dict[str, Any] = dict(zip(keys, key[1:], strict=True))
            if granularity != "total":
                entry["period"] = key[0]
            entry["cost"] = round(cost, 4)
            out.append(entry)
        if granularity == "total":
            out.sort(key=lambda e: -e["cost"])
        else:
            out.sort(key=lambda e: (e["period"], -e["cost"]))
        return out[: max(1, limit)] if granularity == "total" else out[: max(1, limit) * 1000]

    def price_list(
        section: Literal["ec2", "rds", "storage", "network", "savings_plan"] = "ec2",
    ) -> dict[str, Any]:
        """On-demand list prices (USD) of the region: hourly prices with vCPU and memory GiB.

        Args:
            section: ec2 (instance types), rds (database classes), storage (EBS, snapshots,
                S3, database storage, per GB-month), network (IPs, load balancers, transfer),
                savings_plan (discount of a one-year compute savings plan).
        """
        raw = env.prices.raw
        if section in ("ec2", "rds"):
            return {
                k: {"hourly": v[0], "vcpu": v[1], "memory_gib": v[2]}
                for k, v in raw[section].items()
            }
        if section == "storage":
            return {
                "ebs_gb_month": raw["ebs_gb_month"],
                "ebs_iops_month": raw["ebs_iops_month"],
                "snapshot_gb_month": raw["snapshot_gb_month"],
                "s3_gb_month": raw["s3_gb_month"],
                "rds_storage_gb_month": raw["rds_storage_gb_month"],
            }
        if section == "network":
            return {
                "public_ipv4_hour": raw["public_ipv4_hour"],
                "load_balancer_hour": raw["load_balancer_hour"],
                "data_transfer_out_gb": raw["data_transfer_out_gb"],
            }
        return {
            "savings_plan_discount": raw["savings_plan_discount"],
            "hours_per_month": raw["hours_per_month"],
        }

    return [
        Tool.from_function(aws_describe, action=False),
        Tool.from_function(aws_call, action=True),
        Tool.from_function(billing_query, action=False),
        Tool.from_function(price_list, action=False),
    ]
