"""Scenario files: matrices, validation errors that name file, field and reason, selection."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import CliFn

from itbench.catalog import ScenarioLoader, expand_matrix

GOOD = """\
domain: toy
goal: fix it
task_types: [mitigation]
values: {a: 1}
ground_truth: {key: a, expected: 1}
"""


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def loader(toy_bench):  # type: ignore[no-untyped-def]
    return ScenarioLoader(toy_bench.domains)


def test_matrix_mapping_is_a_cartesian_product_with_typed_placeholders() -> None:
    doc = {
        "id": "toy/x",
        "n": "${n}",
        "t": "key ${k} n=${n}",
        "matrix": {"k": ["a", "b"], "n": [1, 2]},
    }
    variants = expand_matrix(doc)
    assert [suffix for _, _, suffix in variants] == ["a-1", "a-2", "b-1", "b-2"]
    first = variants[0][0]
    assert first["n"] == 1 and first["t"] == "key a n=1" and first["params"] == {"k": "a", "n": 1}


def test_matrix_file_expands_to_several_validated_scenarios(loader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _write(
        tmp_path,
        "toy/m.yaml",
        GOOD.replace(
            "ground_truth: {key: a, expected: 1}", "ground_truth: {key: a, expected: '${e}'}"
        )
        + "matrix:\n  e: [1, 7]\n",
    )
    catalog = loader.load([tmp_path])
    assert not catalog.errors
    assert sorted(catalog.scenarios) == ["toy/m-1", "toy/m-7"]
    assert catalog.scenarios["toy/m-7"].ground_truth.expected == 7  # type: ignore[attr-defined]
    assert catalog.scenarios["toy/m-7"].params == {"e": 7}


def test_directory_scenario_uses_its_directory_name_and_keeps_its_source(
    loader, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, "toy/deep/case/scenario.yaml", GOOD)
    _write(tmp_path, "toy/deep/case/data.yaml", "not: a scenario\n")
    catalog = loader.load([tmp_path])
    assert list(catalog.scenarios) == ["toy/case"] and not catalog.errors
    assert catalog.scenarios["toy/case"].source_dir == path.parent


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ("domain: toy\ngoal: [unclosed\n", None, "invalid YAML at line"),
        ("- a\n- b\n", None, "must be a YAML mapping"),
        ("goal: x\ntask_types: [a]\n", "domain", "missing"),
        (GOOD.replace("domain: toy", "domain: nosuch"), "domain", "unknown domain 'nosuch'"),
        (GOOD.replace("goal: fix it\n", ""), "goal", "Field required"),
        (GOOD.replace("values: {a: 1}", "values: {a: many}"), "values.a", "valid integer"),
        (GOOD + "time_limit: soon\n", "time_limit", "valid number"),
        (GOOD + "colour: red\n", "colour", "Extra inputs are not permitted"),
        (GOOD + "matrix: [1, 2]\n", "matrix", "list of mappings"),
        (GOOD.replace("domain: toy", "domain: toy\nid: other/x"), "id", "must start with 'toy/'"),
    ],
)
def test_malformed_files_name_file_field_and_reason(
    loader, tmp_path: Path, text: str, field: str | None, reason: str
) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, "toy/bad.yaml", text)
    catalog = loader.load([tmp_path])
    assert not catalog.scenarios
    [error] = catalog.errors
    assert error.path == path.resolve()
    assert error.field == field
    assert reason in error.reason
    assert str(path.name) in error.line() and reason in error.line()


def test_an_id_defined_twice_is_rejected_in_both_files(loader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = _write(tmp_path, "toy/a.yaml", GOOD.replace("domain: toy", "domain: toy\nid: toy/same"))
    second = _write(
        tmp_path, "toy/b.yaml", GOOD.replace("domain: toy", "domain: toy\nid: toy/same")
    )
    third = _write(tmp_path, "toy/c.yaml", GOOD.replace("domain: toy", "domain: toy\nid: toy/same"))
    catalog = loader.load([tmp_path])
    # Neither copy runs: a later package must not replace a scenario, nor be replaced.
    assert "toy/same" not in catalog.scenarios
    assert {e.path for e in catalog.errors} == {first.resolve(), second.resolve(), third.resolve()}
    assert all(e.field == "id" and "neither runs" in e.reason for e in catalog.errors)


def test_a_malformed_id_is_rejected_with_the_form_it_must_take(loader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for bad in ("toy/a/b", "toy/a b", "toy/${k", "toy/{ k }", "toy/.."):
        _write(tmp_path, "toy/bad.yaml", GOOD.replace("domain: toy", f'domain: toy\nid: "{bad}"'))
        [error] = loader.load([tmp_path]).errors
        assert error.field == "id" and "is not `domain/name`" in error.reason, (bad, error)


def test_selection_by_glob_prefix_tag_domain_and_complexity(toy_bench) -> None:  # type: ignore[no-untyped-def]
    catalog = toy_bench.catalog
    assert [s.id for s in catalog.select(["toy/registry"])] == [
        "toy/registry-alpha-1",
        "toy/registry-beta-2",
        "toy/registry-gamma-3",
    ]
    assert [s.id for s in catalog.select(["toy/*"], tags=["control"])] == ["toy/healthy"]
    assert catalog.select(["*"], domains=["sre-nope"]) == []
    assert len(catalog.select(["toy/*a*"], complexity=["low"])) == 4
    assert catalog.select(["toy/*"], complexity=["high"]) == []


def test_list_shows_valid_scenarios_and_counts_rejected_ones(
    itbench: CliFn, tmp_path: Path
) -> None:
    cat = tmp_path / "cat"
    _write(cat, "toy/ok.yaml", GOOD)
    _write(cat, "toy/bad1.yaml", GOOD.replace("values: {a: 1}", "values: 3"))
    _write(cat, "toy/bad2.yaml", "domain: toy\n  : :\n")
    res = itbench("list", "--scenario-path", str(cat), "--json")
    assert res.returncode == 0
    ids = [s["id"] for s in res.json()]  # type: ignore[union-attr]
    assert "toy/ok" in ids and "toy/registry-alpha-1" in ids
    for s in res.json():  # type: ignore[union-attr]
        assert {"id", "domain", "tags", "complexity", "task_types"} <= set(s)
    base = itbench("list", "--json").stderr.count("rejected scenario:")
    assert f"{base + 2} scenario file(s) rejected" in res.stderr
    assert "bad1.yaml" in res.stderr and "field 'values'" in res.stderr
    assert "bad2.yaml" in res.stderr and "invalid YAML" in res.stderr
    assert "Traceback" not in res.stderr
    table = itbench("list", "--scenario-path", str(cat))
    assert "rejected" in table.stdout and "toy/ok" in table.stdout


def _matrix_doc(id_line: str, matrix: str) -> str:
    return GOOD.replace("domain: toy", f"domain: toy\n{id_line}") + matrix


@pytest.mark.parametrize("template", ["toy/reg-{k}-n{n}", "toy/reg-${k}-n${n}"])
def test_an_id_template_gives_exactly_its_id_to_each_variant(
    loader, tmp_path: Path, template: str
) -> None:  # type: ignore[no-untyped-def]
    _write(
        tmp_path,
        "toy/t.yaml",
        _matrix_doc(f'id: "{template}"', "matrix:\n  k: [Alpha, b]\n  n: [1, 2]\n"),
    )
    catalog = loader.load([tmp_path])
    assert not catalog.errors, [e.line() for e in catalog.errors]
    assert sorted(catalog.scenarios) == [
        "toy/reg-alpha-n1",
        "toy/reg-alpha-n2",
        "toy/reg-b-n1",
        "toy/reg-b-n2",
    ]
    assert catalog.scenarios["toy/reg-b-n2"].params == {"k": "b", "n": 2}


def test_a_template_that_leaves_out_a_varying_parameter_is_rejected(loader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _write(
        tmp_path, "toy/t.yaml", _matrix_doc('id: "toy/reg-{k}"', "matrix:\n  k: [a]\n  n: [1, 2]\n")
    )
    catalog = loader.load([tmp_path])
    assert list(catalog.scenarios) == []  # no variant of a shared id runs, not even the first
    assert len(catalog.errors) == 2
    for error in catalog.errors:
        assert error.path == path.resolve() and error.field == "id"
        assert error.scenario_id == "toy/reg-a"
        assert "several variants" in error.reason and "unused: n" in error.reason


def test_a_template_naming_an_unknown_parameter_lists_the_matrix_parameters(
    loader, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _write(
        tmp_path, "toy/t.yaml", _matrix_doc('id: "toy/reg-{kind}"', "matrix:\n  k: [a]\n  n: [1]\n")
    )
    _write(tmp_path, "toy/u.yaml", _matrix_doc('id: "toy/plain-{k}"', ""))
    catalog = loader.load([tmp_path])
    assert not catalog.scenarios
    reasons = {e.path.name: (e.field, e.reason) for e in catalog.errors}
    assert reasons["t.yaml"][0] == "id" and "unknown parameter 'kind'" in reasons["t.yaml"][1]
    assert "matrix parameters: k, n" in reasons["t.yaml"][1]
    assert reasons["u.yaml"][0] == "id" and "no matrix" in reasons["u.yaml"][1]


def test_ids_from_templates_stay_unique_across_files_naming_both(loader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = _write(tmp_path, "toy/a.yaml", _matrix_doc('id: "toy/x-{k}"', "matrix:\n  k: [a, b]\n"))
    second = _write(tmp_path, "toy/b.yaml", _matrix_doc("id: toy/x", "matrix:\n  k: [b, c]\n"))
    catalog = loader.load([tmp_path])
    assert sorted(catalog.scenarios) == ["toy/x-a", "toy/x-c"]
    errors = catalog.errors
    assert {e.scenario_id for e in errors} == {"toy/x-b"} and {e.field for e in errors} == {"id"}
    assert {e.path for e in errors} == {first.resolve(), second.resolve()}
    assert all(
        str(first.resolve()) in e.line() or str(second.resolve()) in e.line() for e in errors
    )


def test_an_unknown_domain_lists_the_registered_ones(loader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _write(tmp_path, "toy/d.yaml", GOOD.replace("domain: toy", "domain: tyo"))
    [error] = loader.load([tmp_path]).errors
    assert error.field == "domain"
    assert "registered domains: toy" in error.reason and "did you mean 'toy'" in error.reason
    [error] = ScenarioLoader({}).load([tmp_path]).errors
    assert "no domain is registered" in error.reason


def test_a_task_type_outside_the_domain_vocabulary_is_rejected_listing_the_valid_ones(
    toy_bench, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    toy = type(toy_bench.domains["toy"])
    strict = type("StrictToy", (toy,), {"task_types": ("detection", "mitigation")})
    loader = ScenarioLoader({"toy": strict()})
    path = _write(tmp_path, "toy/a.yaml", GOOD.replace("[mitigation]", "[mitigation, remediation]"))
    _write(tmp_path, "toy/ok.yaml", GOOD)
    catalog = loader.load([tmp_path])
    assert list(catalog.scenarios) == ["toy/ok"]
    [error] = catalog.errors
    assert error.path == path.resolve() and error.field == "task_types"
    assert "'remediation'" in error.reason and "valid: detection, mitigation" in error.reason
    # The toy domain itself has no vocabulary, so it takes any task type.
    assert not ScenarioLoader(toy_bench.domains).load([tmp_path]).errors


def test_rejections_are_found_by_the_id_or_name_the_file_meant(loader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _write(tmp_path, "toy/broken.yaml", "id: toy/broken-one\ndomain: toy\ngoal: [unclosed\n")
    _write(tmp_path, "toy/nameless.yaml", GOOD.replace("goal: fix it\n", ""))
    _write(
        tmp_path,
        "toy/tmpl.yaml",
        _matrix_doc('id: "toy/t-{k}"', "matrix:\n  k: [a]\n  n: [1, 2]\n"),
    )
    catalog = loader.load([tmp_path])
    assert [e.path.name for e in catalog.rejected(["toy/broken-one"])] == ["broken.yaml"]
    assert [e.path.name for e in catalog.rejected(["toy/nameless"])] == ["nameless.yaml"]
    assert {e.path.name for e in catalog.rejected(["toy/t-a"])} == {"tmpl.yaml"}
    assert {e.path.name for e in catalog.rejected(["toy/*"])} == {
        "broken.yaml",
        "nameless.yaml",
        "tmpl.yaml",
    }
    assert catalog.rejected(["toy/other"]) == []
    assert len({e.path for e in catalog.rejected()}) == 3
    assert [e.field for e in catalog.rejections_of("toy/nameless")] == ["goal"]
    assert catalog.rejections_of("toy/t-b") and not catalog.rejections_of("toy/nameles")
