"""Reports over run directories: pandas frames, tables, statistics and reporters.

The public API for analyses is :func:`frames` (the ``trials``, ``metrics`` and ``scenarios``
frames of one or more runs; their columns are documented in :mod:`itbench.report.dataset`) and
:func:`build` (the summary and breakdown tables of a report, defined in
:mod:`itbench.report.tables`; the estimators are in :mod:`itbench.report.stats`)::

    from itbench.report import build, frames

    f = frames(["runs/a", "runs/b"])
    f.trials.groupby("agent")["passed"].mean()
    report = build(f, k=3)
    report.summary[["domain", "agent", "pass_rate", "ci_low", "ci_high"]]

pandas is imported only when one of these is first used, so ``import itbench`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from itbench.report.dataset import Frames, frames
    from itbench.report.tables import Report, build

__all__ = ["Frames", "Report", "build", "frames"]


def __getattr__(name: str) -> Any:
    import importlib

    modules = {"Frames": "dataset", "frames": "dataset", "Report": "tables", "build": "tables"}
    if name not in modules:
        raise AttributeError(f"module 'itbench.report' has no attribute {name!r}")
    return getattr(importlib.import_module(f"itbench.report.{modules[name]}"), name)
