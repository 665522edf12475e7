"""Commands that run trials: ``evaluate``, ``validate``, and ``cleanup`` after killed runs."""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from itbench import console
from itbench.bench import Bench
from itbench.builtin.agents import PROBES
from itbench.catalog import ScenarioError
from itbench.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    file_count,
    load_catalog,
    problems_reported,
    report_problems,
    run_with_progress,
    sigterm_as_interrupt,
)
from itbench.cli.params import (
    PLUGIN_FLAGS,
    bench_options,
    json_option,
    parse_options,
    plugin_flags,
    plugin_options,
    run_options,
    selection_options,
)
from itbench.errors import RunDirError, UsageError
from itbench.models import Complexity, RunConfig, ScenarioSpec, TrialResult, TrialStatus
from itbench.runner import Runner, RunOutcome
from itbench.store import RunStore


@click.command(context_settings=PLUGIN_FLAGS)
@click.pass_context
@click.option("--agent", help="Agent name (see `itbench plugins`); required unless --resume.")
@click.option("--scenarios", "-s", "patterns", multiple=True, help="Scenario id glob (repeatable).")
@selection_options
@click.option("--trials", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Agent time limit, s.")
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


@click.command(context_settings=PLUGIN_FLAGS)
@click.pass_context
@click.argument("patterns", nargs=-1)
@run_options
@click.option(
    "--probes/--no-probes",
    default=True,
    show_default=True,
    help="Also run the probe agents (leak, constant, thrash); each must fail.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Also fail when a scenario file a PATTERN names (by its id or name) was rejected.",
)
@json_option
@bench_options
def validate(
    ctx: click.Context,
    bench: Bench,
    patterns: tuple[str, ...],
    workers: int,
    executor: str,
    sandbox: str,
    options: tuple[str, ...],
    out: Path | None,
    probes: bool,
    strict: bool,
    as_json: bool,
) -> None:
    """Check scenarios: the oracle must pass each one; noop and every probe must fail it.

    The probes are `probe/leak` (looks for the answer outside the environment, from the
    sandbox), `probe/constant` (a fixed plausible answer; scenarios tagged `control` may pass
    it) and `probe/thrash` (acts on everything). A scenario any of them passes is invalid,
    with the agent named. Exits 1 when any selected scenario is invalid, and when scenario
    files are rejected: any of the catalog without a PATTERN, with `--strict` those whose
    intended id (the file's `id:`, else its name) a PATTERN matches. Plugin flags (see
    `itbench plugins`) work as in `itbench evaluate`.
    """
    rest, flags = plugin_flags(bench, [*patterns, *ctx.args])
    patterns = tuple(rest)
    load_catalog(bench)
    failing = bench.catalog.rejected(patterns) if strict or not patterns else []
    specs = bench.catalog.select(patterns or ("*",))
    if not specs and not failing:
        named = file_count(bench.catalog.rejected(patterns))
        hint = (
            f"; {named} rejected scenario file(s) match (see `itbench list` or `itbench show ID`"
            " for why; --strict fails on them)"
            if named
            else ""
        )
        raise click.UsageError(f"no scenario matches {', '.join(patterns or ('*',))}{hint}")
    if not specs:
        for error in failing:
            console.problem(f"rejected (fails validate): {error.line()}")
        if as_json:
            console.print_json({"scenarios": [], "invalid": 0, **_rejections(bench, failing)})
        else:
            console.out.print(f"no valid scenario selected; {file_count(failing)} rejected file(s)")
        report_problems(bench)
        sys.exit(EXIT_FAILED)
    base = out or Path(tempfile.mkdtemp(prefix="itbench-validate-"))
    outcomes: dict[str, dict[str, TrialResult]] = {s.id: {} for s in specs}
    agents = ["oracle", "noop", *(PROBES if probes else ())]
    sigterm_as_interrupt()
    try:
        for agent in agents:
            config = RunConfig(
                agent=agent,
                scenarios=[s.id for s in specs],
                workers=workers,
                executor=executor,
                sandbox=sandbox,
                options={**parse_options(options), **flags},
            )
            run_dir = base / agent.replace("/", "-")
            outcome = run_with_progress(
                bench,
                config,
                run_dir,
                resume=(run_dir / "manifest.json").exists(),
                show_progress=not as_json,
            )
            for r in outcome.results:
                outcomes[r.scenario_id][agent] = r
    except KeyboardInterrupt:
        console.problem(f"interrupted; partial runs in {base}")
        report_problems(bench)
        sys.exit(EXIT_INTERRUPTED)
    report = [verdict(spec, outcomes[spec.id], agents) for spec in specs]
    bad = sum(not v["valid"] for v in report)
    if as_json:
        console.print_json(
            {
                "scenarios": report,
                "invalid": bad,
                **_rejections(bench, failing),
                "runs": str(base),
            }
        )
    else:
        _print_verdicts(report, agents)
        console.out.print(
            f"{len(specs) - bad} valid, {bad} invalid, "
            f"{file_count(bench.catalog.errors)} rejected file(s); runs in {base}"
        )
    for error in failing:
        console.problem(f"rejected (fails validate): {error.line()}")
    report_problems(bench)
    sys.exit(EXIT_FAILED if bad or failing else EXIT_OK)


def _rejections(bench: Bench, failing: list[ScenarioError]) -> dict[str, Any]:
    return {
        "rejected_files": file_count(bench.catalog.errors),
        "failing_rejections": [
            {"file": str(e.path), "field": e.field, "reason": e.reason} for e in failing
        ],
    }


def _print_verdicts(report: list[dict[str, Any]], agents: list[str]) -> None:
    rows = [
        [
            str(v["id"]),
            *(str(v["agents"].get(a) or "–") for a in agents),
            "[green]ok[/green]" if v["valid"] else "[red]INVALID[/red]",
            "; ".join(v["reasons"])[:160],
        ]
        for v in report
    ]
    console.table("validate", ["scenario", *agents, "verdict", "why"], rows)


#: What each agent of ``validate`` must end in; a probe may also time out or be invalid.
_MUST = {
    "oracle": {TrialStatus.passed},
    "noop": {TrialStatus.failed},
    **{p: {TrialStatus.failed, TrialStatus.timeout, TrialStatus.invalid} for p in PROBES},
}


def verdict(
    spec: ScenarioSpec, by_agent: dict[str, TrialResult], agents: list[str]
) -> dict[str, Any]:
    """Whether one scenario is valid: the oracle passed it, noop and every probe failed it.

    A scenario tagged ``control`` expects a plain "no incident" answer, which
    ``probe/constant`` may give; it alone may pass those.
    """
    reasons = []
    for agent in agents:
        result = by_agent.get(agent)
        allowed = set(_MUST[agent])
        if agent == "probe/constant" and "control" in spec.tags:
            allowed.add(TrialStatus.passed)
        if result is None:
            reasons.append(f"{agent} missing")
        elif result.status not in allowed:
            note = f": {result.error}" if result.error else ""
            verb = "passed it" if result.passed else result.status.value
            reasons.append(f"{agent} {verb}{note}")
    statuses = {a: by_agent[a].status.value if a in by_agent else None for a in agents}
    return {
        "id": spec.id,
        "valid": not reasons,
        **{a: statuses[a] for a in ("oracle", "noop")},
        "agents": statuses,
        "reasons": reasons,
    }


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@json_option
@bench_options
def cleanup(bench: Bench, run_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Stop and remove what killed runs left behind (environments, processes, directories).

    With RUN_DIRs, those runs; without, every run recorded as in progress whose process is
    gone. Only harness-only records are used (pid files of trial directories, the run lock and
    the user's record of runs in progress); a run still in progress is left alone.
    """
    from itbench.active import records, unregister

    recorded = {r.run_dir: r.path for r in records()}
    chosen = [(Path(d), recorded.get(Path(d).resolve())) for d in run_dirs]
    if not run_dirs:
        chosen = list(recorded.items())
    report: list[dict[str, Any]] = []
    for run_dir, record in chosen:
        entry: dict[str, Any] = {"run_dir": str(run_dir)}
        store = RunStore(run_dir)
        try:
            manifest = store.read_manifest()
            runner = Runner(bench, manifest.config, run_dir)
            entry["recovered"] = runner.cleanup()
        except RunDirError as exc:
            if record is not None and not run_dir.exists():
                unregister(record)  # its directory is gone: nothing left to clean
                entry["recovered"] = []
            else:
                entry["problem"] = str(exc)
        except UsageError as exc:
            entry["problem"] = str(exc)  # still running: not ours to touch
        else:
            if record is not None:
                unregister(record)
        report.append(entry)
    if as_json:
        console.print_json(report)
    else:
        for entry in report:
            if "problem" in entry:
                console.problem(entry["problem"])
            else:
                trials = entry["recovered"]
                console.out.print(
                    f"{entry['run_dir']}: {len(trials)} unfinished trial(s) cleaned up",
                    highlight=False,
                    markup=False,
                )
        if not report:
            console.out.print("no run left anything behind", highlight=False)
    if any("problem" in e for e in report) and run_dirs:
        sys.exit(EXIT_FAILED)
