"""Build, add to and verify the leaderboards: ``itbench leaderboard``."""

from __future__ import annotations

from pathlib import Path

import click

from itbench import __version__, console
from itbench.bench import Bench
from itbench.builtin.scenarios import REPO_CATALOG
from itbench.cli.common import EXIT_FAILED, problems_reported
from itbench.cli.params import (
    bench_options,
    json_option,
    parse_options,
    plugin_options,
    run_dir_type,
)
from itbench.errors import RunDirError

#: ``leaderboards/`` beside the catalog in a source checkout.
REPO_BOARD = REPO_CATALOG.parent / "leaderboards"

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
        try:
            files, refused = build(root, bench.catalog.scenarios, bench)
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
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
    """Add a finished run as a leaderboard entry (then rebuild with `itbench leaderboard`).

    The run is checked first: every results line must follow the run's chain and match its
    trial's evaluation record, the labels must be the ones the agent's registration gives, and
    the run must come from committed code whose package hashes are those of its recorded
    revision. The entry's summary records what was checked.
    """
    from itbench.report.leaderboard import add_run

    try:
        entry = add_run(run_dir, _board(board), name, __version__, bench)
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    console.out.print(f"added {entry}", highlight=False, markup=False)


@leaderboard.command("verify")
@click.argument("entry", type=str)
@click.option(
    "--rerun",
    "k",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Trials of the entry to draw at random and run again.",
)
@click.option("--out", type=run_dir_type, default=None, help="The re-run's run directory.")
@click.option(
    "--option",
    "option_words",
    multiple=True,
    metavar="KEY=VALUE",
    help="An option redacted at publication (a credential), given again.",
)
@board_option
@json_option
@bench_options
@click.pass_context
def verify(
    ctx: click.Context,
    bench: Bench,
    entry: str,
    k: int,
    out: Path | None,
    option_words: tuple[str, ...],
    board: Path | None,
    as_json: bool,
) -> None:
    """Re-run K random trials of ENTRY and mark it verified, disputed or unverified.

    The entry's recorded agent and settings run the drawn trials' scenarios again on fresh
    draws; a one-sided Fisher exact test compares the entry's passes on those trials with the
    re-run's. Significantly more claimed passes (p < 0.05): disputed, exit 1. The outcome is
    written to the entry's verification.json; rebuild the board to show it.
    """
    from datetime import UTC, datetime

    from itbench.report.leaderboard import ENTRY_NAME, RUNS
    from itbench.report.verify import verify_entry

    if not ENTRY_NAME.fullmatch(entry):
        raise click.BadParameter(f"{entry!r} is no entry name", param_hint="ENTRY")
    path = _board(board) / RUNS / entry
    if not path.is_dir():
        raise click.UsageError(f"{path}: no such leaderboard entry")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    out = out or Path("runs") / f"verify-{entry}-{stamp}"
    with problems_reported(bench):
        try:
            result = verify_entry(path, bench, k, out, options=parse_options(option_words))
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
    if as_json:
        console.print_json(result.model_dump(mode="json"))
    else:
        console.out.print(
            f"{entry}: {result.status}: {result.reason}", highlight=False, markup=False
        )
    if result.status == "disputed":
        ctx.exit(EXIT_FAILED)
