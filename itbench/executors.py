"""Executors run a list of planned trials, possibly in parallel."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from itbench.models import TrialResult
    from itbench.plan import PlannedTrial

#: Runs one trial in worker slot ``slot`` (slots own disjoint port blocks and directories).
TrialFn = Callable[["PlannedTrial", int], "TrialResult | None"]
#: Receives each result (``None`` for a trial cut short by cancellation).
ResultFn = Callable[["TrialResult | None"], None]


class Executor(ABC):
    """Runs trials and reports each result as soon as it is known."""

    @abstractmethod
    def run(
        self,
        trials: list[PlannedTrial],
        run_trial: TrialFn,
        on_result: ResultFn,
        cancel: threading.Event,
    ) -> None:
        """Run every trial; call ``on_result`` in the calling thread for each result.

        Must return promptly once ``cancel`` is set (trials in flight are torn down by
        ``run_trial`` itself) and re-raise ``KeyboardInterrupt``.
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

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)

    def run(
        self,
        trials: list[PlannedTrial],
        run_trial: TrialFn,
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
