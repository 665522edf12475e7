"""The Ray executor: each trial a Ray task on a cluster (``--executor ray [--address ADDR]``).

Needs the optional extra ``pip install 'itbench[ray]'``. Without ``--address`` it starts a
local Ray instance with ``--workers`` CPUs for the run and stops it afterwards; with one, it
joins that cluster (``ray start --head`` on one machine, ``ray start --address=HEAD:6379`` on
the others, each with the same itbench, plugins and catalog installed).

- Every trial is a task that declares its domain's resources
  (:attr:`itbench.Domain.resources`: CPUs and memory) and acquires its port block on the node
  that runs it (port locks are per machine).
- The run directory must be reachable at the same path on every node (one machine, or a shared
  file system): trial artifacts are written there by the node; the driver alone appends to
  ``results.jsonl`` as results stream back.
- A trial whose worker process or node dies is retried once, after what the lost attempt left
  was stopped and removed (from harness-only records); lost again, it is recorded as ``error``
  with the reason. A trial is never lost.
- Ctrl-C (or SIGTERM) cancels the tasks: each in-flight trial stops its agent and tears its
  environment down on its node before the run exits; queued trials never start.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

from itbench.errors import UsageError
from itbench.executors import Executor, ResultFn, TrialJob

if TYPE_CHECKING:
    from itbench.plan import PlannedTrial

#: The run option holding the cluster's address (``--address`` is its flag).
ADDRESS_OPTION = "ray_address"
#: Seconds cancelled trials get to tear down before the driver stops waiting.
CANCEL_GRACE = 90.0
#: Object store of a local instance: results are small, a big store only costs memory.
LOCAL_OBJECT_STORE = 128 * 2**20


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError(
            "the ray executor needs Ray: pip install 'itbench[ray]' (or use --executor local)"
        ) from None
    return ray


def _run_remote(portable: Any, trial: PlannedTrial) -> str | None:
    """The body of a Ray task: run one trial on this node."""
    result: str | None = portable(trial)
    return result


def _lost(ray: Any, exc: BaseException) -> bool:
    """Whether an error is Ray's, not the trial's: the worker, its node or its memory gone.

    A trial's own failures come back as results; only an exception raised by the task's code
    arrives as ``RayTaskError``. Everything else Ray raises (a crashed or OOM-killed worker, a
    dead raylet or node, a lost object) means the attempt was cut short and may be retried.
    """
    return isinstance(exc, ray.exceptions.RayError) and not isinstance(
        exc, ray.exceptions.RayTaskError
    )


def _check_feasible(ray: Any, trials: list[PlannedTrial], job: TrialJob) -> None:
    """Refuse trials no node of the cluster can take (Ray would queue them forever).

    Raises:
        UsageError: a trial needs more CPUs or memory than the largest node has.
    """
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    cpus = max((float(r.get("CPU", 0)) for r in nodes), default=0.0)
    memory = max((float(r.get("memory", 0)) for r in nodes), default=0.0)
    for domain in sorted({t.scenario.domain for t in trials}):
        need = job.resources(next(t for t in trials if t.scenario.domain == domain))
        if float(need.get("num_cpus", 1)) > cpus or float(need.get("memory", 0)) > memory:
            raise UsageError(
                f"a {domain} trial needs {need} but the largest node of the cluster has "
                f"{cpus:g} CPUs and {memory / 2**30:.1f} GiB (--workers sets a local instance's CPUs)"
            )


class RayExecutor(Executor):
    """Runs each trial as a Ray task; see the module docstring."""

    def run(
        self,
        trials: list[PlannedTrial],
        run_trial: TrialJob,
        on_result: ResultFn,
        cancel: threading.Event,
    ) -> None:
        """Submit every trial, record results as they come, retry lost workers once."""
        if not trials:
            return
        ray = _ray()
        address = run_trial.options.get(ADDRESS_OPTION)
        started_here = not ray.is_initialized()
        if started_here:
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if address:
                kwargs["address"] = str(address)
            else:
                kwargs.update(num_cpus=self.workers, object_store_memory=LOCAL_OBJECT_STORE)
            try:
                ray.init(**kwargs)
            except Exception as exc:  # Ray's own errors: connection, authentication, ...
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise UsageError(
                    f"cannot start or join {where}: {type(exc).__name__}: {first}"
                ) from None
        try:
            self._run(ray, trials, run_trial, on_result, cancel)
        finally:
            if started_here:
                ray.shutdown()

    def _run(
        self,
        ray: Any,
        trials: list[PlannedTrial],
        job: TrialJob,
        on_result: ResultFn,
        cancel: threading.Event,
    ) -> None:
        _check_feasible(ray, trials, job)
        task = ray.remote(_run_remote)
        portable = ray.put(job.portable())
        flying: dict[Any, tuple[PlannedTrial, int]] = {}

        def submit(trial: PlannedTrial, attempt: int) -> None:
            res = job.resources(trial)
            options: dict[str, Any] = {"max_retries": 0, "num_cpus": float(res.get("num_cpus", 1))}
            if res.get("memory"):
                options["memory"] = int(res["memory"])
            flying[task.options(**options).remote(portable, trial)] = (trial, attempt)

        for trial in trials:
            submit(trial, 0)
        try:
            while flying:
                if cancel.is_set():
                    self._cancel(ray, flying, on_result)
                    return
                ready, _ = ray.wait(list(flying), num_returns=1, timeout=0.2)
                for ref in ready:
                    trial, attempt = flying.pop(ref)
                    self._collect(ray, ref, trial, attempt, job, on_result, submit)
        except BaseException:
            cancel.set()
            self._cancel(ray, flying, on_result)
            raise

    def _collect(
        self,
        ray: Any,
        ref: Any,
        trial: PlannedTrial,
        attempt: int,
        job: TrialJob,
        on_result: ResultFn,
        submit: Any,
    ) -> None:
        from itbench.models import TrialResult

        try:
            text = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            on_result(None)
            return
        except Exception as exc:
            last = str(exc).strip().splitlines()
            reason = f"{type(exc).__name__}: {last[-1] if last else ''}"
            # Whatever the attempt left (processes, directories) goes before anything else.
            with contextlib.suppress(Exception):
                job.recover(trial)
            if _lost(ray, exc):
                if attempt == 0:
                    submit(trial, 1)
                    return
                on_result(job.error_result(trial, f"worker lost twice; last: {reason}"))
                return
            on_result(job.error_result(trial, f"the trial's task failed: {reason}"))
            return
        on_result(TrialResult.model_validate_json(text) if text is not None else None)

    @staticmethod
    def _cancel(ray: Any, flying: dict[Any, tuple[PlannedTrial, int]], on_result: ResultFn) -> None:
        """Cancel every task and wait (bounded) until in-flight trials have torn down."""
        for ref in flying:
            ray.cancel(ref)
        end = time.monotonic() + CANCEL_GRACE
        refs = list(flying)
        while refs and time.monotonic() < end:
            done, refs = ray.wait(refs, num_returns=len(refs), timeout=0.5)
        for _ in flying:
            on_result(None)
        flying.clear()
