"""The process executor: each worker its own Python process (``--executor processes``).

The local executor runs trials in threads of one interpreter, so the harness's own Python work
(judging, seeding accounts, policy evaluation) shares one GIL; with this executor each of the
``--workers`` slots is a process of its own, started once for the run, and trials run in
parallel on as many cores.

- Each worker rebuilds the run's runner from its config (plugins are loaded by name: a plugin
  registered only in the driver's memory is not seen) and runs one trial at a time; the driver
  alone appends to ``results.jsonl`` as results come back.
- A worker that dies (killed, out of memory) loses its trial: what the attempt left is stopped
  and removed from harness-only records, and the trial runs once more; lost again, it is
  recorded as ``error`` with the reason.
- Ctrl-C (or SIGTERM) interrupts each worker once: its trial stops its agent and tears its
  environment down before the worker exits. A worker whose driver dies is interrupted the
  same way by the kernel (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

from itbench.executors import Executor, PortableTrial, ResultFn, TrialJob

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from itbench.plan import PlannedTrial

#: Seconds interrupted workers get to tear their trials down before they are killed.
CANCEL_GRACE = 90.0
_PR_SET_PDEATHSIG = 1


def _interrupt_once(signum: int, frame: Any) -> None:
    """The first SIGINT interrupts the trial; later ones must not cut its teardown short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT), 0, 0, 0)


def _serve(conn: Connection, portable: PortableTrial, parent: int) -> None:
    """A worker's loop: run each trial sent, answer ``("result", json | None)`` or an error."""
    signal.signal(signal.SIGINT, _interrupt_once)
    signal.signal(signal.SIGTERM, _interrupt_once)
    _die_with_parent()
    if os.getppid() != parent:  # the driver died before the death signal was armed
        return
    while True:
        try:
            trial = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if trial is None:
            return
        try:
            answer: tuple[str, str | None] = ("result", portable(trial))
        except KeyboardInterrupt:
            answer = ("result", None)
        except BaseException as exc:  # a harness bug: reported as the trial's error
            answer = ("failed", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(answer)
        except (OSError, ValueError):
            return
        if answer[1] is None:
            return  # interrupted: the run is ending


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    trial: PlannedTrial | None = None
    attempt: int = 0


class ProcessExecutor(Executor):
    """Runs up to ``workers`` trials at once, each worker a process; see the module docstring."""

    def run(
        self,
        trials: list[PlannedTrial],
        run_trial: TrialJob,
        on_result: ResultFn,
        cancel: threading.Event,
    ) -> None:
        """Hand trials to worker processes and record each result in the calling thread."""
        if not trials:
            return
        ctx = multiprocessing.get_context("spawn")
        portable = run_trial.portable()
        queue: list[tuple[PlannedTrial, int]] = [(t, 0) for t in reversed(trials)]
        workers: list[_Worker] = []

        def start() -> _Worker:
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=_serve, args=(theirs, portable, os.getpid()), name="itbench-worker"
            )
            proc.start()
            theirs.close()
            worker = _Worker(proc, ours)
            workers.append(worker)
            return worker

        try:
            for _ in range(min(self.workers, len(trials))):
                start()
            while queue or any(w.trial is not None for w in workers):
                if cancel.is_set():
                    break
                for worker in workers:
                    if worker.trial is None and queue:
                        worker.trial, worker.attempt = queue.pop()
                        # A worker that died before taking it shows as lost below.
                        with contextlib.suppress(OSError, ValueError):
                            worker.conn.send(worker.trial)
                busy = [w for w in workers if w.trial is not None]
                ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], 0.2)
                for worker in busy:
                    if worker.conn in ready or worker.process.sentinel in ready:
                        self._collect(worker, run_trial, on_result, queue)
                for worker in [w for w in workers if not w.process.is_alive()]:
                    workers.remove(worker)
                    if queue:
                        start()
        except BaseException:
            cancel.set()
            raise
        finally:
            self._stop(workers, on_result)

    @staticmethod
    def _collect(
        worker: _Worker,
        job: TrialJob,
        on_result: ResultFn,
        queue: list[tuple[PlannedTrial, int]],
    ) -> None:
        from itbench.models import TrialResult

        trial = worker.trial
        assert trial is not None
        try:
            kind, payload = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(timeout=5)
            reason = f"worker process {worker.process.pid} ended with {worker.process.exitcode}"
            worker.trial = None
            # Whatever the attempt left (processes, directories) goes before anything else.
            with contextlib.suppress(Exception):
                job.recover(trial)
            if worker.attempt == 0:
                queue.append((trial, 1))
            else:
                on_result(job.error_result(trial, f"worker lost twice; last: {reason}"))
            return
        worker.trial = None
        if kind == "failed":
            with contextlib.suppress(Exception):
                job.recover(trial)
            on_result(job.error_result(trial, f"the trial's worker failed: {payload}"))
            return
        on_result(TrialResult.model_validate_json(payload) if payload is not None else None)

    @staticmethod
    def _stop(workers: list[_Worker], on_result: ResultFn) -> None:
        """End every worker: idle ones are told to stop, busy ones interrupted and awaited."""
        for worker in workers:
            if not worker.process.is_alive():
                continue
            if worker.trial is None:
                with contextlib.suppress(OSError, ValueError):
                    worker.conn.send(None)
            elif worker.process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.process.pid, signal.SIGINT)
        end = time.monotonic() + CANCEL_GRACE
        for worker in workers:
            worker.process.join(timeout=max(0.1, end - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(timeout=5)
            if worker.trial is not None:
                on_result(None)  # cut short: not recorded, resume reruns it
            worker.conn.close()
