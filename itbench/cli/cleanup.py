"""Stop and remove what killed runs left behind: ``itbench cleanup``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from itbench import console
from itbench.bench import Bench
from itbench.cli.common import (
    EXIT_FAILED,
    problems_reported,
)
from itbench.cli.params import (
    json_option,
    plugin_options,
)
from itbench.errors import RunDirError, UsageError
from itbench.runner import Runner
from itbench.store import RunStore


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@json_option
@plugin_options
def cleanup(
    run_dirs: tuple[Path, ...],
    as_json: bool,
    plugins: tuple[str, ...],
    scenario_paths: tuple[str, ...],
) -> None:
    """Stop and remove what killed runs left behind (environments, processes, directories).

    With RUN_DIRs, those runs; without, every run recorded as in progress whose process is
    gone. Only harness-only records are used (pid files of trial directories, the run lock and
    the user's record of runs in progress); a run still in progress is left alone. Each run is
    cleaned with the plugins it ran with (its manifest names them) and those given here.
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
            bench = Bench(
                plugins=[*plugins, *manifest.config.plugins],
                scenario_paths=[*scenario_paths, *manifest.config.scenario_paths],
            )
            with problems_reported(bench):
                entry["recovered"] = Runner(bench, manifest.config, run_dir).cleanup()
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
