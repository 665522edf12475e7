"""Run an agent on scenarios: ``itbench evaluate``."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from itbench import console
from itbench.bench import Bench
from itbench.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    load_catalog,
    problems_reported,
    report_problems,
    run_with_progress,
    sigterm_as_interrupt,
)
from itbench.cli.params import (
    PLUGIN_FLAGS,
    json_option,
    parse_options,
    plugin_flags,
    plugin_options,
    run_options,
    selection_options,
)
from itbench.errors import RunDirError
from itbench.models import Complexity, RunConfig, TrialStatus
from itbench.runner import RunOutcome
from itbench.store import RunStore


@click.command(context_settings=PLUGIN_FLAGS)
@click.pass_context
@click.option("--agent", help="Agent name (see `itbench plugins`); required unless --resume.")
@click.option("--scenarios", "-s", "patterns", multiple=True, help="Scenario id glob (repeatable).")
@selection_options
@click.option("--trials", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Agent time limit, s.")
@click.option(
    "--label",
    help="The run's name in every table (default: the agent, with its model where it has one).",
)
@run_options
@click.option("--resume", type=click.Path(file_okay=False, path_type=Path), help="Continue a run.")
@json_option
@plugin_options
def evaluate(
    ctx: click.Context,
    agent: str | None,
    patterns: tuple[str, ...],
    domains: tuple[str, ...],
    tags: tuple[str, ...],
    complexity: tuple[str, ...],
    trials: int,
    seed: int,
    timeout: float | None,
    label: str | None,
    workers: int,
    executor: str,
    sandbox: str,
    options: tuple[str, ...],
    out: Path | None,
    resume: Path | None,
    as_json: bool,
    plugins: tuple[str, ...],
    scenario_paths: tuple[str, ...],
) -> None:
    """Run an agent on scenarios and record the results.

    Plugins may add flags of their own (listed by `itbench plugins`), such as
    `--policy-engine opa`; each sets a trial option like `--option KEY=VALUE`.

    Exits 0 when every trial ran (whatever the scores), 1 when any trial ended in an
    infrastructure error, 2 on a usage error, 130 when interrupted. Plugin problems raised
    during the run are printed after the results (and kept in `plugin-problems.json`).
    """
    if resume is not None:
        try:
            manifest = RunStore(resume).read_manifest()
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
        config = manifest.config
        run_dir = resume
    else:
        if not agent:
            raise click.UsageError("--agent is required (or --resume DIR)")
        config = RunConfig(
            agent=agent,
            scenarios=list(patterns) or ["*"],
            domains=list(domains),
            tags=list(tags),
            complexity=[Complexity(c) for c in complexity],
            trials=trials,
            seed=seed,
            timeout=timeout,
            workers=workers,
            executor=executor,
            sandbox=sandbox,
            plugins=list(plugins),
            scenario_paths=[str(Path(p).resolve()) for p in scenario_paths],
            options=parse_options(options),
            label=label,
        )
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        run_dir = out or Path("runs") / f"{stamp}-{agent.replace('/', '_')}"
    bench = Bench(plugins=config.plugins, scenario_paths=config.scenario_paths)
    with problems_reported(bench):
        _run(ctx, bench, config, run_dir, resume is not None, as_json)


def _run(
    ctx: click.Context,
    bench: Bench,
    config: RunConfig,
    run_dir: Path,
    resume: bool,
    as_json: bool,
) -> None:
    rest, flags = plugin_flags(bench, list(ctx.args))
    if rest:
        raise click.UsageError(f"unexpected argument(s): {' '.join(rest)}")
    if flags and resume:
        raise click.UsageError("a resumed run keeps its options; drop the flags or start a new run")
    config.options.update(flags)
    load_catalog(bench, rejections="count")
    sigterm_as_interrupt()
    try:
        outcome = run_with_progress(bench, config, run_dir, resume, show_progress=not as_json)
    except KeyboardInterrupt:
        done = len(RunStore(run_dir).results())
        console.problem(
            f"interrupted; {done} trial(s) recorded in {run_dir}; continue with --resume {run_dir}"
        )
        report_problems(bench)
        sys.exit(EXIT_INTERRUPTED)
    _print_outcome(outcome, as_json)
    report_problems(bench)
    sys.exit(EXIT_FAILED if outcome.errors else EXIT_OK)


def _print_outcome(outcome: RunOutcome, as_json: bool) -> None:
    if as_json:
        console.print_json(
            {
                "run_dir": str(outcome.run_dir),
                "errors": outcome.errors,
                "problems": outcome.problems,
                "results": [r.model_dump(mode="json") for r in outcome.results],
            }
        )
        return
    header, rows = console.trial_rows(outcome.results)
    console.table(f"results: {outcome.run_dir}", header, rows)
    counts = {s.value: sum(r.status is s for r in outcome.results) for s in TrialStatus}
    console.out.print(", ".join(f"{n} {s}" for s, n in counts.items()), highlight=False)
