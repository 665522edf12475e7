"""A report as one self-contained HTML page: its tables and plots (inline SVG, matplotlib).

Plots, each in a ``<figure class="plot" data-plot="NAME">`` and each also written beside the
page as ``figures/NAME.pdf`` and ``figures/NAME.svg`` (for a paper), sized for a column:

- ``pass-rate``: pass rate per domain and agent, with the 95 % interval as error bars and each
  bar's value written on it (a 0 % bar is drawn as an outline, never left blank);
- ``heatmap-<dimension>``: pass rate per value of each facet (mechanism, family, ...) and agent,
  its size following its cells;
- ``time-to-detect`` / ``time-to-mitigate``: their distributions per agent and domain, over
  passed trials that record them;
- ``cost-per-solved`` / ``tokens-per-solved``: per agent, when agents report usage.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from itbench.models import CONTROL_TAG
from itbench.report.tables import Report, breakdown_rows, display_rows, metric_rows, title

_RC: dict[str, Any] = {
    # Names are data: "$" in an agent or facet name is no mathtext.
    "text.parse_math": False,
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
thead th { border-bottom: 2px solid #444; }
figure.plot { margin: 1.5em 0; }
figure.plot svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; color: #555; }
"""


@dataclass(frozen=True)
class Plot:
    """One figure of the report: its name, caption, size (inches) and how to draw it."""

    name: str
    caption: str
    draw: Callable[[Figure], None]
    width: float
    height: float

    def save(self, target: Path | IO[Any], fmt: str) -> None:
        """Draw the figure into ``target`` as ``fmt`` (``svg`` or ``pdf``)."""
        with rc_context(_RC):  # type: ignore[arg-type]  # the stubs want literal keys
            fig = Figure(figsize=(self.width, self.height))
            self.draw(fig)
            fig.tight_layout()
            fig.savefig(target, format=fmt)

    def svg(self) -> str:
        """The figure as an inline ``<svg>`` element."""
        buf = io.StringIO()
        self.save(buf, "svg")
        text = buf.getvalue()
        return text[text.index("<svg") :]

    def element(self) -> str:
        """The ``<figure>`` element of the page."""
        return (
            f'<figure class="plot" data-plot="{html.escape(self.name)}">{self.svg()}'
            f"<figcaption>{html.escape(self.caption)}</figcaption></figure>"
        )


def _pass_rate_plot(summary: pd.DataFrame) -> Plot:
    domains = sorted({str(d) for d in summary["domain"]})
    agents = sorted({str(a) for a in summary["agent"]})
    width = 0.8 / max(1, len(agents))

    def draw(fig: Figure) -> None:
        ax: Axes = fig.subplots()
        x = np.arange(len(domains))
        for i, agent in enumerate(agents):
            rows = {str(r["domain"]): r for _, r in summary[summary["agent"] == agent].iterrows()}
            rate: list[float] = []
            low: list[float] = []
            high: list[float] = []
            for d in domains:
                r = rows.get(d)
                value = float(r["pass_rate"]) if r is not None else math.nan
                rate.append(0.0 if math.isnan(value) else value)
                lo = float(r["ci_low"]) if r is not None else math.nan
                hi = float(r["ci_high"]) if r is not None else math.nan
                low.append(0.0 if math.isnan(lo) else max(0.0, rate[-1] - lo))
                high.append(0.0 if math.isnan(hi) else max(0.0, hi - rate[-1]))
            bars = ax.bar(x + i * width, rate, width, yerr=[low, high], capsize=3, label=agent)
            color = bars.patches[0].get_facecolor() if bars.patches else None
            for bar, value, ran in zip(
                bars.patches, rate, [d in rows for d in domains], strict=True
            ):
                if not ran:
                    continue
                if value == 0:
                    # A 0 % bar is an outline with its value: it ran, and nothing passed.
                    ax.bar(
                        bar.get_x() + bar.get_width() / 2,
                        0.02,
                        bar.get_width(),
                        fill=False,
                        edgecolor=color,
                        linewidth=1.2,
                    )
                ax.text(
                    bar.get_x() + bar.get_width() / 2,
                    value + 0.03,
                    f"{value:.2f}",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
        ax.set_xticks(x + width * (len(agents) - 1) / 2, domains)
        ax.set_ylim(0, 1.15)
        ax.set_ylabel("pass rate")
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1, 1))

    return Plot(
        "pass-rate",
        "Pass rate per domain and agent; bars show the 95 % interval (problems resampled).",
        draw,
        6.5,
        3.2,
    )


def _heatmap(part: pd.DataFrame, dimension: str) -> Plot:
    part = part.assign(row=part["domain"].astype(str) + " / " + part[dimension].astype(str))
    table = part.pivot_table(index="row", columns="agent", values="pass_rate", aggfunc="first")
    rows, cols = list(table.index), [str(c) for c in table.columns]

    def draw(fig: Figure) -> None:
        ax: Axes = fig.subplots()
        image = ax.imshow(
            table.to_numpy(dtype=float), aspect="equal", vmin=0, vmax=1, cmap="viridis"
        )
        ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
        ax.set_yticks(range(len(rows)), rows)
        values = table.to_numpy(dtype=float)
        for (i, j), value in np.ndenumerate(values):
            if not math.isnan(value):
                color = "black" if value > 0.6 else "white"
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color=color)
        fig.colorbar(image, ax=ax, label="pass rate")

    # Sized by its cells: one agent's column is no page-wide stripe.
    height = max(2.0, 1.2 + 0.28 * len(rows))
    width = min(6.5, 3.2 + 0.9 * len(cols))
    return Plot(
        f"heatmap-{dimension}", f"Pass rate per {title(dimension)} and agent.", draw, width, height
    )


def _distribution(trials: pd.DataFrame, column: str, name: str, label: str) -> Plot | None:
    if column not in trials:
        return None
    data = trials[trials["passed"] & trials[column].notna()]
    if data.empty:
        return None
    # Per domain too: seconds of one domain are no scale for another's.
    groups = [
        (f"{a} ({d})", g[column].to_numpy(dtype=float))
        for (a, d), g in data.groupby(["agent", "domain"])
    ]

    def draw(fig: Figure) -> None:
        ax: Axes = fig.subplots()
        ax.boxplot([v for _, v in groups], vert=False)
        ax.set_yticks(range(1, len(groups) + 1), [a for a, _ in groups])
        ax.set_xscale("log")
        ax.set_xlabel("seconds (log scale)")

    return Plot(
        name,
        f"{label} per agent and domain, over passed trials.",
        draw,
        6.5,
        1 + 0.4 * len(groups),
    )


def _usage_plot(summary: pd.DataFrame, column: str, name: str, label: str) -> Plot | None:
    if column not in summary:
        return None
    data = summary[summary[column].notna()]
    if data.empty:
        return None
    labels = [f"{r['agent']} ({r['domain']})" for _, r in data.iterrows()]

    def draw(fig: Figure) -> None:
        ax: Axes = fig.subplots()
        ax.barh(range(len(labels)), data[column].to_numpy(dtype=float))
        ax.set_yticks(range(len(labels)), labels)
        ax.set_xlabel(label)

    return Plot(name, f"{label} per agent and domain.", draw, 6.5, 1 + 0.4 * len(labels))


def plots(report: Report) -> list[Plot]:
    """The report's plots."""
    if report.summary.empty:
        return []
    out = [_pass_rate_plot(report.summary)]
    for dimension, part in report.breakdowns.items():
        if dimension not in ("complexity", "task_type", CONTROL_TAG):
            out.append(_heatmap(part, dimension))
    trials = report.frames.trials
    for column, name, label in (
        ("time.time_to_detect", "time-to-detect", "Time to detect"),
        ("time.time_to_mitigate", "time-to-mitigate", "Time to mitigate"),
    ):
        figure = _distribution(trials, column, name, label)
        if figure:
            out.append(figure)
    for column, name, label in (
        ("cost_per_solved", "cost-per-solved", "Cost per solved problem (USD)"),
        ("tokens_per_solved", "tokens-per-solved", "Tokens per solved problem"),
    ):
        figure = _usage_plot(report.summary, column, name, label)
        if figure:
            out.append(figure)
    return out


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(report: Report, heading: str = "itbench report") -> str:
    """The whole HTML page."""
    parts: list[Any] = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(heading)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(heading)}</h1>",
        f"<p>itbench {html.escape(version('itbench'))}, generated "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}. Errors are excluded from every "
        "score; invalid trials count as failures.</p>",
        "<h2>Pass rate</h2>",
        _table(*display_rows(report.summary, report.k)),
        *(plot.element() for plot in plots(report)),
    ]
    if report.controls is not None:
        parts += [
            "<h2>Controls (apart from the pass rate above)</h2>",
            _table(*display_rows(report.controls, report.k)),
        ]
    metrics = metric_rows(report.summary)
    if metrics[1]:
        parts += ["<h2>Metrics (mean ± standard error)</h2>", _table(*metrics)]
    for dimension, part in report.breakdowns.items():
        parts += [f"<h2>By {html.escape(title(dimension))}</h2>"]
        parts.append(_table(*breakdown_rows(part, dimension)))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_html(report: Report, out_dir: Path) -> list[Path]:
    """``report.html``, and each of its figures as ``figures/NAME.pdf`` and ``.svg``."""
    path = out_dir / "report.html"
    path.write_text(page(report), encoding="utf-8")
    written = [path]
    figures = out_dir / "figures"
    for plot in plots(report):
        figures.mkdir(exist_ok=True)
        for fmt in ("pdf", "svg"):
            target = figures / f"{plot.name}.{fmt}"
            plot.save(target, fmt)
            written.append(target)
    return written
