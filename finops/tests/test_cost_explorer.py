"""Cost Explorer answers from the billing rows: groups, filters, periods, scopes, errors."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from itbench_finops.cost_explorer import (
    CostExplorerError,
    ce_rows,
    get_cost_and_usage,
    get_cost_forecast,
    get_dimension_values,
    get_tags,
)

PAYER, MEMBER = "123456789012", "210987654321"


def _row(
    day: str, account: str, service: str, rid: str, cost: float, **extra: Any
) -> dict[str, Any]:
    return {
        "ChargePeriodStart": f"{day}T00:00:00Z",
        "ChargePeriodEnd": f"{date.fromordinal(date.fromisoformat(day).toordinal() + 1)}T00:00:00Z",
        "SubAccountId": account,
        "ServiceName": service,
        "SkuId": extra.pop("sku", "BoxUsage:m5.large"),
        "ResourceType": extra.pop("rtype", "Instance"),
        "RegionId": "us-east-1",
        "AvailabilityZone": "us-east-1a",
        "ResourceId": rid,
        "Tags": json.dumps(extra.pop("tags", {})),
        "BilledCost": cost,
        "EffectiveCost": cost,
        "ConsumedQuantity": 24.0,
        "PricingCategory": "Standard",
        **extra,
    }


EC2, S3 = "Amazon Elastic Compute Cloud - Compute", "Amazon Simple Storage Service"
ROWS = ce_rows(
    [
        _row("2026-11-29", PAYER, EC2, "i-1", 10.0, tags={"team": "web"}),
        _row("2026-11-30", PAYER, EC2, "i-1", 10.0, tags={"team": "web"}),
        _row("2026-12-01", PAYER, EC2, "i-1", 12.0, tags={"team": "web"}),
        _row("2026-11-30", MEMBER, S3, "bkt", 4.0, sku="S3:TimedStorage-ByteHrs", rtype="Bucket"),
        _row("2026-12-01", MEMBER, S3, "bkt", 6.0, sku="S3:TimedStorage-ByteHrs", rtype="Bucket"),
    ],
    {PAYER: "management", MEMBER: "analytics"},
)
PERIOD = {"Start": "2026-11-29", "End": "2026-12-02"}


def _ask(**params: Any) -> dict[str, Any]:
    return get_cost_and_usage(
        {"TimePeriod": PERIOD, "Granularity": "DAILY", "Metrics": ["UnblendedCost"], **params},
        ROWS,
        PAYER,
        PAYER,
    )


def _cells(result: dict[str, Any]) -> dict[tuple[str, ...], float]:
    return {
        (day["TimePeriod"]["Start"], *g["Keys"]): float(g["Metrics"]["UnblendedCost"]["Amount"])
        for day in result["ResultsByTime"]
        for g in day["Groups"]
    }


def test_daily_totals_and_groups_by_dimension_and_tag() -> None:
    totals = [float(d["Total"]["UnblendedCost"]["Amount"]) for d in _ask()["ResultsByTime"]]
    assert totals == [10.0, 14.0, 18.0]
    by_service = _cells(_ask(GroupBy=[{"Type": "DIMENSION", "Key": "SERVICE"}]))
    assert by_service[("2026-12-01", S3)] == 6.0 and by_service[("2026-11-30", EC2)] == 10.0
    by_tag = _cells(_ask(GroupBy=[{"Type": "TAG", "Key": "team"}]))
    assert by_tag[("2026-12-01", "team$web")] == 12.0 and by_tag[("2026-12-01", "team$")] == 6.0
    two = _ask(
        GroupBy=[
            {"Type": "DIMENSION", "Key": "LINKED_ACCOUNT"},
            {"Type": "DIMENSION", "Key": "USAGE_TYPE"},
        ]
    )
    assert _cells(two)[("2026-11-30", MEMBER, "S3:TimedStorage-ByteHrs")] == 4.0
    assert {"Value": MEMBER, "Attributes": {"description": "analytics"}} in two[
        "DimensionValueAttributes"
    ]


def test_monthly_and_hourly_periods() -> None:
    monthly = _ask(Granularity="MONTHLY")["ResultsByTime"]
    assert [(m["TimePeriod"]["Start"], m["TimePeriod"]["End"]) for m in monthly] == [
        ("2026-11-29", "2026-12-01"),
        ("2026-12-01", "2026-12-02"),
    ]
    assert float(monthly[0]["Total"]["UnblendedCost"]["Amount"]) == 24.0
    hourly = _ask(
        Granularity="HOURLY",
        TimePeriod={"Start": "2026-12-01T00:00:00Z", "End": "2026-12-01T03:00:00Z"},
    )["ResultsByTime"]
    assert len(hourly) == 3 and hourly[0]["TimePeriod"]["Start"] == "2026-12-01T00:00:00Z"
    assert float(hourly[0]["Total"]["UnblendedCost"]["Amount"]) == pytest.approx(18.0 / 24)


def test_filters_and_the_member_accounts_view() -> None:
    s3_only = _ask(Filter={"Dimensions": {"Key": "SERVICE", "Values": [S3]}})
    assert [float(d["Total"]["UnblendedCost"]["Amount"]) for d in s3_only["ResultsByTime"]] == [
        0,
        4,
        6,
    ]
    untagged = _ask(Filter={"Tags": {"Key": "team", "MatchOptions": ["ABSENT"]}})
    assert float(untagged["ResultsByTime"][2]["Total"]["UnblendedCost"]["Amount"]) == 6.0
    both = _ask(
        Filter={
            "And": [
                {"Dimensions": {"Key": "LINKED_ACCOUNT", "Values": [PAYER]}},
                {"Not": {"Tags": {"Key": "team", "Values": ["data"]}}},
            ]
        }
    )
    assert float(both["ResultsByTime"][2]["Total"]["UnblendedCost"]["Amount"]) == 12.0
    member = get_cost_and_usage(
        {"TimePeriod": PERIOD, "Granularity": "DAILY", "Metrics": ["UnblendedCost"]},
        ROWS,
        MEMBER,
        PAYER,
    )
    assert float(member["ResultsByTime"][2]["Total"]["UnblendedCost"]["Amount"]) == 6.0


def test_resources_dimensions_tags_and_forecast() -> None:
    with_resources = get_cost_and_usage(
        {
            "TimePeriod": PERIOD,
            "Granularity": "DAILY",
            "Metrics": ["UnblendedCost"],
            "Filter": {"Dimensions": {"Key": "SERVICE", "Values": [EC2]}},
            "GroupBy": [{"Type": "DIMENSION", "Key": "RESOURCE_ID"}],
        },
        ROWS,
        PAYER,
        PAYER,
        resources=True,
    )
    assert _cells(with_resources)[("2026-12-01", "i-1")] == 12.0
    values = get_dimension_values(
        {"TimePeriod": PERIOD, "Dimension": "SERVICE"}, ROWS, PAYER, PAYER
    )
    assert [v["Value"] for v in values["DimensionValues"]] == [EC2, S3]
    assert get_tags({"TimePeriod": PERIOD}, ROWS, PAYER, PAYER)["Tags"] == ["team"]
    assert get_tags({"TimePeriod": PERIOD, "TagKey": "team"}, ROWS, PAYER, PAYER)["Tags"] == [
        "",
        "web",
    ]
    forecast = get_cost_forecast(
        {
            "TimePeriod": {"Start": "2026-12-02", "End": "2026-12-04"},
            "Metric": "UNBLENDED_COST",
            "Granularity": "DAILY",
        },
        ROWS,
        PAYER,
        PAYER,
        date(2026, 12, 2),
    )
    assert float(forecast["Total"]["Amount"]) == pytest.approx(2 * 42.0 / 7)


@pytest.mark.parametrize(
    ("params", "phrase"),
    [
        ({"Granularity": "WEEKLY"}, "Granularity must be one of DAILY, MONTHLY, HOURLY"),
        ({"Metrics": ["Cost"]}, "Invalid metrics: Cost (valid: UnblendedCost"),
        (
            {"GroupBy": [{"Type": "DIMENSION", "Key": "COLOR"}]},
            "Dimension 'COLOR' is not supported",
        ),
        ({"GroupBy": [{"Type": "DIMENSION", "Key": "RESOURCE_ID"}]}, "(valid: AZ, INSTANCE_TYPE"),
        ({"TimePeriod": {"Start": "2026-12-02", "End": "2026-12-01"}}, "Start date must be before"),
        ({"TimePeriod": {"Start": "yesterday", "End": "2026-12-01"}}, "is not a date"),
        ({"Filter": {"Dimensions": {"Key": "SERVICE"}, "Tags": {}}}, "exactly one of"),
    ],
)
def test_invalid_requests_are_refused_with_the_reason(params: dict[str, Any], phrase: str) -> None:
    with pytest.raises(CostExplorerError, match=None) as info:
        _ask(**params)
    assert phrase in str(info.value), str(info.value)
