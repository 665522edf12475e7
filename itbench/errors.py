"""The exceptions of itbench, in one module so that every other module can raise them."""

from __future__ import annotations

from pydantic import ValidationError


class InfrastructureError(Exception):
    """Setup, injection, readiness or teardown failed: the trial is an ``error``, not a failure."""


class IntegrityError(Exception):
    """What decides the score was tampered with or lost: the trial is ``invalid``.

    Raised by an environment or evaluator that finds its evaluator inputs changed or a harness
    server gone after the agent's turn. An invalid trial is never a pass and never an ``error``.
    """


class ToolError(Exception):
    """A tool call that could not be carried out; the message is shown to the agent."""


class UsageError(Exception):
    """The run cannot start as asked (unknown agent, no scenario selected, ...)."""


class RunDirError(Exception):
    """A run directory that cannot be used (missing or malformed manifest or results)."""


def validation_problem(exc: ValidationError, whole: str) -> str:
    """``field 'a.b': reason`` for the first problem a model found (``whole``: no field).

    How many further problems there are is added, so a fix of the first is not taken for all.
    """
    problems = exc.errors()
    first = problems[0]
    loc = ".".join(str(p) for p in first["loc"]) or whole
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"field '{loc}': {first['msg']}{more}"
