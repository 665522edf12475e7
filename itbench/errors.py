"""The exceptions of itbench, in one module so that every other module can raise them."""

from __future__ import annotations


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
