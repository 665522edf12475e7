"""The end of an agent's turn: one clock for the task view, the toolbox, the agent and tests."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Deadline:
    """When an agent's turn ends, computed once by the runner and handed to everyone.

    Attributes:
        seconds: The turn's time limit (the scenario's, or ``--timeout``).
        at: The wall-clock end, epoch seconds (what the agent is shown).
        monotonic_at: The same end on the monotonic clock (what waits measure against: a
            step of the wall clock moves neither the runner's wait nor the toolbox's cut-off).
    """

    seconds: float
    at: float
    monotonic_at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """The deadline ``seconds`` from now."""
        return cls(float(seconds), time.time() + seconds, time.monotonic() + seconds)

    @property
    def when(self) -> datetime:
        """The wall-clock end as an aware UTC datetime (the task view's ``deadline``)."""
        return datetime.fromtimestamp(self.at, UTC)

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.monotonic_at - time.monotonic()

    def passed(self) -> bool:
        """Whether the turn is over."""
        return self.remaining() <= 0
