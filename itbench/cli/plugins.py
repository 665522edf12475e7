"""List the loaded plugins and their problems: ``itbench plugins``."""

from __future__ import annotations

import sys
from typing import Any

import click

from itbench import console
from itbench.bench import Bench
from itbench.cli.common import EXIT_FAILED, report_problems
from itbench.cli.params import (
    json_option,
    plugin_option,
)


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
                        "flag": f"--{o.name}" if o.flag else None,
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
        for o in sorted(bench.options.values(), key=lambda o: (not o.flag, o.key)):
            values = "" if o.switch else " " + ("|".join(o.choices) or "VALUE")
            spelling = f"--{o.name}{values}" if o.flag else f"--option {o.key}={values.strip()}"
            console.out.print(f"{spelling}: {o.help}", highlight=False, markup=False)
    report_problems(bench)
    if problems:
        console.problem(f"{len(problems)} plugin problem(s)")
        sys.exit(EXIT_FAILED)
