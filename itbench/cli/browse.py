"""Commands that show what is installed: ``list``, ``show`` and ``plugins``."""

from __future__ import annotations

import difflib
import sys
from typing import Any

import click

from itbench import console
from itbench.bench import Bench
from itbench.catalog import ScenarioError
from itbench.cli.common import EXIT_FAILED, file_count, load_catalog, report_problems
from itbench.cli.params import (
    bench_options,
    json_option,
    patterns_argument,
    plugin_option,
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
        text = ", ".join(value) if isinstance(value, list) else value
        console.out.print(f"[bold]{key}[/bold]: {text}", highlight=False)


def _plugin_rows(bench: Bench) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "source": info.source,
            "distribution": info.distribution,
            "version": info.version,
            "module": info.module,
            "hooks": bench.host.hooks_of(name),
        }
        for name, info in bench.host.infos.items()
    ]


@click.command()
@json_option
@plugin_option
def plugins(as_json: bool, plugins: tuple[str, ...]) -> None:
    """List loaded plugins: source, distribution, version and the hooks each implements.

    Exits 1 when any plugin has a problem (each printed on stderr, naming plugin and hook).
    """
    bench = Bench(plugins=plugins)
    # Calling the registration hooks surfaces plugins whose hooks raise.
    _ = (bench.domains, bench.agents, bench.executors, bench.reporters, bench.options)
    _ = bench.catalog_paths
    rows = _plugin_rows(bench)
    problems = [
        {"plugin": p.plugin, "hook": p.hook, "reason": p.reason} for p in bench.host.problems
    ]
    if as_json:
        console.print_json(
            {
                "plugins": rows,
                "problems": problems,
                "domains": sorted(bench.domains),
                "agents": sorted(bench.agents),
                "executors": sorted(bench.executors),
                "reporters": sorted(bench.reporters),
                "options": [
                    {
                        "flag": f"--{o.name}",
                        "key": o.key,
                        "help": o.help,
                        "choices": list(o.choices),
                        "switch": o.switch,
                    }
                    for o in bench.options.values()
                ],
            }
        )
    else:
        console.table(
            "plugins",
            ["plugin", "source", "distribution", "version", "hooks"],
            [
                [
                    r["name"],
                    r["source"],
                    r["distribution"] or "–",
                    r["version"] or "–",
                    ", ".join(r["hooks"]),
                ]
                for r in rows
            ],
        )
        console.out.print(f"domains: {', '.join(sorted(bench.domains)) or '–'}", highlight=False)
        console.out.print(f"agents: {', '.join(sorted(bench.agents))}", highlight=False)
        for o in bench.options.values():
            values = "" if o.switch else " " + ("|".join(o.choices) or "VALUE")
            console.out.print(f"--{o.name}{values}: {o.help}", highlight=False, markup=False)
    report_problems(bench)
    if problems:
        console.problem(f"{len(problems)} plugin problem(s)")
        sys.exit(EXIT_FAILED)
