"""pass@k, summaries and the files of ``itbench report``."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from conftest import CliFn

from itbench.reporting.frames import pass_at_k, results_frame, summarize
from itbench.store import RunStore


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 0, 1, 0.0),
        (5, 5, 3, 1.0),
        (5, 2, 1, 0.4),
        (5, 2, 2, 1 - 3 / 10),
        (4, 1, 3, 1 - 1 / 4),
        (10, 3, 5, 1 - 21 / 252),
    ],
)
def test_pass_at_k_is_the_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_is_nan_when_there_are_fewer_trials_than_k() -> None:
    assert math.isnan(pass_at_k(2, 1, 3))


def test_summary_excludes_errors_and_reports_mean_and_standard_error(
    itbench: CliFn, tmp_path: Path
) -> None:
    assert (
        itbench(
            "evaluate", "--agent", "toy/solver", "-s", "toy/[hr]*", "--trials", "2", "--out", "a"
        ).returncode
        == 0
    )
    assert (
        itbench(
            "evaluate", "--agent", "noop", "-s", "toy/[hr]*", "--trials", "2", "--out", "b"
        ).returncode
        == 0
    )
    itbench(
        "evaluate",
        "--agent",
        "baseline",
        "-s",
        "toy/healthy",
        "--option",
        "fail_setup=1",
        "--out",
        "c",
    )
    results = (
        RunStore(tmp_path / "a").results()
        + RunStore(tmp_path / "b").results()
        + RunStore(tmp_path / "c").results()
    )
    # In-process Python agents could read the harness: their rows say so.
    solver, noop, baseline = (f"{a} [unsandboxed]" for a in ("toy/solver", "noop", "baseline"))
    summary = summarize(results_frame(results), k=2).set_index("agent")
    assert sorted(summary.index) == sorted([solver, noop, baseline])
    assert summary.loc[solver, "pass_rate"] == 1.0 and summary.loc[solver, "pass@2"] == 1.0
    assert summary.loc[noop, "pass_rate"] == 0.0 and summary.loc[noop, "localized_mean"] == 0.0
    assert summary.loc[baseline, "errors"] == 1 and math.isnan(summary.loc[baseline, "pass_rate"])
    assert summary.loc[baseline, "invalid"] == 0
    # The solver writes once in each registry trial; the healthy control reports no actions metric.
    assert summary.loc[solver, "actions_mean"] == pytest.approx(1.0)
    assert summary.loc[solver, "trials"] == 8


def test_report_command_prints_and_writes_csv_and_markdown(itbench: CliFn, tmp_path: Path) -> None:
    assert (
        itbench(
            "evaluate", "--agent", "baseline", "-s", "toy/[hr]*", "--trials", "3", "--out", "r"
        ).returncode
        == 0
    )
    res = itbench("report", "r", "--k", "2")
    assert res.returncode == 0, res.stderr
    assert "pass@2" in res.stdout and "toy" in res.stdout
    # Metrics are a table of their own: a row per (domain, metric), a column per agent.
    metric_lines = [line for line in res.stdout.splitlines() if "localized" in line]
    assert len(metric_lines) == 1 and "1.000 ± 0.000" in metric_lines[0]
    rows = list(csv.DictReader((tmp_path / "r" / "report.csv").open()))
    assert rows[0]["domain"] == "toy" and rows[0]["agent"] == "baseline [unsandboxed]"
    assert rows[0]["trials"] == "12" and rows[0]["invalid"] == "0"
    assert float(rows[0]["pass_rate"]) == 1.0
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.startswith("| domain | agent | trials | errors | invalid |") and "### Metrics" in md
    assert "| toy | baseline [unsandboxed] | 12 | 0 | 0 |" in md
    assert "| domain | metric | baseline [unsandboxed] |" in md
    assert "| toy | localized | 1.000 ± 0.000 |" in md
    data = itbench("report", "r", "--json").json()
    assert data["summary"][0]["pass@1"] == 1.0  # type: ignore[index]


def test_report_on_a_directory_that_is_not_a_run_is_a_usage_error(
    itbench: CliFn, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    res = itbench("report", "empty")
    assert res.returncode == 2 and "manifest.json" in res.stderr
