"""List scenarios: ``itbench list``."""

from __future__ import annotations

import click

from itbench import console
from itbench.bench import Bench
from itbench.cli.common import file_count, load_catalog
from itbench.cli.params import (
    bench_options,
    json_option,
    patterns_argument,
    selection_options,
)


@click.command("list")
@patterns_argument
@selection_options
@json_option
@bench_options
def list_cmd(
    bench: Bench,
    patterns: tuple[str, ...],
    domains: tuple[str, ...],
    tags: tuple[str, ...],
    complexity: tuple[str, ...],
    as_json: bool,
) -> None:
    """List scenarios (id globs like 'sre/*' select)."""
    load_catalog(bench)
    specs = bench.catalog.select(
        patterns or ("*",), tags=tags, domains=domains, complexity=complexity
    )
    rejected = file_count(bench.catalog.errors)
    if as_json:
        console.print_json([s.summary() for s in specs])
    else:
        rows = [
            [s.id, s.domain, s.complexity.value, ",".join(s.task_types), ",".join(s.tags)]
            for s in specs
        ]
        console.table(None, ["id", "domain", "complexity", "task types", "tags"], rows)
        console.out.print(f"{len(specs)} scenarios, {rejected} rejected file(s)")
    if rejected:
        console.problem(f"{rejected} scenario file(s) rejected")
