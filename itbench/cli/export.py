"""Export runs to another tool's format: ``itbench export``."""

from __future__ import annotations

from pathlib import Path

import click

from itbench import console
from itbench.errors import RunDirError


@click.command()
@click.argument(
    "run_dirs",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
@click.option(
    "--format", "fmt", type=click.Choice(["inspect"]), required=True, help="Output format."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write to (default: RUN_DIR/inspect).",
)
def export(run_dirs: tuple[Path, ...], fmt: str, out: Path | None) -> None:
    """Export runs to another tool's format.

    `--format inspect` writes one inspect_ai log (.eval) per run and domain, its task
    `itbench/DOMAIN` at the catalog's version: a sample per trial with its messages (tool
    calls for agents without a model), events (model responses, tool calls, agent events),
    scores (`itbench`: 1 passed, 0 otherwise; one per numeric metric) and model usage, for
    `inspect view` and inspect's data frames. Ground truth is not exported.
    """
    from itbench.inspect_export import export_run

    for run_dir in run_dirs:
        try:
            paths = export_run(run_dir, out or run_dir / "inspect")
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
        except ImportError as exc:
            raise click.UsageError(
                f"the inspect export needs inspect_ai ({exc}): pip install 'itbench[inspect]'"
            ) from None
        for path in paths:
            console.out.print(f"wrote {path}", highlight=False)
