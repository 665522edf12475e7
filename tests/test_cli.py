"""Commands that print data: show, schema, list, and the JSON they print."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ITBENCH, CliFn, _env


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


BROKEN = "id: toy/broken-one\ndomain: toy\ngoal: [unclosed\n"
NO_GOAL = (
    "domain: toy\ntask_types: [detection]\nvalues: {a: 1}\nground_truth: {key: a, expected: 1}\n"
)


def _catalog_with_rejections(tmp_path: Path) -> Path:
    cat = tmp_path / "cat" / "toy"
    cat.mkdir(parents=True)
    (cat / "broken.yaml").write_text(BROKEN)
    (cat / "nogoal.yaml").write_text(NO_GOAL)
    return tmp_path / "cat"


def test_show_of_a_rejected_file_says_why(itbench: CliFn, tmp_path: Path) -> None:
    cat = str(_catalog_with_rejections(tmp_path))
    res = itbench("show", "toy/nogoal", "--scenario-path", cat)
    assert res.returncode == 1 and "unknown scenario" not in res.stderr
    [line] = [line for line in res.stderr.splitlines() if "was rejected" in line]
    assert "nogoal.yaml" in line and "field 'goal'" in line and "Field required" in line
    data = itbench("show", "toy/broken-one", "--scenario-path", cat, "--json").json()
    [rejection] = data["rejected"]  # type: ignore[index]
    assert rejection["file"].endswith("broken.yaml") and "invalid YAML" in rejection["reason"]
    res = itbench("show", "toy/helthy")
    assert res.returncode == 2 and "did you mean toy/healthy" in res.stderr


def test_validate_strict_fails_on_rejected_files_its_patterns_name(
    itbench: CliFn, tmp_path: Path
) -> None:
    cat = str(_catalog_with_rejections(tmp_path))
    res = itbench("validate", "--strict", "toy/broken-one", "toy/nogoal", "--scenario-path", cat)
    assert res.returncode == 1
    failing = [line for line in res.stderr.splitlines() if "fails validate" in line]
    assert len(failing) == 2
    assert any("broken.yaml" in line and "invalid YAML" in line for line in failing)
    assert any("nogoal.yaml" in line and "field 'goal'" in line for line in failing)
    # Without --strict a pattern that names only rejected files selects nothing.
    assert itbench("validate", "toy/nogoal", "--scenario-path", cat).returncode == 2
    # Rejected files no pattern names do not fail a strict validation.
    res = itbench(
        "validate", "--strict", "--no-probes", "toy/healthy", "--scenario-path", cat, "--json"
    )
    assert res.returncode == 0, res.stderr
    assert res.json()["failing_rejections"] == [] and res.json()["rejected_files"] >= 2  # type: ignore[index,operator]


def test_plugins_exits_1_when_a_plugin_has_problems(itbench: CliFn) -> None:
    res = itbench("plugins")
    assert res.returncode == 1
    assert "broken-import" in res.stderr and "toy" in res.stdout
    clean = itbench("plugins", env={"ITBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert clean.returncode == 0, clean.stderr


def test_evaluate_prints_a_lazily_raised_agent_problem_once_after_the_results(
    plugin_site: Path, tmp_path: Path
) -> None:
    # stderr merged into stdout, to see the order of the two.
    proc = subprocess.run(
        [*ITBENCH, "evaluate", "--agent", "toy/solver", "-s", "toy/healthy", "--out", "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(plugin_site, None),
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.splitlines()
    agents = [i for i, line in enumerate(lines) if "agent table is corrupt" in line]
    results = [i for i, line in enumerate(lines) if line.startswith("results:")]
    assert len(agents) == 1 and results and agents[0] > results[0], proc.stdout
    assert "'broken-hook'" in lines[agents[0]]
    recorded = json.loads((tmp_path / "run" / "plugin-problems.json").read_text())
    assert any("agent table is corrupt" in p["reason"] for p in recorded)


def test_report_says_where_it_wrote(itbench: CliFn, tmp_path: Path) -> None:
    run = itbench("evaluate", "--agent", "toy/solver", "-s", "toy/healthy", "--out", "run")
    assert run.returncode == 0, run.stderr
    res = itbench("report", "run", "--out", "rep")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "rep"
    assert f"to {out.name}:" in res.stdout or f"to {out}:" in res.stdout
    written = sorted(p.name for p in out.iterdir())
    assert written and all(name in res.stdout for name in written)
    data = itbench("report", "run", "--out", "rep", "--json").json()
    assert data["out_dir"] == "rep" and len(data["files"]) == len(written)  # type: ignore[index,arg-type]


def test_docs_writes_one_reference_per_domain_and_checks_them(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench("docs", "--out", "d")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "d"
    toy = (out / "toy.md").read_text()
    assert toy.startswith("# Scenario reference: `toy`") and "ground_truth" in toy
    assert "[toy.md](toy.md)" in (out / "README.md").read_text()
    assert itbench("docs", "--out", "d", "--check").returncode == 0
    (out / "toy.md").write_text(toy + "edited\n")
    (out / "gone.md").write_text("# Scenario reference: `gone`\n")
    (out / "notes.md").write_text("# Hand-written notes\n")
    res = itbench("docs", "--out", "d", "--check")
    assert res.returncode == 1
    assert "toy.md: out of date" in res.stderr and "gone.md: no longer generated" in res.stderr
    assert "notes.md" not in res.stderr and (out / "toy.md").read_text().endswith("edited\n")
    res = itbench("docs", "--out", "d")
    assert res.returncode == 0 and (out / "toy.md").read_text() == toy
    assert not (out / "gone.md").exists() and (out / "notes.md").exists()
    assert "removed" in res.stdout and "1 written" in res.stdout


def test_docs_outside_a_checkout_requires_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from itbench.cli import cli, outputs

    monkeypatch.setattr(outputs, "REPO_CATALOG", tmp_path / "no-checkout" / "scenarios")
    monkeypatch.setenv("ITBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")
    res = CliRunner().invoke(cli, ["docs"])
    assert res.exit_code == 2 and "--out" in res.output


def test_new_creates_a_distribution_and_prints_the_next_steps(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench("new", "domain", "kv-sample", "--dir", "work")
    assert res.returncode == 2 and "no directory" in res.stderr
    (tmp_path / "work").mkdir()
    res = itbench("new", "domain", "kv-sample", "--dir", "work")
    assert res.returncode == 0, res.stderr
    created = tmp_path / "work" / "kv-sample"
    assert (created / "pyproject.toml").is_file()
    assert f"in {created}\n" in res.stdout
    assert f"pip install -e {created}\n" in res.stdout
    assert "itbench validate --strict 'kv-sample/*'" in res.stdout
    again = itbench("new", "domain", "kv-sample", "--dir", "work")
    assert again.returncode == 2 and "already exists" in again.stderr
