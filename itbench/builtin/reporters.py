"""Built-in reporters: CSV and Markdown summary tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from itbench import hookimpl
from itbench.reporters import ReporterSpec

if TYPE_CHECKING:
    import pandas as pd


def write_csv(summary: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Write ``report.csv``."""
    path = out_dir / "report.csv"
    summary.to_csv(path, index=False)
    return [path]


def write_markdown(summary: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Write ``report.md``, a GitHub-flavoured Markdown table."""
    from itbench.report import markdown_table

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
