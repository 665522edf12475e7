"""Executors run a list of planned trials, possibly in parallel."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from itbench.models import TrialResult
    from itbench.plan import PlannedTrial

#: Receives each result (``None`` for a trial cut short by cancellation).
ResultFn = Callable[["TrialResult | None"], None]


class PortableTrial(Protocol):
    """A picklable trial runner for another process or machine (same itbench installed).

    Calling it runs one trial there, through its whole lifecycle, and returns the result as
    JSON (``None`` when cancelled); the caller records it.
    """

    def __call__(self, trial: PlannedTrial) -> str | None:
        """Run ``trial`` here and return its ``TrialResult`` as JSON."""
        ...


class TrialJob(Protocol):
    """What the runner hands an executor: how to run, recover and record trials.

    Attributes:
        options: The run's options (``--option KEY=VALUE`` and plugin flags), for executors
            that take some of their own (the Ray executor's ``ray_address``).
    """

    options: dict[str, Any]

    def __call__(self, trial: PlannedTrial, slot: int) -> TrialResult | None:
        """Run one trial in this process, in worker slot ``slot`` (``None``: cancelled)."""
        ...

    def portable(self) -> PortableTrial:
        """The same, as a picklable callable for other processes and machines."""
        ...

    def resources(self, trial: PlannedTrial) -> dict[str, float]:
        """What one trial of this domain needs (``num_cpus``, ``memory`` in bytes)."""
        ...

    def recover(self, trial: PlannedTrial) -> None:
        """Stop and remove what an attempt of ``trial`` that died left (harness records only)."""
        ...

    def error_result(self, trial: PlannedTrial, reason: str) -> TrialResult:
        """An ``error`` result for a trial that could not be run (a lost worker, ...)."""
        ...

    def plugin_problem(self, plugin: str, reason: str, hook: str | None = None) -> None:
        """Record a plugin problem raised in another process (printed with the run's)."""
        ...


class Executor(ABC):
    """Runs trials and reports each result as soon as it is known.

    Args:
        workers: Trials run at once (``--workers``; at least 1).
    """

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)

    @abstractmethod
    def run(
        self,
        trials: list[PlannedTrial],
        run_trial: TrialJob,
        on_result: ResultFn,
        cancel: threading.Event,
    ) -> None:
        """Run every trial; call ``on_result`` in the calling thread for each result.

        ``run_trial(trial, slot)`` runs one trial in this process; executors that run trials
        elsewhere use ``run_trial.portable()`` and the job's other methods. Must return
        promptly once ``cancel`` is set (trials in flight are torn down by the job itself) and
        re-raise ``KeyboardInterrupt``.
        """


@dataclass
class ExecutorSpec:
    """A registered executor: ``factory(workers)`` builds it."""

    name: str
    factory: Callable[[int], Executor]
    description: str = ""


class LocalExecutor(Executor):
    """Runs up to ``workers`` trials at once in threads of this process.

    Environments are external processes, so threads suffice; every slot has its own port
    block and the trial directories are distinct.
    """

    def run(
        self,
        trials: list[PlannedTrial],
        run_trial: TrialJob,
        on_result: ResultFn,
        cancel: threading.Event,
    ) -> None:
        """Run trials on a thread pool, handing results back in the calling thread."""
        free_slots = list(range(self.workers))
        pending = list(reversed(trials))
        running: dict[Future[TrialResult | None], int] = {}
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="itbench-trial")
        try:
            while pending or running:
                while pending and free_slots and not cancel.is_set():
                    slot = free_slots.pop(0)
                    trial = pending.pop()
                    running[pool.submit(run_trial, trial, slot)] = slot
                if not running:
                    break
                # A short timeout keeps the main thread responsive to Ctrl-C.
                done, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in done:
                    free_slots.append(running.pop(fut))
                    on_result(fut.result())
        except BaseException:
            cancel.set()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
