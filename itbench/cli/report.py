"""Summarize runs into tables and figures: ``itbench report``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from itbench import console
from itbench.bench import Bench
from itbench.cli.common import report_problems
from itbench.cli.params import bench_options, json_option
from itbench.errors import RunDirError


@click.command()
@click.argument(
    "run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path)
)
@click.option(
    "--k",
    "k",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="k of pass@k and pass^k.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write files (default: the first run directory).",
)
@json_option
@bench_options
def report(
    bench: Bench, run_dirs: tuple[Path, ...], k: int, out: Path | None, as_json: bool
) -> None:
    """Summarize runs: pass rate with intervals, pass@k, pass^k, metrics and breakdowns.

    Every reporter (see `itbench plugins`; built in: CSV, Markdown, LaTeX, HTML with plots)
    writes its files to --out; the command says where. Definitions: `itbench.report.tables`.
    """
    from itbench.report import build, frames
    from itbench.report.tables import display_rows, metric_rows

    try:
        result = build(frames(run_dirs), k=k)
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    out_dir = out or run_dirs[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for name, reporter in bench.reporters.items():
        try:
            written += [str(p) for p in reporter.write(result, out_dir)]
        except Exception as exc:
            console.problem(f"reporter {name!r} failed: {type(exc).__name__}: {exc}")
    report_problems(bench)
    if as_json:
        console.print_json(
            {
                "summary": json.loads(result.summary.to_json(orient="records")),
                "controls": []
                if result.controls is None
                else json.loads(result.controls.to_json(orient="records")),
                "breakdowns": {
                    d: json.loads(b.to_json(orient="records")) for d, b in result.breakdowns.items()
                },
                "out_dir": str(out_dir),
                "files": written,
            }
        )
        return
    header, rows = display_rows(result.summary, k)
    console.table(f"report: {', '.join(map(str, run_dirs))}", header, rows, plain=True)
    if result.controls is not None:
        header, rows = display_rows(result.controls, k)
        console.table("controls (apart from the pass rate above)", header, rows, plain=True)
    header, rows = metric_rows(result.summary)
    if rows:
        console.table("metrics: mean ± standard error over scored trials", header, rows, True)
    if not written:
        console.out.print(f"no reporter wrote a file to {out_dir}", highlight=False)
        return
    console.out.print(f"wrote {len(written)} file(s) to {out_dir}:", highlight=False)
    for path in written:
        console.out.print(f"  {path}", highlight=False, markup=False)
