"""The process executor: each worker its own Python process (``--executor processes``).

The local executor runs trials in threads of one interpreter, so the harness's own Python work
(judging, seeding accounts, policy evaluation) shares one GIL; with this executor each of the
``--workers`` slots is a process of its own, started once for the run, and trials run in
parallel on as many cores.

- Each worker rebuilds the run's runner from its config (plugins are loaded by name: a plugin
  registered only in the driver's memory is not seen, and its trials are recorded as ``error``
  saying so) and runs one trial at a time; the driver alone appends to ``results.jsonl``.
- Workers are programs of their own (``python -m itbench.process_executor``, never a re-import
  of the caller's main module) in sessions of their own: a terminal's Ctrl-C reaches the
  driver alone, which stops each worker once with SIGTERM; the worker's trial stops its agent and tears its
  environment down before the worker exits. A worker whose driver dies gets the same signal
  from the kernel (``PR_SET_PDEATHSIG``).
- A worker that dies or answers for no trial of its own loses its trial: what the attempt left
  is stopped and removed from harness-only records, and the trial runs once more; lost again,
  it is recorded as ``error`` with the reason. Nothing a trial does makes it vanish.
- Answers travel as JSON over the worker's pipe, which no program the trial starts inherits.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

from itbench.errors import UsageError
from itbench.executors import Executor, ResultFn, TrialJob

if TYPE_CHECKING:
    from itbench.plan import PlannedTrial
    from itbench.remote import RemoteTrial

#: Seconds stopped workers get to tear their trials down before they are killed.
CANCEL_GRACE = 300.0
#: Largest answer a worker may send (a trial's result is a few kilobytes).
ANSWER_LIMIT = 16 * 2**20
_PR_SET_PDEATHSIG = 1
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_once(signum: int, frame: Any) -> None:
    """The first stop signal interrupts the trial; later ones must not cut its teardown short."""
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def _isolate() -> None:
    """Stop signals handled once, death with the driver, no inheritable descriptors."""
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _stop_once)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):
                os.set_inheritable(fd, False)


def _answer(conn: Connection, answer: dict[str, Any]) -> bool:
    try:
        conn.send_bytes(json.dumps(answer).encode())
    except (OSError, ValueError):
        return False
    return True


def _serve(requests: Connection, answers: Connection, parent: int) -> None:
    """A worker's loop: the run's portable trial first, then each trial sent, answered as JSON."""
    try:
        _isolate()
        if os.getppid() != parent:  # the driver died before the death signal was armed
            return
        portable: RemoteTrial = requests.recv()
        reported = 0
        while True:
            trial = requests.recv()
            if trial is None:
                return
            answer: dict[str, Any] = {"trial_id": trial.trial_id}
            try:
                answer["result"] = portable(trial)
            except KeyboardInterrupt:
                answer["result"] = None
            except BaseException as exc:  # the harness's own failure: the trial's error
                answer["failed"] = f"{type(exc).__name__}: {exc}"
            problems = portable.problems()
            answer["problems"], reported = problems[reported:], len(problems)
            if not _answer(answers, answer) or answer.get("result", "") is None:
                return  # the driver is gone, or the run is stopping
    except (KeyboardInterrupt, EOFError, OSError):
        return


def main(argv: list[str] | None = None) -> None:
    """``python -m itbench.process_executor REQUESTS_FD ANSWERS_FD DRIVER_PID`` (a worker)."""
    args = argv if argv is not None else sys.argv[1:]
    requests = Connection(int(args[0]), writable=False)
    answers = Connection(int(args[1]), readable=False)
    _serve(requests, answers, int(args[2]))


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    requests: Connection
    conn: Connection  # the answers
    trial: PlannedTrial | None = None
    attempt: int = 0

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)

    def close(self) -> None:
        self.requests.close()
        self.conn.close()


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
        portable = run_trial.portable()
        queue: list[tuple[PlannedTrial, int]] = [(t, 0) for t in reversed(trials)]
        workers: list[_Worker] = []

        def start() -> None:
            req_r, req_w = os.pipe()
            ans_r, ans_w = os.pipe()
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "itbench.process_executor"]
                    + [str(req_r), str(ans_w), str(os.getpid())],
                    pass_fds=(req_r, ans_w),
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                for fd in (req_r, req_w, ans_r, ans_w):
                    os.close(fd)
                if not workers:
                    raise UsageError(f"cannot start a worker process: {exc}") from None
                return  # fewer workers than asked: the others carry on
            os.close(req_r)
            os.close(ans_w)
            worker = _Worker(
                proc, Connection(req_w, readable=False), Connection(ans_r, writable=False)
            )
            workers.append(worker)
            with contextlib.suppress(OSError, ValueError):
                worker.requests.send(portable)

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
                            worker.requests.send(worker.trial)
                busy = [w for w in workers if w.trial is not None]
                # A worker's answers pipe also shows its end (end of file).
                wait([w.conn for w in busy], 0.2)
                for worker in busy:
                    if worker.conn.poll() or not worker.alive():
                        self._collect(worker, run_trial, on_result, queue, cancel)
                for worker in [w for w in workers if not w.alive()]:
                    if worker.trial is not None:  # died since the answers were read
                        self._collect(worker, run_trial, on_result, queue, cancel)
                    workers.remove(worker)
                    worker.close()
                    if queue:
                        start()
                if not workers and queue:
                    break
        except BaseException:
            cancel.set()
            raise
        finally:
            self._stop(workers, run_trial, on_result, queue, cancel)
        if not cancel.is_set():
            for trial, _ in queue:  # no worker could be started again
                on_result(run_trial.error_result(trial, "no worker process could be started"))

    @staticmethod
    def _collect(
        worker: _Worker,
        job: TrialJob,
        on_result: ResultFn,
        queue: list[tuple[PlannedTrial, int]],
        cancel: threading.Event,
    ) -> None:
        """Record the busy worker's answer, or treat its trial as lost."""
        from itbench.models import TrialResult

        trial = worker.trial
        assert trial is not None
        worker.trial = None
        answer: dict[str, Any] = {}
        try:
            if worker.conn.poll():
                answer = json.loads(worker.conn.recv_bytes(ANSWER_LIMIT))
        except (EOFError, OSError, ValueError, TypeError):
            answer = {}
        if not isinstance(answer, dict):
            answer = {}
        for problem in answer.get("problems") or []:
            with contextlib.suppress(TypeError, ValueError):
                plugin, reason, hook = problem
                job.plugin_problem(str(plugin), str(reason), None if hook is None else str(hook))
        text = answer.get("result")
        if answer.get("trial_id") == trial.trial_id and "failed" in answer:
            with contextlib.suppress(Exception):
                job.recover(trial)
            on_result(job.error_result(trial, f"the trial's worker failed: {answer['failed']}"))
            return
        if answer.get("trial_id") == trial.trial_id and isinstance(text, str):
            try:
                result = TrialResult.model_validate_json(text)
            except ValueError:
                result = None
            if result is not None and result.trial_id == trial.trial_id:
                on_result(result)
                return
        if answer.get("trial_id") == trial.trial_id and text is None and cancel.is_set():
            on_result(None)  # cut short by the run's stop: not recorded, resume reruns it
            return
        # Died, was stopped on its own, or answered for another trial: the attempt is lost.
        worker.kill()
        reason = (
            f"worker process {worker.process.pid} ended with {worker.process.returncode}"
            if not answer
            else "the worker answered without a result of this trial"
        )
        with contextlib.suppress(Exception):
            job.recover(trial)
        if cancel.is_set():
            on_result(None)  # the run is stopping: resume reruns it
        elif worker.attempt == 0:
            queue.append((trial, 1))
        else:
            on_result(job.error_result(trial, f"worker lost twice; last: {reason}"))

    def _stop(
        self,
        workers: list[_Worker],
        job: TrialJob,
        on_result: ResultFn,
        queue: list[tuple[PlannedTrial, int]],
        cancel: threading.Event,
    ) -> None:
        """End every worker: idle ones are told to stop, busy ones stopped and awaited.

        Answers already sent are recorded; a trial still running when its worker ends is
        reported as cut short (``None``). A second interrupt while waiting kills the workers:
        what their trials leave is for ``itbench cleanup`` or ``--resume``.
        """
        for worker in workers:
            if worker.trial is None:
                with contextlib.suppress(OSError, ValueError):
                    worker.requests.send(None)
            elif worker.alive():
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.SIGTERM)
        end = time.monotonic() + CANCEL_GRACE
        forced = False
        for worker in workers:
            try:
                while worker.alive() and time.monotonic() < end:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        worker.process.wait(timeout=0.2)
            except KeyboardInterrupt:
                forced = True
                for other in workers:
                    with contextlib.suppress(ProcessLookupError):
                        other.process.kill()
            if worker.alive():
                worker.kill()
            if worker.trial is not None:
                if worker.conn.poll():
                    self._collect(worker, job, on_result, queue, cancel)
                else:
                    on_result(None)  # cut short: not recorded, resume reruns it
            worker.close()
        if forced:
            raise KeyboardInterrupt


if __name__ == "__main__":
    main()
