"""Test-retest on a sample: a fixed correct answer gets the same diagnosis verdict every trial.

The whole catalog at 20 trials a problem is `benchmarks/sre_retest.py`'s work; here two
problems whose propagation is scored, one of a service and one of a link, run three times each
through the real runner with one fixed draw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from itbench_sre.retest import fixed_draw, judge, reliable
from itbench_sre.spec import SreSpec

from itbench.bench import Bench
from itbench.catalog import Catalog
from itbench.testing import run_scenarios

#: A service's fault whose failure climbs the call graph, and a link's fault.
SAMPLE = ("sre/wrong-upstream", "sre/edge-loss")
TRIALS = 3


def test_a_fixed_answer_gets_the_same_verdict_on_every_trial(
    catalog: Catalog, tmp_path: Path
) -> None:
    fixed = tmp_path / "catalog"
    fixed.mkdir()
    specs: dict[str, SreSpec] = {}
    for sid in SAMPLE:
        spec = catalog.scenarios[sid]
        assert isinstance(spec, SreSpec)
        drawn = fixed_draw(spec, 0, fixed)
        specs[drawn.id] = drawn
    out = tmp_path / "run"
    run_scenarios(
        "oracle",
        list(specs),
        out,
        bench=Bench(scenario_paths=[fixed]),
        workers=2,
        trials=TRIALS,
        scenario_paths=[str(fixed)],
    )
    records: dict[str, list[dict[str, Any] | None]] = {sid: [] for sid in specs}
    for line in (out / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        evaluation = out / "trials" / row["handle"] / "evaluation.json"
        spread = None
        if evaluation.exists():
            spread = json.loads(evaluation.read_text())["details"].get("spread")
        records[row["scenario_id"]].append(spread)
    for sid, spec in specs.items():
        figures = judge(spec, records[sid])
        assert figures["trials"] == TRIALS, (sid, figures)
        # Every trial measured something along the fault's way, and the answer built from
        # what most of them measured passes on each one.
        assert figures["empty"] == 0 and figures["consensus"], (sid, figures)
        assert reliable(figures) and figures["passed"] == TRIALS, (sid, figures)


@pytest.mark.parametrize("measured", [0, 1])
def test_the_verdict_counts_a_trial_that_measured_nothing_as_disagreeing(
    catalog: Catalog, tmp_path: Path, measured: int
) -> None:
    spec = catalog.scenarios["sre/wrong-upstream"]
    assert isinstance(spec, SreSpec)
    drawn = fixed_draw(spec, 0, tmp_path)
    root = drawn.truth().root_causes[0]
    edge: dict[str, Any] = {"edges": [[root, "frontend"]], "unscored": [], "seconds": 10.0}
    records: list[dict[str, Any] | None] = [edge] * (19 + measured) + [None] * (1 - measured)
    figures = judge(drawn, records)
    assert figures["trials"] == 20 and figures["agree"] == 19 + measured
    assert reliable(figures)
    figures = judge(drawn, [edge] * 18 + [None, None])
    assert not reliable(figures)
