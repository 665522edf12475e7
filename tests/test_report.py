"""pass@k, summaries and the files of ``itbench report``."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import CliFn

from itbench.report.dataset import results_frame
from itbench.report.tables import summarize
from itbench.store import RunStore


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
    # The healthy control's 3 trials are scored apart, never in the problems' pass rate.
    assert rows[0]["trials"] == "9" and rows[0]["invalid"] == "0"
    assert float(rows[0]["pass_rate"]) == 1.0
    assert "controls (apart from the pass rate above)" in res.stdout
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.startswith("| domain | agent | trials | errors | invalid |") and "### Metrics" in md
    assert "| toy | baseline [unsandboxed] | 9 | 0 | 0 |" in md
    controls = md.split("### Controls (apart from the pass rate above)")[1]
    assert "| toy | baseline [unsandboxed] | 3 | 0 | 0 |" in controls
    assert "### By control" in md
    assert "| domain | metric | baseline [unsandboxed] |" in md
    assert "| toy | localized | 1.000 ± 0.000 |" in md
    data = itbench("report", "r", "--json").json()
    assert data["summary"][0]["pass@1"] == 1.0  # type: ignore[index]
    assert data["controls"][0]["trials"] == 3  # type: ignore[index]


def test_report_on_a_directory_that_is_not_a_run_is_a_usage_error(
    itbench: CliFn, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    res = itbench("report", "empty")
    assert res.returncode == 2 and "manifest.json" in res.stderr


def _toy_runs(itbench: CliFn) -> None:
    """Run ``a``: the toy solver (it reports tokens); ``b``: noop; both 2 trials per scenario."""
    for agent, out in (("toy/solver", "a"), ("noop", "b")):
        res = itbench(
            "evaluate", "--agent", agent, "-s", "toy/[hr]*", "--trials", "2", "--out", out
        )
        assert res.returncode == 0, res.stderr


def test_report_writes_markdown_csv_latex_and_html_with_breakdowns(
    itbench: CliFn, tmp_path: Path
) -> None:
    _toy_runs(itbench)
    res = itbench("report", "a", "b", "--k", "2", "--out", "rep")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "rep"
    # Eight files, and each of the page's three figures as PDF and SVG for a paper.
    assert "wrote 14 file(s) to rep" in res.stdout
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert figures == sorted(
        f"{name}.{fmt}"
        for name in ("pass-rate", "heatmap-fault", "tokens-per-solved")
        for fmt in ("pdf", "svg")
    )
    assert all((out / "figures" / f).read_bytes()[:4] == b"%PDF" for f in figures if "pdf" in f)
    # noop's 0 % bar is drawn and labelled, never left blank.
    assert ">0.00<" in (out / "figures" / "pass-rate.svg").read_text()
    names = {p.name for p in out.iterdir()} - {"figures"}
    assert names == {
        "report.csv",
        "report-control.csv",
        "report-fault.csv",
        "report-complexity.csv",
        "report-task-type.csv",
        "report.md",
        "report.tex",
        "report.html",
    }
    rows = {r["agent"]: r for r in csv.DictReader((out / "report.csv").open())}
    solver = rows["toy/solver [unsandboxed]"]
    assert solver["pass_rate"] == "1.0" and solver["pass@2"] == "1.0" and solver["pass^2"] == "1.0"
    # The healthy control is scored apart: three problems here.
    assert solver["problems"] == "3" and solver["solved"] == "3"
    assert float(solver["tokens_per_solved"]) == float(solver["input_tokens"]) / 3
    md = (out / "report.md").read_text()
    assert "### By fault (pass rate, passed/scored)" in md
    assert "| toy | corrupted-key | 0.00 (0/6) | 1.00 (6/6) |" in md  # noop, then solver
    assert "### By task type" in md and "| toy | detection | 0.00 (0/2) | 1.00 (2/2) |" in md
    tex = (out / "report.tex").read_text()
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"toy/solver [unsandboxed]" in tex and r"1.000 $\pm$ 0.000" in tex
    # summary, controls, metrics, four breakdowns
    assert tex.count(r"\begin{tabular}") == 7
    data = itbench("report", "a", "b", "--json", "--out", "rep").json()
    breakdowns = {"control", "fault", "complexity", "task_type"}
    assert set(data["breakdowns"]) == breakdowns  # type: ignore[index]


def test_report_html_opens_in_chromium_with_its_plots(itbench: CliFn, tmp_path: Path) -> None:
    """Headless Chromium renders the page: the screenshot is not blank, the plots are there."""
    import shutil
    import subprocess

    from matplotlib.image import imread

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is installed by scripts/system-deps.sh"
    _toy_runs(itbench)
    assert itbench("report", "a", "b", "--out", "rep").returncode == 0
    page = (tmp_path / "rep" / "report.html").as_uri()
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "--window-size=1200,1400",
    ]
    shot = tmp_path / "shot.png"
    subprocess.run(
        [chromium, *flags, f"--screenshot={shot}", page], capture_output=True, timeout=120
    )
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120
    ).stdout
    # The pass-rate bars, the heat map of the toy domain's one facet, tokens per solved problem.
    plots = re.findall(r'<figure class="plot" data-plot="([a-z-]+)"', dom)
    assert plots == ["pass-rate", "heatmap-fault", "tokens-per-solved"], plots
    assert dom.count("<svg") == 3
    pixels = imread(str(shot))[:, :, :3]
    assert pixels.shape[:2] == (1400, 1200)
    assert pixels.std() > 0.05  # not a blank page
    # matplotlib's first bar colour (#1f77b4) is painted: the SVG plots rendered.
    blue = np.all(np.abs(pixels - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.03, axis=-1)
    assert blue.sum() > 2000


def test_compare_pairs_problems_and_tests_the_difference(itbench: CliFn, tmp_path: Path) -> None:
    _toy_runs(itbench)
    res = itbench("compare", "b", "a", "--json")
    assert res.returncode == 0, res.stderr
    data = res.json()
    assert data["common_problems"] == 4 and data["mean_difference"] == 1.0  # type: ignore[index]
    assert data["flipped"]["to_pass"] == [  # type: ignore[index]
        "toy/healthy",
        "toy/registry-alpha-1",
        "toy/registry-beta-2",
        "toy/registry-gamma-3",
    ]
    assert data["mcnemar_p"] == pytest.approx(2 / 16)  # type: ignore[index]
    assert data["permutation_p"] == pytest.approx(2 / 16)  # type: ignore[index]
    text = itbench("compare", "b", "a").stdout
    assert "flipped to pass: 4, to fail: 0" in text and "to pass" in text


def test_report_reads_past_a_torn_last_line(itbench: CliFn, tmp_path: Path) -> None:
    _toy_runs(itbench)
    path = tmp_path / "a" / "results.jsonl"
    with path.open("a") as fh:
        fh.write('{"run_id": "cut short')
    data = itbench("report", "a", "--json").json()
    # 8 trials: 6 of problems, 2 of the control (scored apart).
    assert data["summary"][0]["trials"] == 6  # type: ignore[index]
    assert data["controls"][0]["trials"] == 2  # type: ignore[index]


def test_leaderboard_is_rebuilt_identically_and_refuses_tampered_runs(
    itbench: CliFn, tmp_path: Path
) -> None:
    _toy_runs(itbench)
    board = tmp_path / "board"
    for run, name in (("a", "solver"), ("b", "noop")):
        res = itbench("leaderboard", "add", run, "--name", name, "--dir", "board")
        assert res.returncode == 0, res.stderr
    summary = json.loads((board / "runs" / "solver" / "summary.json").read_text())
    assert summary["agent"] == "toy/solver" and summary["trials"] == 8
    assert summary["labels"] == ["unsandboxed"] and set(summary["catalog"]) == {"toy"}
    res = itbench("leaderboard", "--dir", "board")
    assert res.returncode == 0, res.stderr
    toy = json.loads((board / "toy.json").read_text())
    assert [r["agent"] for r in toy["rows"]] == ["toy/solver", "noop"]
    top = toy["rows"][0]
    assert top["pass_rate"] == 1.0 and top["sandboxed"] is False and "unsandboxed" in top["notes"]
    # Detection is asked only by the healthy control, which is scored apart.
    assert top["task_types"] == {"localization": 1.0, "mitigation": 1.0}
    assert top["controls_pass_rate"] == 1.0
    md = (board / "toy.md").read_text()
    assert "| toy/solver | – | 6 | 0 | 1.000 ± 0.000 |" in md
    assert (board / "overall.md").exists() and (board / "overall.json").exists()
    before = {p.name: p.read_bytes() for p in board.iterdir() if p.is_file()}
    assert itbench("leaderboard", "--dir", "board", "--check").returncode == 0
    assert itbench("leaderboard", "--dir", "board").returncode == 0
    assert {p.name: p.read_bytes() for p in board.iterdir() if p.is_file()} == before
    # One result changed after the fact: the entry is refused, and the build fails.
    results_file = board / "runs" / "noop" / "results.jsonl"
    results_file.write_text(results_file.read_text().replace('"failed"', '"passed"', 1))
    res = itbench("leaderboard", "--dir", "board", "--check")
    assert res.returncode == 1
    assert "refused leaderboard entry" in res.stderr and "noop/results.jsonl" in res.stderr


def test_the_committed_leaderboards_are_up_to_date(itbench: CliFn) -> None:
    """The tables in leaderboards/ are what `itbench leaderboard` builds from leaderboards/runs."""
    res = itbench("leaderboard", "--check")
    assert res.returncode == 0, res.stdout + res.stderr
    repo = Path(__file__).resolve().parents[1]
    if (repo / ".git").exists():
        # A run kept on this disk but not in git would pass here and fail on a clean clone.
        untracked = subprocess.run(
            ["git", "ls-files", "--others", "leaderboards"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert not untracked, f"leaderboard files git does not track: {untracked}"
