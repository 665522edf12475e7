"""Recovery: stopping and removing what trials of a killed harness or a lost worker left.

A trial directory without a result is recovered from harness-only records when a run resumes
(``--resume``), when ``itbench cleanup`` runs, and before a trial whose worker was lost runs
again: the processes and control groups recorded there are stopped, mounts undone, the
domain's own leftovers recovered and the directories removed. A trial judged before the
harness died keeps its directory; on resume its verdict becomes its result.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from itbench.active import RunLock
from itbench.cgroups import remove_recorded
from itbench.domain import AnyDomain
from itbench.errors import RunDirError, UsageError
from itbench.models import Timings, TrialResult, TrialStatus
from itbench.plan import PlannedTrial
from itbench.process import foreign_records, stop_recorded
from itbench.store import EVALUATION, TRIAL_RECORD
from itbench.trial import VERDICT, WORKSPACE_ALIASES, TrialRunner
from itbench.workspace_fs import unmount_all, unmount_noted


def lock_run(run_dir: Path) -> RunLock:
    """Take the run directory's lock.

    Raises:
        UsageError: another process holds it.
    """
    lock = RunLock(run_dir)
    try:
        lock.acquire()
    except RunDirError as exc:
        raise UsageError(str(exc)) from None
    return lock


class Recovery:
    """Recovers the trial directories of one run directory.

    Args:
        runner: The run's runner: its store and directory, the domains it loads (each
            recovers what its own environments left) and, once the run has started, the
            fields of results recorded from verdicts.
    """

    def __init__(self, runner: TrialRunner) -> None:
        self.runner = runner
        self.store = runner.store
        self.run_dir = runner.run_dir

    def recover_unfinished(
        self, done: set[str], planned: dict[str, PlannedTrial] | None = None
    ) -> set[str]:
        """Stop and remove what trials of a killed harness left (from harness-only records).

        A trial that was judged before the harness died keeps its directory; with ``planned``
        (a resume) its verdict is recorded as its result, so it is never drawn again.

        Returns:
            The trial ids whose results were recorded from their verdicts.
        """
        self.store.remove_staging()
        recorded: set[str] = set()
        for handle, trial_id in self.store.trial_dirs().items():
            if trial_id in done or trial_id in recorded:
                continue
            judged = self._recover_dir(handle, trial_id)
            trial = (planned or {}).get(trial_id)
            if judged and trial is not None:
                self.store.append(self._judged_result(handle, trial))
                recorded.add(trial_id)
        return recorded

    def _judged_result(self, handle: str, trial: PlannedTrial) -> TrialResult:
        """The result of a trial judged before the harness died, from its verdict and record."""
        directory = self.store.trial_dir(handle)
        verdict = json.loads((directory / VERDICT).read_text(encoding="utf-8"))
        try:
            evaluation = json.loads((directory / EVALUATION).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            evaluation = {}
        note = "recorded on resume: the harness stopped after judging the trial, before its line"
        error = f"{verdict['error']}; {note}" if verdict.get("error") else note
        started = datetime.fromtimestamp((directory / TRIAL_RECORD).stat().st_mtime, UTC)
        finished = datetime.fromtimestamp((directory / VERDICT).stat().st_mtime, UTC)
        return TrialResult(
            **self.runner.planned_fields(trial),
            handle=handle,
            status=TrialStatus(verdict["status"]),
            metrics=evaluation.get("metrics") or {},
            timings=Timings(
                time_to_detect=evaluation.get("time_to_detect"),
                time_to_mitigate=evaluation.get("time_to_mitigate"),
            ),
            error=error,
            started_at=started,
            finished_at=finished,
            record_sha256=self.store.record_sha256(handle),
        )

    def cleanup(self) -> list[str]:
        """Stop and remove what a killed run left in this run directory.

        Every trial directory without a result is recovered (its recorded processes stopped,
        its directories removed), as ``--resume`` does before running the rest.

        Returns:
            The trial ids recovered.

        Raises:
            UsageError: another process holds the run directory.
            RunDirError: the results cannot be read.
        """
        lock = lock_run(self.run_dir)
        try:
            done = {r.trial_id for r in self.store.iter_results()}
            left = [t for t in self.store.trial_dirs().values() if t not in done]
            self.recover_unfinished(done)
            return sorted(left)
        finally:
            lock.release()

    def recover_trial(self, trial_id: str) -> None:
        """Stop and remove what earlier attempts of one trial left (a worker that died)."""
        for handle, tid in self.store.trial_dirs().items():
            if tid == trial_id:
                # The driver runs the trial again: its earlier attempt, judged or not, goes.
                self._recover_dir(handle, trial_id, keep_judged=False)

    def _recover_dir(self, handle: str, trial_id: str, *, keep_judged: bool = True) -> bool:
        """Stop what a trial left; remove its directories unless it was judged.

        Returns:
            Whether the trial was judged (its directory, with its verdict, is kept).
        """
        trial = self.store.trial_dir(handle)
        foreign = foreign_records(trial)
        if foreign:
            # Its processes ran on another node of a cluster: only that node can stop them.
            hosts = ", ".join(sorted({r.host for r in foreign}))
            raise UsageError(
                f"trial {trial_id} ran on {hosts}: run `itbench cleanup {self.run_dir}` there"
            )
        domain = self._domain_of(trial_id)
        if domain is None:
            # Without its domain only the recorded process groups can be stopped: the trial
            # directory stays, so that a cleanup with the domain loaded can finish the job.
            stop_recorded(trial)
            raise UsageError(
                f"trial {trial_id}: its domain {trial_id.split('.', 1)[0]!r} is not loaded; "
                "load the run's plugins and clean up again"
            )
        with contextlib.suppress(Exception):
            domain.recover(trial)
        remove_recorded(trial)  # the sandbox's control groups
        unmount_all(self.store.workspace(handle))  # the bounded workspace of a killed harness
        unmount_noted(trial)  # and the sandbox's private directory
        if (alias := WORKSPACE_ALIASES / handle).is_symlink():
            alias.unlink()
        if keep_judged and (trial / VERDICT).is_file():
            return True
        shutil.rmtree(trial, ignore_errors=True)
        shutil.rmtree(self.store.workspace(handle), ignore_errors=True)
        return False

    def _domain_of(self, trial_id: str) -> AnyDomain | None:
        # A trial id starts with its scenario id, '/' turned '.'; domain names hold no '.'.
        return self.runner.bench.domains.get(trial_id.split(".", 1)[0])
