"""Write the JSON Schemas of the models: ``itbench schema``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from itbench import console
from itbench.bench import Bench
from itbench.cli.common import report_problems
from itbench.cli.params import bench_options, json_option
from itbench.models import RunManifest, ScenarioSpec, Submission, TaskView, TrialResult


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
