"""A report as Markdown, LaTeX (booktabs) and CSV files."""

from __future__ import annotations

import re
from pathlib import Path

from itbench.report.tables import Report, breakdown_rows, display_rows, metric_rows, title


def markdown_cell(text: str) -> str:
    """Text made safe for one cell of a Markdown table.

    Names come from results and plugins: a line break would end the table, a ``|`` add a
    column, and raw HTML (``<!--``) hide the rows below.
    """
    flat = " ".join(str(text).split())
    return flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    cell = markdown_cell
    lines = [
        "| " + " | ".join(map(cell, header)) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    return lines + ["| " + " | ".join(map(cell, row)) + " |" for row in rows]


def markdown(report: Report) -> str:
    """The report as GitHub-flavoured Markdown: summary, metrics and breakdowns."""
    lines = _markdown(*display_rows(report.summary, report.k))
    if report.controls is not None:
        lines += ["", "### Controls (apart from the pass rate above)", ""]
        lines += _markdown(*display_rows(report.controls, report.k))
    metrics = metric_rows(report.summary)
    if metrics[1]:
        lines += ["", "### Metrics (mean ± standard error)", "", *_markdown(*metrics)]
    for dimension, part in report.breakdowns.items():
        lines += ["", f"### By {title(dimension)} (pass rate, passed/scored)", ""]
        lines += _markdown(*breakdown_rows(part, dimension))
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = re.compile(r"([&%$#_{}~^\\])")
_LATEX_ESCAPES = {"~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def latex_escape(text: str) -> str:
    """Text with LaTeX's special characters escaped; ``±`` and ``–`` in LaTeX's spelling."""
    out = _LATEX_SPECIAL.sub(lambda m: _LATEX_ESCAPES.get(m.group(1), "\\" + m.group(1)), text)
    return out.replace("±", r"$\pm$").replace("–", "--")


def _latex(header: list[str], rows: list[list[str]], caption: str) -> list[str]:
    spec = "ll" + "r" * (len(header) - 2)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in header) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return lines


def latex(report: Report) -> str:
    """The report's tables as LaTeX ``table`` environments with booktabs rules.

    Ready to paste into a document whose preamble loads the booktabs package.
    """
    lines = ["% itbench report: needs \\usepackage{booktabs}", ""]
    lines += _latex(*display_rows(report.summary, report.k), "Pass rate per domain and agent")
    if report.controls is not None:
        lines += _latex(*display_rows(report.controls, report.k), "Controls, scored apart")
    metrics = metric_rows(report.summary)
    if metrics[1]:
        lines += _latex(*metrics, "Metrics (mean ± standard error)")
    for dimension, part in report.breakdowns.items():
        rows = breakdown_rows(part, dimension)
        lines += _latex(*rows, f"Pass rate by {title(dimension)} (passed/scored)")
    return "\n".join(lines)


def write_csv(report: Report, out_dir: Path) -> list[Path]:
    """``report.csv`` (the summary) and ``report-<dimension>.csv`` per breakdown."""
    path = out_dir / "report.csv"
    report.summary.to_csv(path, index=False)
    paths = [path]
    for dimension, part in report.breakdowns.items():
        extra = out_dir / f"report-{dimension.replace('_', '-')}.csv"
        part.to_csv(extra, index=False)
        paths.append(extra)
    return paths


def write_markdown(report: Report, out_dir: Path) -> list[Path]:
    """``report.md``."""
    path = out_dir / "report.md"
    path.write_text(markdown(report), encoding="utf-8")
    return [path]


def write_latex(report: Report, out_dir: Path) -> list[Path]:
    """``report.tex``."""
    path = out_dir / "report.tex"
    path.write_text(latex(report), encoding="utf-8")
    return [path]
