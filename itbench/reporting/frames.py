"""Pandas frames over results and the summary tables of ``itbench report``.

Definitions (per domain and agent):

- ``agent``: the agent's name, followed by its labels in brackets when it has any
  (``[unsandboxed]``: it ran outside the sandbox and could read the harness, so its score
  proves nothing; ``[reference]``: a reference agent that reads ground truth by design).
- ``trials``: results recorded; ``errors``: infrastructure errors, excluded from every score;
  ``invalid``: trials whose evaluator inputs, harness servers or scoring code were tampered
  with. Invalid trials are scored as failures (never passes, and never dropped, so tampering
  cannot hide a failure) and counted apart.
- ``pass_rate``: passed / (trials - errors).
- ``pass@k``: the unbiased estimator ``1 - C(n-c, k) / C(n, k)`` per scenario (``n`` scored trials,
  ``c`` passed), averaged over scenarios with ``n >= k``.
- ``<metric>_mean`` / ``<metric>_se``: mean and standard error (``s / sqrt(n)``) over scored trials
  that report the metric; booleans count as 0/1.
- ``<timing>_mean``: mean seconds of each phase over scored trials.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from math import comb
from typing import Any

import pandas as pd

from itbench.console import agent_label
from itbench.models import TrialResult

TIMING_COLUMNS = (
    "setup",
    "ready",
    "agent",
    "evaluate",
    "teardown",
    "total",
    "time_to_detect",
    "time_to_mitigate",
)
KEY_COLUMNS = ("domain", "agent")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for ``n`` samples with ``c`` correct (NaN when ``n < k``)."""
    if n < k or k < 1:
        return math.nan
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def results_frame(results: Iterable[TrialResult]) -> pd.DataFrame:
    """One row per trial: ids, status, ``facet.<name>``, ``metric.<name>`` and ``time.<phase>``."""
    rows: list[dict[str, Any]] = []
    for r in results:
        row: dict[str, Any] = {
            "run_id": r.run_id,
            "trial_id": r.trial_id,
            "scenario_id": r.scenario_id,
            "domain": r.domain,
            "agent": agent_label(r.agent, r.labels),
            "labels": ",".join(r.labels),
            "trial_index": r.trial_index,
            "seed": r.seed,
            "status": r.status.value,
            "passed": r.status.value == "passed",
            "error": r.status.value == "error",
            "invalid": r.status.value == "invalid",
            "complexity": r.complexity.value if r.complexity else None,
            "steps": r.steps,
            "tool_calls": r.tool_calls,
            "input_tokens": r.usage.input_tokens,
            "output_tokens": r.usage.output_tokens,
            "cost_usd": r.usage.cost_usd,
        }
        for name, facet in r.facets.items():
            row[f"facet.{name}"] = facet
        for name, value in r.metrics.items():
            row[f"metric.{name}"] = float(value) if value is not None else math.nan
        for phase in TIMING_COLUMNS:
            value = getattr(r.timings, phase)
            row[f"time.{phase}"] = value if value is not None else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_se(values: pd.Series) -> tuple[float, float]:
    vals = values.dropna().astype(float)
    if vals.empty:
        return math.nan, math.nan
    mean = float(vals.mean())
    se = float(vals.std(ddof=1) / math.sqrt(len(vals))) if len(vals) > 1 else 0.0
    return mean, se


def summarize(frame: pd.DataFrame, k: int = 1, by: tuple[str, ...] = KEY_COLUMNS) -> pd.DataFrame:
    """The summary table: one row per group of ``by`` (default domain and agent)."""
    if frame.empty:
        return pd.DataFrame(
            columns=[*by, "trials", "errors", "invalid", "passed", "pass_rate", f"pass@{k}"]
        )
    metric_cols = sorted(c for c in frame.columns if c.startswith("metric."))
    rows = []
    for key, group in frame.groupby(list(by), sort=True):
        keys = key if isinstance(key, tuple) else (key,)
        scored = group[~group["error"]]
        row: dict[str, Any] = dict(zip(by, keys, strict=True))
        row["trials"] = len(group)
        row["errors"] = int(group["error"].sum())
        row["invalid"] = int(group["invalid"].sum())
        row["passed"] = int(scored["passed"].sum())
        row["pass_rate"] = row["passed"] / len(scored) if len(scored) else math.nan
        per_scenario = [
            pass_at_k(len(g), int(g["passed"].sum()), k) for _, g in scored.groupby("scenario_id")
        ]
        valid = [p for p in per_scenario if not math.isnan(p)]
        row[f"pass@{k}"] = sum(valid) / len(valid) if valid else math.nan
        for col in metric_cols:
            name = col.removeprefix("metric.")
            row[f"{name}_mean"], row[f"{name}_se"] = _mean_se(scored[col])
        for phase in TIMING_COLUMNS:
            row[f"{phase}_mean"] = _mean_se(scored[f"time.{phase}"])[0]
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def display_rows(summary: pd.DataFrame, k: int = 1) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the summary table: counts, pass rate, pass@k and mean timings."""
    header = ["domain", "agent", "trials", "errors", "invalid", "pass rate", f"pass@{k}"]
    header += ["setup s", "agent s", "total s"]
    rows = []
    for _, r in summary.iterrows():
        row = [str(r["domain"]), str(r["agent"]), str(r["trials"]), str(r["errors"])]
        row.append(str(r.get("invalid", 0)))
        row += [_fmt(r["pass_rate"]), _fmt(r.get(f"pass@{k}"))]
        row += [
            _fmt(r.get("setup_mean"), 2),
            _fmt(r.get("agent_mean"), 2),
            _fmt(r.get("total_mean"), 2),
        ]
        rows.append(row)
    return header, rows


def metric_rows(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the metrics table: one row per (domain, metric), a column per agent.

    Domains report different metrics, so one row per metric keeps each readable and puts the
    agents side by side; a metric no scored trial of a domain reported is left out.
    """
    names = [c.removesuffix("_se") for c in summary.columns if c.endswith("_se")]
    agents = sorted({str(a) for a in summary["agent"]}) if not summary.empty else []
    header = ["domain", "metric", *agents]
    rows = []
    for domain, group in summary.groupby("domain", sort=True):
        by_agent = {str(r["agent"]): r for _, r in group.iterrows()}
        for name in names:
            cells = []
            for agent in agents:
                r = by_agent.get(agent)
                if r is None or math.isnan(r[f"{name}_mean"]):
                    cells.append("–")
                else:
                    cells.append(f"{r[f'{name}_mean']:.3f} ± {r[f'{name}_se']:.3f}")
            if any(c != "–" for c in cells):
                rows.append([str(domain), name, *cells])
    return header, rows


def _markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def markdown_table(summary: pd.DataFrame, k: int | None = None) -> str:
    """The summary and metrics tables as GitHub-flavoured Markdown."""
    if k is None:
        ks = [c for c in summary.columns if c.startswith("pass@")]
        k = int(ks[0].removeprefix("pass@")) if ks else 1
    lines = _markdown(*display_rows(summary, k))
    metrics = metric_rows(summary)
    if metrics[1]:
        lines += ["", "### Metrics", "", *_markdown(*metrics)]
    return "\n".join(lines) + "\n"
