"""Cost Explorer answered from the account's billing data: the FOCUS export's own rows.

The endpoint serves ``GetCostAndUsage``, ``GetCostAndUsageWithResources``,
``GetDimensionValues``, ``GetTags`` and ``GetCostForecast`` through the real ``ce`` wire
API with these functions (moto itself answers every query with one preloaded result). Every
answer is computed from the rows the billing export holds, so an agent that groups by
service, usage type, account or tag, daily, monthly or hourly, reads the same figures as the
export. The management (payer) account sees every account; a member account sees its own.

The module is pure (no moto, no I/O): the endpoint installs it, the tests call it directly.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

#: Metrics of ``GetCostAndUsage`` and the row field each one sums (and its unit).
METRICS = {
    "UnblendedCost": ("cost", "USD"),
    "BlendedCost": ("cost", "USD"),
    "NetUnblendedCost": ("cost", "USD"),
    "AmortizedCost": ("amortized", "USD"),
    "NetAmortizedCost": ("amortized", "USD"),
    "UsageQuantity": ("quantity", "N/A"),
    "NormalizedUsageAmount": ("quantity", "N/A"),
}
#: ``GetCostForecast`` metrics and the ``GetCostAndUsage`` metric each forecasts.
FORECAST_METRICS = {
    "UNBLENDED_COST": "UnblendedCost",
    "BLENDED_COST": "BlendedCost",
    "NET_UNBLENDED_COST": "NetUnblendedCost",
    "AMORTIZED_COST": "AmortizedCost",
    "NET_AMORTIZED_COST": "NetAmortizedCost",
    "USAGE_QUANTITY": "UsageQuantity",
    "NORMALIZED_USAGE_AMOUNT": "NormalizedUsageAmount",
}
#: Dimensions and the row field that holds each.
DIMENSIONS = {
    "AZ": "az",
    "INSTANCE_TYPE": "instance_type",
    "LINKED_ACCOUNT": "account",
    "LINKED_ACCOUNT_NAME": "account_name",
    "OPERATION": "operation",
    "PURCHASE_TYPE": "purchase_type",
    "RECORD_TYPE": "record_type",
    "REGION": "region",
    "SERVICE": "service",
    "USAGE_TYPE": "usage_type",
    "RESOURCE_ID": "resource",
}
#: Dimensions only ``GetCostAndUsageWithResources`` groups and filters by.
RESOURCE_DIMENSIONS = frozenset({"RESOURCE_ID"})
#: Days of history the forecast averages.
FORECAST_BASIS_DAYS = 7
_OPERATIONS = {
    "Instance": "RunInstances",
    "Volume": "CreateVolume",
    "Snapshot": "CreateSnapshot",
    "ElasticIP": "AssociateAddress",
    "LoadBalancer": "LoadBalancing",
    "DBInstance": "CreateDBInstance",
    "DBStorage": "CreateDBInstance",
    "Bucket": "StandardStorage",
    "NatGateway": "NatGateway",
}


class CostExplorerError(ValueError):
    """A request Cost Explorer refuses: ``code`` is the AWS error code."""

    def __init__(self, message: str, code: str = "ValidationException") -> None:
        super().__init__(message)
        self.code = code


# --- rows -------------------------------------------------------------------------------------


def ce_rows(focus: Iterable[dict[str, Any]], account_names: dict[str, str]) -> list[dict[str, Any]]:
    """The rows Cost Explorer sums: one per FOCUS row, with its dimensions and tags."""
    out = []
    for row in focus:
        sku = str(row["SkuId"])
        itype = sku.split(":", 1)[1] if sku.startswith(("BoxUsage:", "InstanceUsage:")) else ""
        tags = json.loads(row["Tags"]) if row["Tags"] else {}
        committed = row.get("PricingCategory") == "Committed"
        out.append(
            {
                "start": row["ChargePeriodStart"],
                "end": row["ChargePeriodEnd"],
                "account": row["SubAccountId"],
                "account_name": account_names.get(row["SubAccountId"], row["SubAccountId"]),
                "service": row["ServiceName"],
                "usage_type": sku,
                "operation": _OPERATIONS.get(row["ResourceType"], "Usage"),
                "region": row["RegionId"],
                "az": row["AvailabilityZone"] or "NoAZ",
                "instance_type": itype or "NoInstanceType",
                "purchase_type": "Reserved Instances" if committed else "On Demand Instances",
                "record_type": "Usage",
                "resource": row["ResourceId"],
                "tags": tags,
                "cost": float(row["BilledCost"]),
                "amortized": float(row["EffectiveCost"]),
                "quantity": float(row["ConsumedQuantity"]),
            }
        )
    return out


# --- parameters -------------------------------------------------------------------------------


def _day(text: Any, what: str) -> datetime:
    value = str(text or "")
    try:
        if len(value) == 10:
            d = date.fromisoformat(value)
            return datetime(d.year, d.month, d.day, tzinfo=UTC)
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return t if t.tzinfo else t.replace(tzinfo=UTC)
    except ValueError:
        raise CostExplorerError(
            f"{what} {value!r} is not a date (YYYY-MM-DD) or time (YYYY-MM-DDThh:mm:ssZ)"
        ) from None


def _period(params: dict[str, Any]) -> tuple[datetime, datetime]:
    period = params.get("TimePeriod")
    if not isinstance(period, dict):
        raise CostExplorerError("TimePeriod is required")
    start, end = _day(period.get("Start"), "Start"), _day(period.get("End"), "End")
    if start >= end:
        raise CostExplorerError("Start date must be before end date")
    return start, end


def _granularity(params: dict[str, Any], allowed: tuple[str, ...]) -> str:
    value = params.get("Granularity")
    if value not in allowed:
        raise CostExplorerError(f"Granularity must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


def _metrics(params: dict[str, Any]) -> list[str]:
    metrics = params.get("Metrics")
    if not isinstance(metrics, list) or not metrics:
        raise CostExplorerError("Metrics is required")
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise CostExplorerError(
            f"Invalid metrics: {', '.join(map(str, bad))} (valid: {', '.join(METRICS)})"
        )
    return [str(m) for m in metrics]


def _dimension(key: Any, resources: bool) -> str:
    valid = [d for d in DIMENSIONS if resources or d not in RESOURCE_DIMENSIONS]
    if key not in valid:
        raise CostExplorerError(
            f"Dimension {key!r} is not supported here (valid: {', '.join(valid)})"
        )
    return DIMENSIONS[str(key)]


Getter = Callable[[dict[str, Any]], str]


def _dimension_of(fld: str) -> Getter:
    def get(row: dict[str, Any]) -> str:
        return str(row[fld])

    return get


def _tag_of(key: str) -> Getter:
    def get(row: dict[str, Any]) -> str:
        return f"{key}${row['tags'].get(key, '')}"

    return get


def _category_of(key: str) -> Getter:
    def get(row: dict[str, Any]) -> str:
        return f"{key}$"  # no cost category is defined: every row has no value

    return get


def _group_keys(params: dict[str, Any], resources: bool) -> list[Getter]:
    groups = params.get("GroupBy") or []
    if not isinstance(groups, list) or len(groups) > 2:
        raise CostExplorerError("GroupBy takes at most two groups")
    out: list[Getter] = []
    for g in groups:
        kind, key = (g or {}).get("Type"), (g or {}).get("Key")
        if kind == "DIMENSION":
            out.append(_dimension_of(_dimension(key, resources)))
        elif kind == "TAG":
            if not key:
                raise CostExplorerError("A TAG group needs a Key")
            out.append(_tag_of(str(key)))
        elif kind == "COST_CATEGORY":
            out.append(_category_of(str(key)))
        else:
            raise CostExplorerError(
                f"GroupBy Type {kind!r} is invalid (valid: DIMENSION, TAG, COST_CATEGORY)"
            )
    return out


def _matches(value: str, wanted: list[str], options: list[str]) -> bool:
    fold = "CASE_INSENSITIVE" in options

    def norm(s: str) -> str:
        return s.lower() if fold else s

    v = norm(value)
    tests = [norm(str(w)) for w in wanted]
    if "STARTS_WITH" in options:
        return any(v.startswith(t) for t in tests)
    if "ENDS_WITH" in options:
        return any(v.endswith(t) for t in tests)
    if "CONTAINS" in options:
        return any(t in v for t in tests)
    return v in tests


def row_filter(expr: Any, resources: bool = False) -> Callable[[dict[str, Any]], bool]:
    """A predicate over rows from a Cost Explorer filter ``Expression``."""
    if expr is None:
        return lambda r: True
    if not isinstance(expr, dict) or len(expr) != 1:
        raise CostExplorerError(
            "An Expression holds exactly one of Dimensions, Tags, CostCategories, And, Or, Not"
        )
    ((op, body),) = expr.items()
    if op in ("And", "Or"):
        if not isinstance(body, list) or len(body) < 2:
            raise CostExplorerError(f"{op} needs a list of at least two expressions")
        parts = [row_filter(e, resources) for e in body]
        if op == "And":
            return lambda r: all(p(r) for p in parts)
        return lambda r: any(p(r) for p in parts)
    if op == "Not":
        inner = row_filter(body, resources)
        return lambda r: not inner(r)
    if op not in ("Dimensions", "Tags", "CostCategories") or not isinstance(body, dict):
        raise CostExplorerError(f"Unknown expression {op!r}")
    values = [str(v) for v in body.get("Values") or []]
    options = [str(o) for o in body.get("MatchOptions") or ["EQUALS"]]
    key = body.get("Key")
    if op == "Dimensions":
        fld = _dimension(key, resources)
        return lambda r: _matches(str(r[fld]), values, options)
    if op == "Tags":
        tag = str(key or "")
        if "ABSENT" in options:
            return lambda r: not r["tags"].get(tag)
        return lambda r: bool(r["tags"].get(tag)) and _matches(r["tags"][tag], values, options)
    return lambda r: "ABSENT" in options


def _scoped(rows: list[dict[str, Any]], account: str, payer: str) -> list[dict[str, Any]]:
    """The rows an account may see: all for the payer, its own for a member account."""
    return rows if account == payer else [r for r in rows if r["account"] == account]


# --- time buckets ------------------------------------------------------------------------------


def _buckets(start: datetime, end: datetime, granularity: str) -> list[tuple[datetime, datetime]]:
    out = []
    t = start
    while t < end:
        if granularity == "HOURLY":
            nxt = t + timedelta(hours=1)
        elif granularity == "DAILY":
            nxt = t.replace(hour=0, minute=0, second=0) + timedelta(days=1)
        else:
            first = t.replace(day=1, hour=0, minute=0, second=0)
            nxt = (first + timedelta(days=32)).replace(day=1)
        out.append((t, min(nxt, end)))
        t = min(nxt, end)
    return out


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _spread(row: dict[str, Any], granularity: str) -> list[tuple[datetime, float]]:
    """The row's share per hour (hourly granularity) or its start with weight 1."""
    start = _parse(row["start"])
    if granularity != "HOURLY":
        return [(start, 1.0)]
    hours = max(1, round((_parse(row["end"]) - start).total_seconds() / 3600))
    return [(start + timedelta(hours=h), 1.0 / hours) for h in range(hours)]


def _fmt(amount: float) -> str:
    return f"{amount:.10f}"


def _stamp(t: datetime, granularity: str) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if granularity == "HOURLY" else t.date().isoformat()


# --- operations --------------------------------------------------------------------------------


def get_cost_and_usage(
    params: dict[str, Any],
    rows: list[dict[str, Any]],
    account: str,
    payer: str,
    *,
    resources: bool = False,
) -> dict[str, Any]:
    """The answer of ``GetCostAndUsage`` (``resources``: ``...WithResources``) for ``account``.

    Raises:
        CostExplorerError: an invalid request.
    """
    start, end = _period(params)
    granularity = _granularity(params, ("DAILY", "MONTHLY", "HOURLY"))
    metrics = _metrics(params)
    keys = _group_keys(params, resources)
    if resources and params.get("Filter") is None:
        raise CostExplorerError("GetCostAndUsageWithResources requires a Filter")
    keep = row_filter(params.get("Filter"), resources)
    buckets = _buckets(start, end, granularity)
    cells: dict[int, dict[tuple[str, ...], dict[str, float]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(float))
    )
    seen_accounts: set[str] = set()
    starts = [b[0] for b in buckets]
    for row in _scoped(rows, account, payer):
        if not keep(row):
            continue
        for t, weight in _spread(row, granularity):
            if not start <= t < end:
                continue
            k = _bucket_index(starts, t)
            key = tuple(get(row) for get in keys)
            for m in metrics:
                cells[k][key][m] += row[METRICS[m][0]] * weight
            seen_accounts.add(row["account"])
    results = []
    for k, (b0, b1) in enumerate(buckets):
        entry: dict[str, Any] = {
            "TimePeriod": {"Start": _stamp(b0, granularity), "End": _stamp(b1, granularity)},
            "Estimated": False,
        }
        if keys:
            entry["Total"] = {}
            entry["Groups"] = [
                {
                    "Keys": list(key),
                    "Metrics": {m: {"Amount": _fmt(v[m]), "Unit": METRICS[m][1]} for m in metrics},
                }
                for key, v in sorted(cells[k].items())
            ]
        else:
            totals = cells[k].get((), {})
            entry["Total"] = {
                m: {"Amount": _fmt(totals.get(m, 0.0)), "Unit": METRICS[m][1]} for m in metrics
            }
            entry["Groups"] = []
        results.append(entry)
    out: dict[str, Any] = {"ResultsByTime": results, "DimensionValueAttributes": []}
    if keys:
        out["GroupDefinitions"] = params.get("GroupBy")
    names = {r["account"]: r["account_name"] for r in rows}
    if any(g.get("Key") == "LINKED_ACCOUNT" for g in params.get("GroupBy") or []):
        out["DimensionValueAttributes"] = [
            {"Value": a, "Attributes": {"description": names.get(a, a)}}
            for a in sorted(seen_accounts)
        ]
    return out


def _bucket_index(starts: list[datetime], t: datetime) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= t:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _in_period(rows: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
    start, end = _period(params)
    return [r for r in rows if start <= _parse(r["start"]) < end]


def get_dimension_values(
    params: dict[str, Any], rows: list[dict[str, Any]], account: str, payer: str
) -> dict[str, Any]:
    """The answer of ``GetDimensionValues``: the values a dimension takes in the period."""
    fld = _dimension(params.get("Dimension"), False)
    search = str(params.get("SearchString") or "").lower()
    keep = row_filter(params.get("Filter"))
    found: dict[str, str] = {}
    for r in _in_period(_scoped(rows, account, payer), params):
        if keep(r) and search in str(r[fld]).lower():
            found[str(r[fld])] = r["account_name"]
    values = [
        {
            "Value": v,
            "Attributes": {"description": found[v]} if fld == "account" else {},
        }
        for v in sorted(found)
    ]
    return {"DimensionValues": values, "ReturnSize": len(values), "TotalSize": len(values)}


def get_tags(
    params: dict[str, Any], rows: list[dict[str, Any]], account: str, payer: str
) -> dict[str, Any]:
    """The answer of ``GetTags``: tag keys, or the values of ``TagKey``, seen in the period."""
    key = params.get("TagKey")
    search = str(params.get("SearchString") or "").lower()
    keep = row_filter(params.get("Filter"))
    found: set[str] = set()
    for r in _in_period(_scoped(rows, account, payer), params):
        if not keep(r):
            continue
        if key:
            found.add(str(r["tags"].get(key, "")))
        else:
            found.update(str(k) for k in r["tags"])
    tags = sorted(t for t in found if search in t.lower())
    return {"Tags": tags, "ReturnSize": len(tags), "TotalSize": len(tags)}


def daily_totals(
    rows: list[dict[str, Any]], keep: Callable[[dict[str, Any]], bool], field: str = "cost"
) -> dict[str, float]:
    """Sum of ``field`` per day (``YYYY-MM-DD``) of the rows ``keep`` accepts."""
    out: dict[str, float] = defaultdict(float)
    for r in rows:
        if keep(r):
            out[r["start"][:10]] += r[field]
    return out


def forecast_daily(
    rows: list[dict[str, Any]],
    keep: Callable[[dict[str, Any]], bool],
    end: date,
    field: str = "cost",
) -> float:
    """The forecast of one day's spend: the mean of the last :data:`FORECAST_BASIS_DAYS`."""
    totals = daily_totals(rows, keep, field)
    days = [(end - timedelta(days=k)).isoformat() for k in range(1, FORECAST_BASIS_DAYS + 1)]
    return sum(totals.get(d, 0.0) for d in days) / FORECAST_BASIS_DAYS


def get_cost_forecast(
    params: dict[str, Any], rows: list[dict[str, Any]], account: str, payer: str, today: date
) -> dict[str, Any]:
    """The answer of ``GetCostForecast``: each future day at the recent daily mean."""
    start, end = _period(params)
    metric = params.get("Metric")
    if metric not in FORECAST_METRICS:
        raise CostExplorerError(
            f"Metric must be one of {', '.join(FORECAST_METRICS)}, not {metric!r}"
        )
    granularity = _granularity(params, ("DAILY", "MONTHLY"))
    if start.date() < today:
        raise CostExplorerError("Start date must be today or later for a forecast")
    fld = METRICS[FORECAST_METRICS[str(metric)]][0]
    daily = forecast_daily(
        _scoped(rows, account, payer), row_filter(params.get("Filter")), today, fld
    )
    level = float(params.get("PredictionIntervalLevel") or 80)
    spread = 0.05 + (level - 50) / 500
    results, total = [], 0.0
    for b0, b1 in _buckets(start, end, granularity):
        mean = daily * (b1 - b0).total_seconds() / 86400
        total += mean
        results.append(
            {
                "TimePeriod": {"Start": b0.date().isoformat(), "End": b1.date().isoformat()},
                "MeanValue": _fmt(mean),
                "PredictionIntervalLowerBound": _fmt(mean * (1 - spread)),
                "PredictionIntervalUpperBound": _fmt(mean * (1 + spread)),
            }
        )
    unit = METRICS[FORECAST_METRICS[str(metric)]][1]
    return {"Total": {"Amount": _fmt(total), "Unit": unit}, "ForecastResultsByTime": results}
