"""The tables of a report: the summary per domain and agent, metrics, and breakdowns.

Definitions (per group of trials, by default a domain and an agent):

- ``agent``: the agent's name followed by its labels in brackets when it has any
  (``[unsandboxed]``: it ran outside the sandbox and could read the harness, so its score
  proves nothing; ``[reference]``: a reference agent that reads ground truth by design).
- ``trials``: results recorded. ``errors``: infrastructure errors (setup, readiness,
  evaluation, teardown broke), shown apart and excluded from every score. ``invalid``: trials
  whose evaluator inputs, harness servers or scoring code were tampered with during the agent's
  turn, shown apart and scored as failures: dropping them would let an agent hide a failure by
  tampering. ``scored`` = trials - errors.
- ``pass_rate``: passed / scored, with its standard error ``pass_rate_se`` (of the mean of the
  0/1 outcomes) and a 95 % confidence interval ``ci_low``..``ci_high`` from a bootstrap that
  resamples problems (the trials of one problem are not independent; see
  :mod:`itbench.report.stats`).
- ``problems``: distinct scenarios; ``solved``: problems with at least one pass.
- Controls (scenarios tagged ``control``: no fault, the agent must explain what it sees) are
  summarized apart, in the same columns, and never folded into the summary's pass rate; the
  ``control`` breakdown shows both side by side.
- ``pass@k`` and ``pass^k``: the unbiased estimators per problem, averaged over the
  ``pass@k_problems`` problems with at least ``k`` scored trials (tables show that count when
  it is not every problem).
- ``<metric>_mean`` / ``<metric>_se``: mean and standard error over scored trials that report
  the metric; booleans count as 0/1. ``<phase>_mean``: mean seconds of a phase.
- ``input_tokens``, ``output_tokens``, ``cost_usd``: totals over scored trials where agents
  report them; ``cost_per_solved`` and ``tokens_per_solved`` divide them by ``solved``.
- Breakdowns repeat the counts, pass rate and interval per value of one dimension: each facet
  of the scenarios (``mechanism``, ``family``, ...), ``complexity`` and ``task_type``. A trial
  counts under each of its scenario's task types, as passed when its ``<task>_pass`` metric
  says so (or, without that metric, when the trial passed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from itbench.report.dataset import TIMING_COLUMNS, Frames
from itbench.report.stats import cluster_bootstrap, mean_se, pass_at_k, pass_hat_k

KEY_COLUMNS = ("domain", "agent")
#: Dimensions of the breakdowns besides the facets.
FIXED_DIMENSIONS = ("complexity", "task_type")
_TITLES = {"task_type": "task type"}


def title(dimension: str) -> str:
    """How tables and plots name a breakdown dimension."""
    return _TITLES.get(dimension, dimension)


@dataclass
class Report:
    """Everything a reporter writes: the frames and the tables built from them."""

    frames: Frames
    k: int
    #: One row per domain and agent over the problems (controls left out).
    summary: pd.DataFrame
    breakdowns: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: The same over the controls alone (``None`` without any).
    controls: pd.DataFrame | None = None


def _rate_stats(group: pd.DataFrame, k: int) -> dict[str, Any]:
    """Counts, pass rate, standard error, clustered interval, pass@k and pass^k of trials."""
    scored = group[group["scored"]]
    row: dict[str, Any] = {
        "trials": len(group),
        "errors": int(group["error"].sum()),
        "unavailable": int(group["unavailable"].sum()) if "unavailable" in group else 0,
        "invalid": int(group["invalid"].sum()),
        "scored": len(scored),
        "passed": int(scored["passed"].sum()),
    }
    if scored.empty:
        row.update(pass_rate=math.nan, pass_rate_se=math.nan, ci_low=math.nan, ci_high=math.nan)
        row.update({"problems": 0, "solved": 0, f"pass@{k}": math.nan, f"pass^{k}": math.nan})
        row[f"pass@{k}_problems"] = 0
        return row
    row["pass_rate"] = row["passed"] / len(scored)
    row["pass_rate_se"] = mean_se(scored["passed"].astype(float).to_numpy())[1]
    per = scored.groupby("scenario_id")["passed"].agg(["sum", "size"])
    row["ci_low"], row["ci_high"] = cluster_bootstrap(per["sum"].to_numpy(), per["size"].to_numpy())
    row["problems"] = len(per)
    row["solved"] = int((per["sum"] > 0).sum())
    for name, fn in ((f"pass@{k}", pass_at_k), (f"pass^{k}", pass_hat_k)):
        vals = [fn(int(n), int(c), k) for c, n in zip(per["sum"], per["size"], strict=True)]
        finite = [v for v in vals if not math.isnan(v)]
        row[name] = sum(finite) / len(finite) if finite else math.nan
    # Problems with fewer than k scored trials have no estimate: say how many are covered.
    row[f"pass@{k}_problems"] = int((per["size"] >= k).sum())
    return row


def _usage(scored: pd.DataFrame, solved: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in ("input_tokens", "output_tokens", "cost_usd"):
        vals = pd.to_numeric(scored[col], errors="coerce") if col in scored else pd.Series([])
        out[col] = float(vals.sum()) if vals.notna().any() else math.nan
    tokens = np.nansum([out["input_tokens"], out["output_tokens"]])
    known = not (math.isnan(out["input_tokens"]) and math.isnan(out["output_tokens"]))
    out["tokens_per_solved"] = float(tokens) / solved if known and solved else math.nan
    cost = out["cost_usd"]
    out["cost_per_solved"] = cost / solved if not math.isnan(cost) and solved else math.nan
    return out


def summarize(trials: pd.DataFrame, k: int = 1, by: tuple[str, ...] = KEY_COLUMNS) -> pd.DataFrame:
    """The summary table: one row per group of ``by`` (default domain and agent)."""
    base = [*by, "trials", "errors", "invalid", "scored", "passed", "pass_rate"]
    if trials.empty:
        return pd.DataFrame(columns=[*base, f"pass@{k}", f"pass^{k}"])
    metric_cols = sorted(c for c in trials.columns if c.startswith("metric."))
    rows = []
    for key, group in trials.groupby(list(by), sort=True, dropna=False):
        keys = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(by, keys, strict=True))
        row.update(_rate_stats(group, k))
        scored = group[group["scored"]]
        for col in metric_cols:
            name = col.removeprefix("metric.")
            row[f"{name}_mean"], row[f"{name}_se"] = mean_se(scored[col].to_numpy(dtype=float))
        for phase in TIMING_COLUMNS:
            col = f"time.{phase}"
            values = scored[col].to_numpy(dtype=float) if col in scored else np.array([])
            row[f"{phase}_mean"] = mean_se(values)[0]
        row.update(_usage(scored, row["solved"]))
        rows.append(row)
    return pd.DataFrame(rows)


def _task_rows(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per trial and task type of its scenario, ``passed`` as that task's verdict."""
    split = trials["task_types"].fillna("").astype(str).str.split(";")
    exploded = trials.assign(task_type=split).explode("task_type").reset_index(drop=True)
    exploded = exploded[exploded["task_type"] != ""].reset_index(drop=True)
    verdict = exploded["passed"].astype(bool).to_numpy().copy()
    for task in exploded["task_type"].unique():
        col = f"metric.{task}_pass"
        if col in exploded:
            mask = ((exploded["task_type"] == task) & exploded[col].notna()).to_numpy()
            verdict[mask] = exploded.loc[mask, col].astype(bool).to_numpy()
    exploded["passed"] = verdict
    return exploded


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def dimensions(trials: pd.DataFrame) -> list[str]:
    """The breakdown dimensions these trials have: their facets, complexity, task type."""
    facets = sorted(c.removeprefix("facet.") for c in trials.columns if c.startswith("facet."))
    return [*facets, *FIXED_DIMENSIONS]


def breakdown(trials: pd.DataFrame, dimension: str, k: int = 1) -> pd.DataFrame:
    """Counts, pass rate and interval per (domain, value of ``dimension``, agent)."""
    if dimension == "task_type":
        frame, col = _task_rows(trials), "task_type"
    elif dimension == "complexity":
        frame, col = trials, "complexity"
    else:
        frame, col = trials, f"facet.{dimension}"
    if frame.empty or col not in frame or frame[col].isna().all():
        return pd.DataFrame(columns=["domain", dimension, "agent", "trials", "pass_rate"])
    frame = frame[frame[col].notna()]
    rows = []
    for (domain, value, agent), group in frame.groupby(["domain", col, "agent"], sort=True):
        row: dict[str, Any] = {"domain": domain, dimension: value, "agent": agent}
        row.update(_rate_stats(group, k))
        rows.append(row)
    return pd.DataFrame(rows)


def problems_and_controls(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trials of problems, and those of controls (scored apart, never in the pass rate)."""
    if trials.empty or "control" not in trials:
        return trials, trials.iloc[0:0]
    control = trials["control"].fillna(False).astype(bool)
    return trials[~control], trials[control]


def build(frames: Frames, k: int = 1) -> Report:
    """The report of some frames: the summary, the controls' summary and every breakdown."""
    trials = frames.trials
    problems, controls = problems_and_controls(trials)
    summary = summarize(problems, k)
    parts = {d: breakdown(trials, d, k) for d in dimensions(trials)} if not trials.empty else {}
    parts = {d: b for d, b in parts.items() if not b.empty}
    return Report(frames, k, summary, parts, summarize(controls, k) if len(controls) else None)


def fmt(value: Any, digits: int = 3) -> str:
    """A cell: ``–`` for missing values, floats with ``digits`` decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float | np.floating):
        return f"{value:.{digits}f}"
    return str(value)


def interval(row: Any) -> str:
    """``[low, high]`` of a row's confidence interval, or ``–``."""
    low, high = row.get("ci_low"), row.get("ci_high")
    if low is None or _isnan(low):
        return "–"
    return f"[{low:.2f}, {high:.2f}]"


def display_rows(summary: pd.DataFrame, k: int = 1) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the summary table: counts, pass rate and interval, pass@k, pass^k."""
    header = ["domain", "agent", "trials", "errors", "invalid", "pass rate", "95% CI"]
    header += [f"pass@{k}", f"pass^{k}", "setup s", "agent s", "total s"]
    rows = []
    for _, r in summary.iterrows():
        errors, unavailable = str(r["errors"]), r.get("unavailable", 0)
        if unavailable and not _isnan(unavailable):
            errors += f" (+{int(unavailable)} model unavailable)"
        row = [str(r["domain"]), str(r["agent"]), str(r["trials"]), errors]
        row.append(str(r.get("invalid", 0)))
        rate = r["pass_rate"]
        se = r.get("pass_rate_se")
        row.append("–" if _isnan(rate) else f"{rate:.3f} ± {se:.3f}")
        covered, problems = r.get(f"pass@{k}_problems"), r.get("problems")
        note = f" ({covered}/{problems})" if covered is not None and covered != problems else ""
        row += [interval(r), fmt(r.get(f"pass@{k}")) + note, fmt(r.get(f"pass^{k}")) + note]
        row += [
            fmt(r.get("setup_mean"), 2),
            fmt(r.get("agent_mean"), 2),
            fmt(r.get("total_mean"), 2),
        ]
        rows.append(row)
    return header, rows


def metric_rows(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the metrics table: one row per (domain, metric), a column per agent.

    Domains report different metrics, so one row per metric keeps each readable and puts the
    agents side by side; a metric no scored trial of a domain reported is left out.
    """
    names = [
        c.removesuffix("_se") for c in summary.columns if c.endswith("_se") and c != "pass_rate_se"
    ]
    agents = sorted({str(a) for a in summary["agent"]}) if not summary.empty else []
    header = ["domain", "metric", *agents]
    rows = []
    for domain, group in summary.groupby("domain", sort=True):
        by_agent = {str(r["agent"]): r for _, r in group.iterrows()}
        for name in names:
            cells = []
            for agent in agents:
                r = by_agent.get(agent)
                if r is None or _isnan(r[f"{name}_mean"]):
                    cells.append("–")
                else:
                    cells.append(f"{r[f'{name}_mean']:.3f} ± {r[f'{name}_se']:.3f}")
            if any(c != "–" for c in cells):
                rows.append([str(domain), name, *cells])
    return header, rows


def breakdown_rows(part: pd.DataFrame, dimension: str) -> tuple[list[str], list[list[str]]]:
    """A breakdown as a wide table: a row per (domain, value), a column per agent.

    Each cell is the pass rate with passed/scored trials, ``–`` where the agent has no trial.
    """
    agents = sorted({str(a) for a in part["agent"]})
    header = ["domain", title(dimension), *agents]
    rows = []
    for (domain, value), group in part.groupby(["domain", dimension], sort=True):
        by_agent = {str(r["agent"]): r for _, r in group.iterrows()}
        cells = []
        for agent in agents:
            r = by_agent.get(agent)
            if r is None or _isnan(r["pass_rate"]):
                cells.append("–")
            else:
                cells.append(f"{r['pass_rate']:.2f} ({r['passed']}/{r['scored']})")
        rows.append([str(domain), str(value), *cells])
    return header, rows
