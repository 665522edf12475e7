"""What the commands share besides options: exit codes, problem lines, the catalog, a run."""

from __future__ import annotations

import signal
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import click

from itbench import console
from itbench.bench import Bench
from itbench.catalog import ScenarioError
from itbench.errors import RunDirError, UsageError
from itbench.models import RunConfig, TrialResult
from itbench.plan import PlannedTrial
from itbench.progress import Estimate
from itbench.runner import Runner, RunOutcome

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

#: The problem lines already printed, per bench (a problem is printed once per command).
_printed: weakref.WeakKeyDictionary[Bench, set[str]] = weakref.WeakKeyDictionary()


def report_problems(bench: Bench) -> int:
    """Print on stderr every plugin problem of ``bench`` not printed before.

    Some problems surface late (a registration hook is called when its items are first read,
    a lifecycle hook while trials run), so commands call this again at their end.

    Returns:
        How many lines were printed.
    """
    seen = _printed.setdefault(bench, set())
    printed = 0
    for line in bench.problem_lines():
        if line not in seen:
            seen.add(line)
            console.problem(line)
            printed += 1
    return printed


@contextmanager
def problems_reported(bench: Bench) -> Iterator[None]:
    """Print the plugin problems of ``bench`` not printed yet, however the block ends.

    A usage error, an exit, an interruption or an unexpected exception all still show the
    problems (which may be why the command failed).
    """
    try:
        yield
    finally:
        report_problems(bench)


def file_count(errors: Iterable[ScenarioError]) -> int:
    """How many scenario files ``errors`` reject (a matrix file may have an error per variant)."""
    return len({error.path for error in errors})


def load_catalog(bench: Bench, rejections: Literal["each", "count", "none"] = "each") -> None:
    """Load the catalog; print plugin problems and the rejected scenario files.

    Args:
        bench: The bench whose catalog to load.
        rejections: Print each rejection, only how many files were rejected (``itbench list``
            shows why), or nothing about them.
    """
    catalog = bench.catalog
    report_problems(bench)
    if rejections == "each":
        for error in catalog.errors:
            console.problem(f"rejected scenario: {error.line()}")
    elif rejections == "count" and catalog.errors:
        console.problem(
            f"{file_count(catalog.errors)} scenario file(s) rejected; itbench list shows why"
        )


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def sigterm_as_interrupt() -> None:
    """Treat SIGTERM like Ctrl-C, so teardown runs and finished trials stay recorded."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


def run_with_progress(
    bench: Bench, config: RunConfig, run_dir: Path, resume: bool, show_progress: bool
) -> RunOutcome:
    """Run with a progress bar on stderr.

    Raises:
        click.UsageError: the runner refused the run (bad agent, selection, run directory).
    """
    with console.progress(show_progress) as bar:
        task = bar.add_task(config.agent, total=None, last="")
        estimate = Estimate([], config.workers)

        def on_plan(todo: list[PlannedTrial], done: int) -> None:
            estimate.left.update(t.scenario.domain for t in todo)
            bar.update(task, total=len(todo) + done, completed=done, last=estimate.line())

        def on_result(result: TrialResult) -> None:
            estimate.finished(result)
            last = f"{estimate.line()} · {result.scenario_id}: {result.status.value}"
            bar.update(task, advance=1, last=last)

        runner = Runner(bench, config, run_dir, on_result=on_result, on_plan=on_plan)
        try:
            return runner.run(resume=resume)
        except (UsageError, RunDirError) as exc:
            # A plugin whose hook raised may be why (an agent it failed to register).
            report_problems(bench)
            raise click.UsageError(str(exc)) from None
