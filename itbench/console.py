"""Terminal output: tables, progress, JSON, and one-line problems on stderr."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from itbench.models import TrialResult, TrialStatus


def _width(stream: Any) -> int | None:
    """Rich's own width on a terminal or with ``COLUMNS``; wide enough for tables in a pipe."""
    if os.environ.get("COLUMNS") or stream.isatty():
        return None
    return 160


out = Console(soft_wrap=True, width=_width(sys.stdout))
err = Console(stderr=True, soft_wrap=True, width=_width(sys.stderr))

STATUS_STYLE = {
    TrialStatus.passed: "green",
    TrialStatus.failed: "yellow",
    TrialStatus.timeout: "magenta",
    TrialStatus.error: "red",
    TrialStatus.invalid: "bold red",
    TrialStatus.unavailable: "blue",
}


def print_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (plain, for machines)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def problem(line: str) -> None:
    """One line on stderr about something that went wrong but did not stop the command."""
    err.print(f"itbench: {line}", highlight=False, markup=False)


def table(
    title: str | None, header: Sequence[str], rows: Sequence[Sequence[str]], plain: bool = False
) -> None:
    """Print a table on stdout.

    Args:
        title: Shown above the table.
        header: Column names.
        rows: Cells, as rich markup unless ``plain``.
        plain: Print the title, every header and cell as text (data such as
            ``agent [unsandboxed]`` must not be read as markup).
    """
    t = Table(title=escape(title) if plain and title else title, show_lines=False)
    for h in header:
        t.add_column(escape(h) if plain else h, overflow="fold")
    for row in rows:
        t.add_row(*(escape(c) for c in row) if plain else row)
    out.print(t)


def trial_rows(results: Sequence[TrialResult]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the per-trial results table."""
    header = ["scenario", "agent", "#", "status", "metrics", "total s", "note"]
    rows = []
    for r in sorted(results, key=lambda r: (r.scenario_id, r.agent, r.trial_index)):
        metrics = " ".join(f"{k}={_short(v)}" for k, v in list(r.metrics.items())[:4])
        style = STATUS_STYLE[r.status]
        rows.append(
            [
                escape(r.scenario_id),
                escape(agent_label(r.agent, r.labels)),
                str(r.trial_index),
                f"[{style}]{r.status.value}[/{style}]",
                metrics,
                _short(r.timings.total),
                escape((r.error or "")[:80]),
            ]
        )
    return header, rows


def agent_label(agent: str, labels: Sequence[str]) -> str:
    """An agent's name with its result labels, as every output shows it."""
    return f"{agent} [{', '.join(labels)}]" if labels else agent


def _short(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def progress(enabled: bool) -> Progress:
    """A progress bar on stderr (disabled for JSON output)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=err,
        disable=not enabled,
        transient=False,
    )
