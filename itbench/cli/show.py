"""Show the public fields of one scenario: ``itbench show``."""

from __future__ import annotations

import difflib
import sys
from typing import Any

import click

from itbench import console
from itbench.bench import Bench
from itbench.catalog import ScenarioError
from itbench.cli.common import EXIT_FAILED, load_catalog
from itbench.cli.params import (
    bench_options,
    json_option,
)


def _rejection(error: ScenarioError) -> dict[str, Any]:
    return {
        "file": str(error.path),
        "field": error.field,
        "reason": error.reason,
        "id": error.scenario_id or error.intended_id,
    }


@click.command()
@click.argument("scenario_id")
@json_option
@bench_options
def show(bench: Bench, scenario_id: str, as_json: bool) -> None:
    """Show the public fields of one scenario (never its ground truth).

    Exits 1 naming file, field and reason when the file meant to define the scenario was
    rejected, 2 when no file defines it.
    """
    load_catalog(bench, rejections="none")
    catalog = bench.catalog
    spec = catalog.scenarios.get(scenario_id)
    if spec is None:
        rejected = catalog.rejections_of(scenario_id)
        if not rejected:
            close = difflib.get_close_matches(scenario_id, list(catalog.scenarios), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else " (see `itbench list`)"
            raise click.UsageError(f"unknown scenario {scenario_id!r}{hint}")
        if as_json:
            console.print_json({"id": scenario_id, "rejected": [_rejection(e) for e in rejected]})
        for error in rejected:
            console.problem(f"scenario {scenario_id!r} was rejected: {error.line()}")
        sys.exit(EXIT_FAILED)
    data = {**spec.summary(), "description": spec.description, "goal": spec.goal}
    data["params"] = spec.params
    data["source"] = str(spec.source_path) if spec.source_path else None
    if as_json:
        console.print_json(data)
        return
    for key, value in data.items():
        text = _text(value)
        console.out.print(f"[bold]{key}[/bold]: {text}", highlight=False)


def _text(value: object) -> object:
    """A summary value as one line: lists joined (a fault's drawn targets as "one of ...")."""
    if isinstance(value, list):
        return ", ".join(
            f"one of ({' | '.join(map(str, v))})" if isinstance(v, list) else str(v) for v in value
        )
    return value
