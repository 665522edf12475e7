"""Reporters: what a reporter is, and the built-in ones (a core plugin).

The built-in reporters write ``report.csv`` (plus ``report-<dimension>.csv`` per breakdown),
``report.md``, ``report.tex`` (booktabs) and ``report.html`` (tables and plots).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from itbench.markers import hookimpl

if TYPE_CHECKING:
    from itbench.report.tables import Report


@dataclass
class ReporterSpec:
    """A registered reporter.

    Attributes:
        name: Reporter name.
        write: ``write(report, out_dir)`` writes files for a :class:`itbench.report.Report`
            (its frames, its summary per domain and agent, its breakdowns) and returns their
            paths.
        description: One line for listings.
    """

    name: str
    write: Callable[[Report, Path], list[Path]]
    description: str = ""


def _csv(report: Report, out_dir: Path) -> list[Path]:
    from itbench.report.render import write_csv  # pandas, only when reporting

    return write_csv(report, out_dir)


def _markdown(report: Report, out_dir: Path) -> list[Path]:
    from itbench.report.render import write_markdown

    return write_markdown(report, out_dir)


def _latex(report: Report, out_dir: Path) -> list[Path]:
    from itbench.report.render import write_latex

    return write_latex(report, out_dir)


def _html(report: Report, out_dir: Path) -> list[Path]:
    from itbench.report.html import write_html  # matplotlib, only for this page

    return write_html(report, out_dir)


@hookimpl
def itbench_register_reporters() -> list[ReporterSpec]:
    """Register the CSV, Markdown, LaTeX and HTML reporters."""
    return [
        ReporterSpec("csv", _csv, "report.csv (summary) and report-<dimension>.csv."),
        ReporterSpec("markdown", _markdown, "report.md: summary, metrics and breakdowns."),
        ReporterSpec("latex", _latex, "report.tex: the same tables with booktabs rules."),
        ReporterSpec("html", _html, "report.html: one page with the tables and plots."),
    ]
