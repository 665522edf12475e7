"""What runs a trial of a run in another process (a worker process, a Ray worker).

A :class:`RemoteTrial` is the picklable callable that executors running trials elsewhere send
to their workers (see :mod:`itbench.process_executor` and :mod:`itbench.cluster`): it rebuilds
the run's :class:`~itbench.trial.TrialRunner` there, once per process, and returns each
trial's result as JSON to the driver, which alone records it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itbench.bench import Bench
from itbench.errors import UsageError
from itbench.models import Label, RunConfig, RunManifest, TrialResult
from itbench.plan import PlannedTrial
from itbench.trial import TrialRunner


@dataclass(frozen=True)
class RemoteTrial:
    """Runs trials of a run in another process (a Ray worker), with the same itbench installed.

    Holds only what rebuilds the runner there: the run's config, directory, secret, manifest
    and labels. The run directory must be reachable at the same path (one machine, or a shared
    file system); the result goes back to the driver, which alone writes ``results.jsonl``.
    """

    config_json: str
    run_dir: str
    secret_hex: str
    manifest_json: str
    labels: tuple[str, ...]

    def runner(self) -> TrialRunner:
        """This process's runner for the run (made once per process)."""
        key = (self.run_dir, self.manifest_json)
        cached = _WORKER_RUNNERS.get(key)
        if cached is None or cached.cancel.is_set():
            config = RunConfig.model_validate_json(self.config_json)
            bench = Bench(plugins=config.plugins, scenario_paths=config.scenario_paths)
            cached = TrialRunner(bench, config, Path(self.run_dir))
            cached.attach(
                RunManifest.model_validate_json(self.manifest_json),
                bytes.fromhex(self.secret_hex),
                [Label(v) for v in self.labels],
            )
            _WORKER_RUNNERS[key] = cached
        return cached

    def __call__(self, trial: PlannedTrial) -> str | None:
        """Run ``trial`` here; ``None`` when the task was cancelled (its trial torn down).

        Raises:
            UsageError: the trial's agent or domain is not registered in this process.
            Exception: whatever the harness raised (never a trial's own failure).
        """
        runner = self.runner()
        for kind, name, known in (
            ("agent", trial.agent, runner.bench.agents),
            ("domain", trial.scenario.domain, runner.bench.domains),
        ):
            if name not in known:
                raise UsageError(
                    f"{kind} {name!r} is not registered in the worker process (plugins are "
                    "loaded there by name: load it with --plugin or install its distribution)"
                )
        box: dict[str, Any] = {}
        # An event, not Thread.join: a join cut by KeyboardInterrupt can leave is_alive()
        # False while the thread still runs, and the trial's teardown would be abandoned.
        done = threading.Event()

        def target() -> None:
            try:
                box["result"] = runner.run_trial(trial, 0)
            except BaseException as exc:  # the harness's own failure: raised to the caller
                box["error"] = exc
            finally:
                done.set()

        thread = threading.Thread(target=target, name=f"trial-{trial.trial_id}", daemon=True)
        thread.start()
        try:
            while not done.wait(timeout=0.1):
                pass
        except KeyboardInterrupt:
            # The driver cancelled the task: the trial sees the cancel, stops its agent and
            # tears its environment down (within its own time limits) before the task ends.
            runner.cancel.set()
            done.wait()
        error = box.get("error")
        if error is not None:
            raise error
        result: TrialResult | None = box.get("result")
        return result.model_dump_json() if result is not None else None

    def problems(self) -> list[tuple[str, str, str | None]]:
        """Plugin problems this process's runner recorded: ``(plugin, reason, hook)``."""
        runner = _WORKER_RUNNERS.get((self.run_dir, self.manifest_json))
        if runner is None:
            return []
        return [(p.plugin, p.reason, p.hook) for p in runner.bench.host.problems]


#: The runner of each run this worker process takes part in.
_WORKER_RUNNERS: dict[tuple[str, str], TrialRunner] = {}
