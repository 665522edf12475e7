"""What a run's progress line says: trials by outcome so far, and when the rest should end.

The estimate comes from the durations of the trials that finished, per domain (an SRE trial
takes minutes, a FinOps one seconds: one mean over both would mislead), divided among the
workers. A domain with no finished trial yet borrows the mean of all finished trials.
"""

from __future__ import annotations

import collections
import statistics
from collections.abc import Iterable

from itbench.models import TrialResult, TrialStatus

#: Outcomes the line counts one by one; the rest (timeout, invalid, ...) count as ``other``.
SHOWN = (TrialStatus.passed, TrialStatus.failed, TrialStatus.error)


class Estimate:
    """A run's outcomes so far and the time its remaining trials should take.

    Args:
        domains: The domain of each trial still to run.
        workers: Trials run at once.
    """

    def __init__(self, domains: Iterable[str], workers: int = 1) -> None:
        self.left: collections.Counter[str] = collections.Counter(domains)
        self.workers = max(1, workers)
        self.durations: dict[str, list[float]] = collections.defaultdict(list)
        self.outcomes: collections.Counter[str] = collections.Counter()

    def finished(self, result: TrialResult) -> None:
        """Count one result and learn its duration."""
        if self.left[result.domain] > 0:
            self.left[result.domain] -= 1
        shown = result.status if result.status in SHOWN else None
        self.outcomes[shown.value if shown else "other"] += 1
        seconds = (result.finished_at - result.started_at).total_seconds()
        if seconds >= 0:
            self.durations[result.domain].append(seconds)

    def seconds_left(self) -> float | None:
        """Seconds until the remaining trials should be done (``None``: nothing to go by)."""
        if not sum(self.left.values()):
            return 0.0
        every = [s for times in self.durations.values() for s in times]
        if not every:
            return None
        overall = statistics.mean(every)
        total = sum(
            n * (statistics.mean(self.durations[d]) if self.durations.get(d) else overall)
            for d, n in self.left.items()
        )
        return total / self.workers

    def line(self) -> str:
        """``ETA 3m05s · 4 passed, 1 failed, 0 error`` (``ETA ?`` before any trial ended)."""
        left = self.seconds_left()
        eta = "ETA ?" if left is None else f"ETA {_clock(left)}"
        counts = ", ".join(f"{self.outcomes[s.value]} {s.value}" for s in SHOWN)
        other = self.outcomes["other"]
        return f"{eta} · {counts}" + (f", {other} other" if other else "")


def _clock(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``42s``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"
