"""Reporters: what a reporter is, and the built-in CSV and Markdown ones (a core plugin)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from itbench.markers import hookimpl

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class ReporterSpec:
    """A registered reporter.

    Attributes:
        name: Reporter name.
        write: ``write(summary, out_dir)`` writes files for the summary frame (one row per
            domain and agent) and returns their paths.
        description: One line for listings.
    """

    name: str
    write: Callable[[pd.DataFrame, Path], list[Path]]
    description: str = ""


def write_csv(summary: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Write ``report.csv``."""
    path = out_dir / "report.csv"
    summary.to_csv(path, index=False)
    return [path]


def write_markdown(summary: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Write ``report.md``, a GitHub-flavoured Markdown table."""
    from itbench.reporting.frames import markdown_table  # pandas, only when reporting

    path = out_dir / "report.md"
    path.write_text(markdown_table(summary), encoding="utf-8")
    return [path]


@hookimpl
def itbench_register_reporters() -> list[ReporterSpec]:
    """Register the CSV and Markdown reporters."""
    return [
        ReporterSpec("csv", write_csv, "report.csv: one row per domain and agent."),
        ReporterSpec("markdown", write_markdown, "report.md: the same table in Markdown."),
    ]
