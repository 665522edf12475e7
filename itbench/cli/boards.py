"""Commands over finished runs: ``compare`` and ``leaderboard``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from itbench import __version__, console
from itbench.bench import Bench
from itbench.builtin.scenarios import REPO_CATALOG
from itbench.cli.common import EXIT_FAILED, problems_reported
from itbench.cli.params import bench_options, json_option, plugin_options
from itbench.errors import RunDirError

#: ``leaderboards/`` beside the catalog in a source checkout.
REPO_BOARD = REPO_CATALOG.parent / "leaderboards"

run_dir_type = click.Path(file_okay=False, path_type=Path)


@click.command()
@click.argument("run_a", type=run_dir_type)
@click.argument("run_b", type=run_dir_type)
@json_option
def compare(run_a: Path, run_b: Path, as_json: bool) -> None:
    """Compare two runs problem by problem (paired tests; definitions in itbench.report.compare).

    Prints each common problem's pass rates and difference (B - A), the problems that flipped,
    an exact McNemar test and a paired permutation test.
    """
    from itbench.report import frames
    from itbench.report.compare import compare as compare_runs

    try:
        a, b = frames([run_a]).trials, frames([run_b]).trials
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    result = compare_runs(a, b)
    summary = result.summary()
    if as_json:
        console.print_json(
            {
                **summary,
                "problems": json.loads(result.problems.to_json(orient="records")),
                "flipped": {"to_pass": result.flipped_to_pass, "to_fail": result.flipped_to_fail},
                "only_in_a": result.only_a,
                "only_in_b": result.only_b,
            }
        )
        return
    rows = [
        [
            str(r["scenario_id"]),
            f"{r['rate_a']:.2f} ({r['passed_a']}/{r['scored_a']})",
            f"{r['rate_b']:.2f} ({r['passed_b']}/{r['scored_b']})",
            f"{r['difference']:+.2f}",
            "to pass"
            if r["pass_b"] and not r["pass_a"]
            else "to fail"
            if r["pass_a"] and not r["pass_b"]
            else "",
        ]
        for _, r in result.problems.iterrows()
    ]
    console.table(
        f"compare: A = {run_a}, B = {run_b}",
        ["problem", "A", "B", "B - A", "flipped"],
        rows,
        plain=True,
    )
    lines = [
        f"common problems: {summary['common_problems']} (only in A: {summary['only_in_a']}, "
        f"only in B: {summary['only_in_b']})",
        f"flipped to pass: {summary['flipped_to_pass']}, to fail: {summary['flipped_to_fail']}",
        f"exact McNemar p = {summary['mcnemar_p']:.4g}; "
        f"paired permutation p = {summary['permutation_p']:.4g}",
    ]
    if summary["mean_difference"] is not None:
        lines.insert(1, f"mean difference of pass rates (B - A): {summary['mean_difference']:+.3f}")
    for line in lines:
        console.out.print(line, highlight=False, markup=False)


board_option = click.option(
    "--dir",
    "board",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The leaderboard directory (default: this checkout's leaderboards/).",
)


def _board(board: Path | None) -> Path:
    if board is not None:
        return board
    if not REPO_BOARD.is_dir():
        raise click.UsageError("no leaderboards/ in this installation: give --dir")
    return REPO_BOARD


@click.group(invoke_without_command=True)
@board_option
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when a table is stale.")
@json_option
@plugin_options
@click.pass_context
def leaderboard(
    ctx: click.Context,
    board: Path | None,
    check: bool,
    as_json: bool,
    plugins: tuple[str, ...],
    scenario_paths: tuple[str, ...],
) -> None:
    """Build the leaderboard tables (overall and per domain) from the committed runs.

    Entries whose files do not match their recorded hashes are refused (exit 1); unsandboxed,
    reference, invalid-trial and other-catalog runs are marked. Add a run with
    `itbench leaderboard add RUN_DIR --name NAME`.
    """
    if ctx.invoked_subcommand is not None:
        return
    from itbench.report.leaderboard import build

    root = _board(board)
    bench = Bench(plugins=plugins, scenario_paths=scenario_paths)
    with problems_reported(bench):
        files, refused = build(root, bench.catalog.scenarios)
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    for reason in refused:
        console.problem(f"refused leaderboard entry: {reason}")
    if not check:
        for path in stale:
            path.write_text(files[path], encoding="utf-8")
    if as_json:
        console.print_json(
            {
                "dir": str(root),
                "files": [str(p) for p in files],
                "stale" if check else "written": [str(p) for p in stale],
                "refused": refused,
            }
        )
    elif check:
        for path in stale:
            console.problem(f"stale: {path}")
        console.out.print(
            f"{len(files) - len(stale)} of {len(files)} table(s) up to date", highlight=False
        )
    else:
        console.out.print(f"wrote {len(stale)} of {len(files)} table(s) to {root}", highlight=False)
    if refused or (check and stale):
        ctx.exit(EXIT_FAILED)


@leaderboard.command("add")
@click.argument("run_dir", type=run_dir_type)
@click.option("--name", required=True, help="Entry name (a directory under runs/).")
@board_option
@bench_options
def add(bench: Bench, run_dir: Path, name: str, board: Path | None) -> None:
    """Add a finished run as a leaderboard entry (then rebuild with `itbench leaderboard`)."""
    from itbench.report.leaderboard import add_run

    if not name or "/" in name or name.startswith("."):
        raise click.UsageError(f"--name {name!r}: a plain directory name is needed")
    try:
        entry = add_run(run_dir, _board(board), name, bench.catalog.scenarios, __version__)
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    console.out.print(f"added {entry}", highlight=False, markup=False)
