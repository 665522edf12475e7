"""Load 1,000 scenario files (goal: under 1 s), against a baseline of parsing the same YAML.

Run: .venv/bin/python benchmarks/core_registry_load.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from _common import median_time, use_toy_plugin

use_toy_plugin()

from itbench.bench import Bench  # noqa: E402
from itbench.catalog import ScenarioLoader, scenario_files  # noqa: E402

TEMPLATE = """\
domain: toy
title: Registry case {i}
goal: One value of the registry is invalid. Name its key and repair it.
task_types: [localization, mitigation]
tags: [toy, bench, group-{g}]
complexity: {c}
time_limit: 60
values: {{alpha: 1, beta: 2, gamma: 3, delta: {i}}}
ground_truth: {{key: beta, expected: 2}}
"""


def main() -> None:
    bench = Bench(plugins=["itbench_toy.plugin"], autoload=False)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "toy"
        for i in range(1000):
            sub = root / f"group{i % 20}"
            sub.mkdir(parents=True, exist_ok=True)
            c = ("low", "medium", "high")[i % 3]
            (sub / f"case{i:04d}.yaml").write_text(TEMPLATE.format(i=i, g=i % 20, c=c))
        loader = ScenarioLoader(bench.domains)
        catalog = loader.load([Path(tmp)])
        assert len(catalog.scenarios) == 1000 and not catalog.errors, catalog.errors[:3]

        def parse_only() -> None:
            for path in scenario_files(Path(tmp)):
                with path.open("rb") as fh:
                    yaml.load(fh, Loader=yaml.CSafeLoader)

        base, _ = median_time(parse_only)
        full, samples = median_time(lambda: ScenarioLoader(bench.domains).load([Path(tmp)]))
    print(
        f"registry load, 1000 files: median {full * 1000:.0f} ms over {len(samples)} runs (goal < 1000 ms)"
    )
    print(
        f"baseline YAML parse only:  median {base * 1000:.0f} ms; ratio load/parse = {full / base:.2f}"
    )


if __name__ == "__main__":
    main()
