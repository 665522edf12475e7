"""Commands that print data: show, schema, list, and the JSON they print."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CliFn


def test_show_prints_public_fields_and_no_ground_truth(itbench: CliFn) -> None:
    res = itbench("show", "toy/registry-beta-2", "--json")
    assert res.returncode == 0
    data = res.json()
    assert data["id"] == "toy/registry-beta-2" and data["params"] == {"key": "beta", "expected": 2}  # type: ignore[index]
    assert "ground_truth" not in res.stdout
    text = itbench("show", "toy/registry-beta-2")
    assert "goal" in text.stdout and "ground_truth" not in text.stdout
    assert itbench("show", "toy/nope").returncode == 2


def test_schema_writes_json_schemas_of_the_models_and_domains(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench("schema", "--out", "s")
    assert res.returncode == 0
    names = {p.name for p in (tmp_path / "s").iterdir()}
    assert {
        "trial-result.schema.json",
        "run-manifest.schema.json",
        "task-view.schema.json",
    } <= names
    assert {"toy.scenario.schema.json", "toy.submission.schema.json"} <= names
    result = json.loads((tmp_path / "s" / "trial-result.schema.json").read_text())
    assert "schema_version" in result["properties"] and "status" in result["required"]
    assert (
        "ground_truth"
        in json.loads((tmp_path / "s" / "toy.scenario.schema.json").read_text())["properties"]
    )
    assert "trial-result" in itbench("schema", "--json").json()  # type: ignore[operator]


def test_list_filters_by_domain_tag_and_complexity(itbench: CliFn) -> None:
    ids = [s["id"] for s in itbench("list", "--domain", "toy", "--tag", "control", "--json").json()]  # type: ignore[union-attr]
    assert ids == ["toy/healthy"]
    assert itbench("list", "--domain", "toy", "--complexity", "high", "--json").json() == []


def test_validate_passes_toy_catalog_and_fails_when_noop_passes(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench("validate", "toy/[hr]*", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    report = res.json()
    assert report["invalid"] == 0 and len(report["scenarios"]) == 4  # type: ignore[index]
    # A scenario the oracle cannot solve (its "correct" value is itself invalid).
    cat = tmp_path / "cat" / "toy"
    cat.mkdir(parents=True)
    (cat / "unsolvable.yaml").write_text(
        "domain: toy\ngoal: g\ntask_types: [detection]\nvalues: {a: 1}\nground_truth: {key: a, expected: 5000}\n"
    )
    res = itbench("validate", "toy/unsolvable", "--scenario-path", str(tmp_path / "cat"), "--json")
    assert res.returncode == 1
    [row] = res.json()["scenarios"]  # type: ignore[index]
    assert (
        row["valid"] is False and row["oracle"] == "failed" and "oracle failed" in row["reasons"][0]
    )
