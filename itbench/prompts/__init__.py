"""What a model is told: each domain's system prompt, and the message that states a task.

The system prompts are ``<domain>.md`` beside this module, ``default.md`` for any other domain.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

from itbench.models import TaskView


def system_prompt(domain: str, override: str | None = None) -> str:
    """The system prompt of ``domain``: the file ``override``, or the shipped one."""
    if override:
        return Path(override).read_text(encoding="utf-8")
    prompts = resources.files(__name__)
    chosen = prompts.joinpath(f"{domain}.md")
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", domain) or not chosen.is_file():
        chosen = prompts.joinpath("default.md")
    return chosen.read_text("utf-8")


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
