"""Reporters write a run's summary tables to files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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
