"""Pandas frames over run directories: trials, metrics and scenarios.

These frames are a public API (:func:`itbench.report.frames`): analyses beyond the built-in
tables start from them.

- ``trials``: one row per recorded trial. Columns: ``run_id``, ``trial_id``, ``scenario_id``,
  ``domain``, ``agent`` (the run's label followed by the result's labels in brackets, as every
  table shows and groups it: ``--label``, by default the agent with its model), ``agent_name``,
  ``run_label``, ``labels``, ``model`` (the run's ``--model``, when it has one),
  ``trial_index``, ``seed``, ``status``, ``passed``, ``error``, ``invalid``, ``scored`` (not an
  infrastructure error), ``complexity``, ``task_types`` (``;``-joined), ``steps``,
  ``tool_calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, ``started_at``,
  ``facet.<name>`` (the scenario's report categories: mechanism, family, ...),
  ``metric.<name>`` (numbers; booleans as 0/1) and ``time.<phase>`` (seconds).
- ``metrics``: one row per trial and metric (long form): ``run_id``, ``trial_id``,
  ``scenario_id``, ``domain``, ``agent``, ``metric``, ``value``.
- ``scenarios``: one row per (domain, agent, scenario): ``trials``, ``scored``, ``passed``,
  ``errors``, ``invalid``, ``pass_rate``, ``complexity``, ``task_types`` and the facets.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from itbench.console import agent_label
from itbench.errors import RunDirError
from itbench.models import CONTROL_TAG, RunManifest, TrialResult
from itbench.store import RunStore

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


@dataclass
class Frames:
    """The frames of one or more runs (see the module docstring for their columns)."""

    trials: pd.DataFrame
    metrics: pd.DataFrame
    scenarios: pd.DataFrame


def trial_row(r: TrialResult, model: str | None = None, label: str | None = None) -> dict[str, Any]:
    """The row of the ``trials`` frame for one result.

    ``agent``, the column every table groups by, is the run's label (by default the agent with
    its model) with the result's labels: two models, or two labelled programs of one agent
    kind, are two rows.
    """
    status = r.status.value
    row: dict[str, Any] = {
        "run_id": r.run_id,
        "trial_id": r.trial_id,
        "scenario_id": r.scenario_id,
        "domain": r.domain,
        "agent": agent_label(label or r.agent, r.labels),
        "agent_name": r.agent,
        "run_label": label or r.agent,
        "labels": ",".join(r.labels),
        "model": model,
        "trial_index": r.trial_index,
        "seed": r.seed,
        "status": status,
        "passed": status == "passed",
        "error": status == "error",
        "invalid": status == "invalid",
        "unavailable": status == "unavailable",
        "scored": status not in ("error", "unavailable"),
        "complexity": r.complexity.value if r.complexity else None,
        "task_types": ";".join(r.task_types),
        "steps": r.steps,
        "tool_calls": r.tool_calls,
        "input_tokens": r.usage.input_tokens,
        "output_tokens": r.usage.output_tokens,
        "cost_usd": r.usage.cost_usd,
        "started_at": r.started_at,
    }
    for name, facet in r.facets.items():
        row[f"facet.{name}"] = facet
    row["control"] = r.facets.get(CONTROL_TAG) == "yes"
    for name, value in r.metrics.items():
        row[f"metric.{name}"] = float(value) if value is not None else math.nan
    for phase in TIMING_COLUMNS:
        value = getattr(r.timings, phase)
        row[f"time.{phase}"] = value if value is not None else math.nan
    return row


class _Columns:
    """Rows gathered column by column (much cheaper for pandas than a list of dicts)."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {}
        self.rows = 0

    def add(self, row: dict[str, Any]) -> None:
        for key, value in row.items():
            column = self.columns.get(key)
            if column is None:
                # A column first seen now (a metric only some domains report) is missing before.
                column = self.columns[key] = [_missing(key)] * self.rows
            column.append(value)
        self.rows += 1
        for key, column in self.columns.items():
            if len(column) < self.rows:
                column.append(_missing(key))

    def frame(self) -> pd.DataFrame:
        if not self.rows:
            return pd.DataFrame(columns=["run_id", "trial_id", "scenario_id", "domain", "agent"])
        return pd.DataFrame(self.columns)


def _missing(column: str) -> Any:
    return math.nan if column.startswith(("metric.", "time.")) else None


@contextmanager
def _no_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector while many objects are made and kept.

    Reading 100,000 results allocates millions of objects that all survive; the collector's
    repeated passes over them would double the time, and none of them form cycles.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def results_frame(results: Iterable[TrialResult], model: str | None = None) -> pd.DataFrame:
    """The ``trials`` frame of some results (their run's ``model`` option, if known)."""
    columns = _Columns()
    with _no_collection():
        for r in results:
            columns.add(trial_row(r, model))
        return columns.frame()


def metrics_frame(trials: pd.DataFrame) -> pd.DataFrame:
    """The long ``metrics`` frame of a ``trials`` frame."""
    keys = ["run_id", "trial_id", "scenario_id", "domain", "agent"]
    cols = [c for c in trials.columns if c.startswith("metric.")]
    if trials.empty or not cols:
        return pd.DataFrame(columns=[*keys, "metric", "value"])
    long = trials[keys + cols].melt(id_vars=keys, var_name="metric", value_name="value")
    long["metric"] = long["metric"].str.removeprefix("metric.")
    return long.dropna(subset=["value"]).reset_index(drop=True)


def scenarios_frame(trials: pd.DataFrame) -> pd.DataFrame:
    """The ``scenarios`` frame: counts and pass rate per (domain, agent, scenario)."""
    keys = ["domain", "agent", "scenario_id"]
    facets = [c for c in trials.columns if c.startswith("facet.")]
    columns = [*keys, "trials", "scored", "passed", "errors", "invalid", "pass_rate"]
    if trials.empty:
        return pd.DataFrame(columns=columns)
    grouped = trials.groupby(keys, sort=True)
    out = grouped.agg(
        trials=("trial_id", "size"),
        scored=("scored", "sum"),
        passed=("passed", "sum"),
        errors=("error", "sum"),
        invalid=("invalid", "sum"),
        complexity=("complexity", "first"),
        task_types=("task_types", "first"),
        **{f: (f, "first") for f in facets},
    ).reset_index()
    out["pass_rate"] = out["passed"] / out["scored"].where(out["scored"] > 0)
    return out


def frames_of(runs: Sequence[tuple[RunManifest, Iterable[TrialResult]]]) -> Frames:
    """The frames of runs: each a manifest and its results (a list, or read as they come)."""
    columns = _Columns()
    with _no_collection():
        for manifest, results in runs:
            model, label = manifest.config.model, manifest.config.display_label
            for r in results:
                columns.add(trial_row(r, model, label))
        trials = columns.frame()
    return Frames(trials, metrics_frame(trials), scenarios_frame(trials))


def frames(run_dirs: Sequence[Path | str]) -> Frames:
    """The ``trials``, ``metrics`` and ``scenarios`` frames of one or more run directories.

    Results are read line by line and checked against their run's manifest; a torn last line
    (a trial whose write a killed run cut short) is skipped.

    Raises:
        RunDirError: a directory that is not a run, or results its manifest does not hold.
    """
    runs = []
    seen: dict[str, Path] = {}
    for run_dir in run_dirs:
        store = RunStore(Path(run_dir))
        manifest = store.read_manifest()
        if manifest.run_id in seen:
            # The same run twice (or a copy) would count its trials twice.
            raise RunDirError(
                f"{store.manifest_path}: run {manifest.run_id!r} was given already "
                f"({seen[manifest.run_id]})"
            )
        seen[manifest.run_id] = Path(run_dir)
        # Every line is checked against the run's chain and its trial's evaluation record.
        runs.append((manifest, store.iter_results(manifest, key=store.chain_key(manifest))))
    return frames_of(runs)
