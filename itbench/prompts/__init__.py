"""What a model is told: a domain's system prompt, and the message that states a task.

Each domain owns its system prompt (:meth:`itbench.Domain.system_prompt`); ``default.md``
beside this module serves a domain that has none of its own.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Protocol

from itbench.models import TaskView


class _Prompted(Protocol):
    def system_prompt(self) -> str: ...


def default_prompt() -> str:
    """The system prompt of a domain that ships none of its own."""
    return resources.files(__name__).joinpath("default.md").read_text("utf-8")


def system_prompt(domain: _Prompted, override: str | None = None) -> str:
    """The system prompt for ``domain``'s trials: the file ``override``, or the domain's own."""
    if override:
        return Path(override).read_text(encoding="utf-8")
    return domain.system_prompt()


def task_message(task: TaskView, finish: str) -> str:
    """The message that states the task: goal, task types, time limit and public context.

    Never the handle, the workspace or the deadline: the model needs none of them.
    """
    context = json.dumps(task.context, indent=2, default=str)
    return (
        f"# Task\n\n{task.goal.strip()}\n\n"
        f"Task types: {', '.join(task.task_types)}\n"
        f"Time limit: {task.time_limit:g} seconds\n\n"
        f"# Context\n\n```json\n{context}\n```\n\n"
        f"Finish by calling `{finish}`; its parameters are the answer's format."
    )
