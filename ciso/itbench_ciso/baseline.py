"""A deterministic baseline: a small library of templates keyed on the requirement text."""

from __future__ import annotations

from itbench import TaskView, Toolbox
from itbench_ciso.spec import CisoSubmission


def solve(task: TaskView, toolbox: Toolbox) -> CisoSubmission | None:
    """Pick the first template whose keywords all occur in the requirement."""
    from itbench_ciso.templates import pick

    return pick(task)
