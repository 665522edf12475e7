"""Commands that write files: ``report``, ``schema`` and ``docs``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from itbench import console
from itbench.bench import Bench
from itbench.builtin.scenarios import REPO_CATALOG
from itbench.cli.common import EXIT_FAILED, report_problems
from itbench.cli.params import bench_options, json_option
from itbench.domain import AnyDomain
from itbench.errors import RunDirError
from itbench.models import RunManifest, ScenarioSpec, Submission, TaskView, TrialResult
from itbench.store import RunStore

#: ``docs/`` beside the ``itbench`` package in a source checkout (found like the catalog).
REPO_DOCS = REPO_CATALOG.parent / "docs"
#: The first line of every generated domain reference (marks files ``docs`` owns).
REFERENCE_HEADING = "# Scenario reference: "
DOCS_INDEX = "README.md"


@click.command()
@click.argument(
    "run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path)
)
@click.option(
    "--k", "k", default=1, show_default=True, type=click.IntRange(min=1), help="k of pass@k."
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
    """Summarize runs: per domain and agent pass rate, pass@k, metrics, timings.

    Every reporter (see `itbench plugins`) writes its files to --out; the command says where.
    """
    from itbench.reporting.frames import display_rows, metric_rows, results_frame, summarize

    results: list[TrialResult] = []
    for run_dir in run_dirs:
        store = RunStore(run_dir)
        try:
            results += store.results(store.read_manifest())
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
    summary = summarize(results_frame(results), k=k)
    out_dir = out or run_dirs[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for name, reporter in bench.reporters.items():
        try:
            written += [str(p) for p in reporter.write(summary, out_dir)]
        except Exception as exc:
            console.problem(f"reporter {name!r} failed: {type(exc).__name__}: {exc}")
    report_problems(bench)
    if as_json:
        console.print_json(
            {
                "summary": json.loads(summary.to_json(orient="records")),
                "out_dir": str(out_dir),
                "files": written,
            }
        )
        return
    header, rows = display_rows(summary, k)
    console.table(f"report: {', '.join(map(str, run_dirs))}", header, rows, plain=True)
    header, rows = metric_rows(summary)
    if rows:
        console.table("metrics: mean ± standard error over scored trials", header, rows, True)
    if not written:
        console.out.print(f"no reporter wrote a file to {out_dir}", highlight=False)
        return
    console.out.print(f"wrote {len(written)} file(s) to {out_dir}:", highlight=False)
    for path in written:
        console.out.print(f"  {path}", highlight=False, markup=False)


@click.command()
@click.option(
    "--out", default="schemas", show_default=True, type=click.Path(file_okay=False, path_type=Path)
)
@json_option
@bench_options
def schema(bench: Bench, out: Path, as_json: bool) -> None:
    """Write the JSON Schemas of the models (and of each domain's spec and submission)."""
    models: dict[str, type[Any]] = {
        "scenario": ScenarioSpec,
        "task-view": TaskView,
        "submission": Submission,
        "trial-result": TrialResult,
        "run-manifest": RunManifest,
    }
    for name, domain in sorted(bench.domains.items()):
        models[f"{name}.scenario"] = domain.spec_model
        models[f"{name}.submission"] = domain.submission_model
    schemas = {name: model.model_json_schema() for name, model in models.items()}
    report_problems(bench)
    if as_json:
        console.print_json(schemas)
        return
    out.mkdir(parents=True, exist_ok=True)
    for name, data in schemas.items():
        path = out / f"{name}.schema.json"
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        console.out.print(f"wrote {path}", highlight=False)


def domain_docs(domains: dict[str, AnyDomain]) -> dict[str, str]:
    """The files ``itbench docs`` writes: ``<domain>.md`` for each domain and the index.

    Raises:
        click.ClickException: a domain's reference could not be generated.
    """
    files: dict[str, str] = {}
    rows = []
    for name, domain in sorted(domains.items()):
        try:
            files[f"{name}.md"] = domain.reference()
        except Exception as exc:
            raise click.ClickException(
                f"domain {name!r}: its reference failed: {type(exc).__name__}: {exc}"
            ) from None
        about = " ".join(domain.description.split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {about} | [{name}.md]({name}.md) |")
    files[DOCS_INDEX] = "\n".join(
        [
            "# Scenario references",
            "",
            "The fields a scenario file of each registered domain takes, and what its agents",
            "submit. Generated from the domains' models by `itbench docs`; do not edit by hand.",
            "",
            "| domain | about | reference |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )
    return files


def _generated(path: Path) -> bool:
    """Whether ``path`` is a domain reference ``itbench docs`` wrote."""
    try:
        with path.open(encoding="utf-8") as fh:
            return fh.readline().startswith(REFERENCE_HEADING)
    except (OSError, UnicodeDecodeError):
        return False


def stale_docs(directory: Path, files: dict[str, str]) -> tuple[list[Path], list[Path]]:
    """Files of ``directory`` that differ from ``files``, and generated ones no domain owns."""
    stale = [
        directory / name
        for name, text in files.items()
        if not (directory / name).is_file()
        or (directory / name).read_text(encoding="utf-8") != text
    ]
    orphans = (
        [p for p in sorted(directory.glob("*.md")) if p.name not in files and _generated(p)]
        if directory.is_dir()
        else []
    )
    return stale, orphans


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write (default: docs/ of the source checkout).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the stale files.")
@bench_options
def docs(bench: Bench, out: Path | None, check: bool) -> None:
    """Write each domain's scenario reference to DIR/<domain>.md.

    The registered domains' references, and DIR/README.md listing them. Each reference is generated from the domain's models
    (`Domain.reference()`); a reference of a domain no longer registered is removed.
    """
    if out is None:
        if not REPO_CATALOG.is_dir():
            raise click.UsageError("not in a source checkout of itbench: give --out DIR")
        out = REPO_DOCS
    files = domain_docs(bench.domains)
    report_problems(bench)
    stale, orphans = stale_docs(out, files)
    if check:
        for path in [*stale, *orphans]:
            reason = (
                "no longer generated"
                if path in orphans
                else "out of date"
                if path.is_file()
                else "missing"
            )
            console.problem(f"{path}: {reason}; run `itbench docs`")
        if stale or orphans:
            sys.exit(EXIT_FAILED)
        console.out.print(f"{out}: {len(files)} file(s) up to date", highlight=False)
        return
    out.mkdir(parents=True, exist_ok=True)
    for path in stale:
        path.write_text(files[path.name], encoding="utf-8")
        console.out.print(f"wrote {path}", highlight=False, markup=False)
    for path in orphans:
        path.unlink()
        console.out.print(f"removed {path}", highlight=False, markup=False)
    unchanged = len(files) - len(stale)
    console.out.print(f"{out}: {len(stale)} written, {unchanged} unchanged", highlight=False)
