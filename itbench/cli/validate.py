"""Check scenarios with the reference agents and probes: ``itbench validate``."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from itbench import console
from itbench.bench import Bench
from itbench.builtin.agents import PROBES, answer_spread
from itbench.catalog import ScenarioError
from itbench.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    file_count,
    load_catalog,
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
    run_options,
)
from itbench.models import RunConfig, ScenarioSpec, TrialResult
from itbench.validation import verdict


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
    it), `probe/thrash` (acts on everything) and `probe/answer-key` (the answer to a draw
    anyone can make from the public catalog, not the trial's own; a control the constant
    passes may pass it too). A scenario any of them passes is invalid,
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
    with tempfile.TemporaryDirectory(prefix="itbench-answers-") as scratch:
        report = [
            verdict(
                spec,
                outcomes[spec.id],
                agents,
                _spread(bench, spec, Path(scratch)),
            )
            for spec in specs
        ]
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
            _answers(v["answers"]),
            "[green]ok[/green]" if v["valid"] else "[red]INVALID[/red]",
            "; ".join(v["reasons"])[:160],
        ]
        for v in report
    ]
    console.table("validate", ["scenario", *agents, "answers", "verdict", "why"], rows)


def _spread(bench: Bench, spec: ScenarioSpec, scratch: Path) -> dict[str, Any] | None:
    """The scenario's answer spread; none, with a warning, when its domain cannot draw it."""
    try:
        return answer_spread(bench.domains[spec.domain], spec, scratch)
    except Exception as exc:  # a plugin domain's draw: the verdicts stand without it
        console.problem(f"{spec.id}: no answer spread ({type(exc).__name__}: {exc})")
        return None


def _answers(spread: dict[str, Any] | None) -> str:
    """Distinct answers of the public draws, and how often the commonest comes up."""
    if not spread:
        return "–"
    return f"{spread['distinct']} (top {spread['commonest']:.0%})"
