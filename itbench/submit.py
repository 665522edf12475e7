"""The ``submit`` tool: an agent's final answer, validated against the domain's submission.

The model loop of the ``llm`` agent and the MCP server offer it beside the trial's tools. A
submission that does not validate is refused with the reasons, field by field, so that the
agent can fix it; the last accepted one is the trial's submission.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import ValidationError

from itbench.models import Submission, ToolSpec

#: The tool's name, unless the trial has a tool of that name (then :data:`FALLBACK_NAME`).
NAME = "submit"
FALLBACK_NAME = "submit_answer"
DESCRIPTION = (
    "Submit your final answer, in the task's submission format (this tool's parameters). "
    "It is checked against that format; a refused submission says which fields to fix."
)


def validation_problems(exc: ValidationError, limit: int = 10) -> str:
    """The errors of a refused submission, one ``field: reason`` per error."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "(submission)"
        parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class Submitter:
    """Validates submissions and keeps the last accepted one.

    Args:
        model: The domain's submission model.
        schema: Its JSON Schema as the task view states it (the tool's parameters).
        taken: Names of the trial's tools (the tool is renamed when ``submit`` is one).
        retries: Refused submissions allowed before :attr:`exhausted` (``None``: any number).
    """

    def __init__(
        self,
        model: type[Submission],
        schema: dict[str, Any],
        taken: set[str] | frozenset[str] = frozenset(),
        retries: int | None = None,
    ) -> None:
        self.model = model
        self.schema = schema
        self.name = FALLBACK_NAME if NAME in taken else NAME
        self.retries = retries
        self.refused = 0
        self.accepted: Submission | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()

    def spec(self) -> ToolSpec:
        """The tool as agents see it."""
        return ToolSpec(name=self.name, description=DESCRIPTION, parameters=self.schema)

    @property
    def exhausted(self) -> bool:
        """Whether more refusals than :attr:`retries` have happened."""
        return self.retries is not None and self.refused > self.retries

    def offer(self, arguments: Any) -> tuple[bool, str]:
        """Validate ``arguments`` as a submission; keep it when valid.

        Returns:
            Whether it was accepted, and the message for the agent.
        """
        if not isinstance(arguments, dict):
            problem = "the submission must be a JSON object of the submission's fields"
        else:
            try:
                submission = self.model.model_validate(arguments)
            except ValidationError as exc:
                problem = validation_problems(exc)
            else:
                with self._lock:
                    self.accepted = submission
                self.done.set()
                return True, "submission accepted"
        with self._lock:
            self.refused += 1
        left = "" if self.retries is None else f" ({max(0, self.retries - self.refused + 1)} left)"
        return False, f"submission refused: {problem}. Fix it and call {self.name} again{left}."
