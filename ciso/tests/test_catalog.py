"""The catalog is checks, not copies: distinct requirements, hidden variants the visible
example does not show, and a policy fitted to that example fails every check."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from itbench_ciso.checks import cloud, k8s, linux
from itbench_ciso.checks.base import Variant
from itbench_ciso.checks.linux_host import DPKG_STATUS
from itbench_ciso.engine import WorkerEngine
from itbench_ciso.families.kubernetes import flagged_ids
from itbench_ciso.spec import CisoSpec

from itbench.catalog import Catalog


def _specs(catalog: Catalog) -> list[CisoSpec]:
    return [s for s in catalog.scenarios.values() if isinstance(s, CisoSpec)]


def _library(spec: CisoSpec) -> Any:
    family = {"kubernetes": k8s, "policy-update": k8s, "linux": linux, "cloud": cloud}
    return family[spec.family].by_id(spec.check)


def _variants(spec: CisoSpec, seed: int) -> tuple[list[Variant], list[Variant]]:
    plan = spec.variants
    if spec.family in ("kubernetes", "policy-update"):
        visible, hidden = k8s.variants(
            spec.check, seed, plan.compliant, plan.non_compliant, also=spec.policy_set or None
        )
        return [visible], hidden
    module = linux if spec.family == "linux" else cloud
    shown, hidden = module.variants(spec.check, seed, plan.compliant, plan.non_compliant)
    return (shown if isinstance(shown, list) else [shown]), hidden


def test_at_least_forty_distinct_requirements(catalog: Catalog) -> None:
    specs = _specs(catalog)
    standalone = {s.check for s in specs if s.family != "policy-update"}
    updates = {(s.changed, s.check) for s in specs if s.family == "policy-update"}
    assert len(standalone) + len(updates) == len(specs) >= 40
    assert {s.facets()["family"] for s in specs} == {
        "kubernetes",
        "linux",
        "cloud",
        "policy-update",
    }
    kinds = {k8s.by_id(s.check).id for s in specs if s.family == "kubernetes"}
    # Checks on objects other than pods, and Linux checks on state commands read.
    assert {"k8s-rbac-secrets", "k8s-network-policies", "k8s-configmap-secrets"} <= kinds
    assert {"k8s-service-external-ips", "k8s-rbac-cluster-admin"} <= kinds
    commands = {c.id for c in linux.CHECKS if c.commands}
    assert {"linux-packages", "linux-services"} <= commands


#: How the catalog's first requirement texts spelled out the cases their hidden variants test.
EDGE_CASE_WORDING = (
    "is fine",
    "are fine",
    "not enough",
    "does not count",
    "do not count",
    "violates",
    "is ignored",
    "means `latest`",
    "overrides the pod",
    "the last occurrence",
    "first value given wins",
)


def test_requirements_state_the_rule_not_its_edge_cases(catalog: Catalog) -> None:
    for spec in _specs(catalog):
        text = spec.requirement.lower()
        for phrase in EDGE_CASE_WORDING:
            assert phrase not in text, (spec.id, phrase)


@pytest.mark.parametrize("seed", [1, 2])
def test_hidden_variants_never_show_the_visible_mutations(catalog: Catalog, seed: int) -> None:
    """Every judged check has at least three violating mutations and three near misses beyond
    the visible ones, and no hidden system carries the visible violation or near miss."""
    for spec in _specs(catalog):
        check = _library(spec)
        assert len(check.bad) >= 4 and len(check.near) >= 4, spec.id
        shown_bad, shown_near = next(iter(check.bad)), next(iter(check.near))
        visible, hidden = _variants(spec, seed)
        assert any(shown_bad in v.notes for v in visible), spec.id
        for v in hidden:
            assert shown_bad not in v.notes and shown_near not in v.notes, (spec.id, v.notes)
        assert {v.compliant for v in hidden} == {True, False}, spec.id


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    if isinstance(value, dict):
        out: dict[tuple[Any, ...], Any] = {}
        for k, v in value.items():
            if path or k not in ("metadata", "status"):
                out.update(_leaves(v, (*path, k)))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_leaves(v, (*path, i)))
        return out
    return {path: value}


def _fitted_kubernetes_policy(visible: Variant) -> str:
    """A policy fitted to the visible snapshot: it flags an object of a violating object's kind
    that has every leaf value the violating object has and no compliant object of that kind
    has, and lacks every leaf all those compliant objects have and it lacks."""
    items = visible.data["items"]
    rules = []
    for o in items:
        if k8s.ident(o) not in visible.violating:
            continue
        good = [
            _leaves(g)
            for g in items
            if g["kind"] == o["kind"] and k8s.ident(g) not in visible.violating
        ]
        mine = _leaves(o)
        present = [
            (p, v) for p, v in mine.items() if not any(g.get(p, object()) == v for g in good)
        ]
        common = set.intersection(*(set(g) for g in good)) if good else set()
        absent = [p for p in common if p not in mine]
        conds = [f'o.kind == "{o["kind"]}"']
        conds += [f"[{json.dumps(list(p))}, {json.dumps(v)}] in leaves(o)" for p, v in present]
        conds += [f"not {json.dumps(list(p))} in paths(o)" for p in absent]
        rules.append(
            "violations contains ident(o) if {\n\tsome o in input.items\n\t"
            + "\n\t".join(conds)
            + "\n}"
        )
    helpers = (
        "leaves(o) := {[p, v] | walk(o, [p, v]); not is_object(v); not is_array(v)}\n\n"
        "paths(o) := {p | some [p, _] in leaves(o)}\n"
    )
    body = "\n\n".join(rules)
    return f"package compliance\n\nimport rego.v1\n\n{k8s.HELPERS.strip()}\n\n{helpers}\n{body}\n"


def test_a_policy_fitted_to_the_visible_example_fails_every_kubernetes_check(
    catalog: Catalog,
) -> None:
    engine = WorkerEngine()
    try:
        for spec in _specs(catalog):
            if spec.family != "kubernetes":
                continue
            [visible], hidden = _variants(spec, 3)
            policy = _fitted_kubernetes_policy(visible)
            modules = {"policy.rego": policy}
            assert engine.compile(modules) is None, (spec.id, policy)
            [on_visible] = engine.evaluate(modules, "data.compliance.violations", [visible.data])
            assert flagged_ids(on_visible.value) >= visible.violating, spec.id
            verdicts = engine.evaluate(
                modules, "data.compliance.violations", [v.data for v in hidden]
            )
            right = [
                flagged_ids(r.value) == v.violating for r, v in zip(verdicts, hidden, strict=True)
            ]
            assert not all(right), spec.id
    finally:
        engine.close()


def test_a_verdict_fitted_to_the_visible_hosts_and_accounts_fails_every_check(
    catalog: Catalog,
) -> None:
    """Judging a system non-compliant exactly when it carries what the visible violating one
    showed (its violation) misses the hidden violations, which are all different."""
    for spec in _specs(catalog):
        if spec.family not in ("linux", "cloud"):
            continue
        check = _library(spec)
        shown = next(iter(check.bad))
        _, hidden = _variants(spec, 4)
        fitted = [shown in v.notes for v in hidden]
        assert fitted != [not v.compliant for v in hidden], spec.id


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="no dpkg-query on this machine")
@pytest.mark.parametrize("seed", range(12))
def test_the_package_model_reads_the_database_as_dpkg_does(
    catalog: Catalog, seed: int, tmp_path: Path
) -> None:
    """Every hidden host of linux-packages: the ground truth's installed set is dpkg's own.

    A bad and a near-miss mutation of one package on one host (installed, then purged) once
    labelled a host non-compliant that dpkg (the last stanza wins) reads as clean.
    """
    spec = catalog.scenarios["ciso/linux-packages"]
    assert isinstance(spec, CisoSpec)
    shown, hidden = _variants(spec, seed)
    for variant in [*shown, *hidden]:
        admin = tmp_path / variant.name
        (admin / "info").mkdir(parents=True)
        (admin / "updates").mkdir()
        (admin / "status").write_text(variant.data[DPKG_STATUS].content, encoding="utf-8")
        out = subprocess.run(
            ["dpkg-query", f"--admindir={admin}", "-W", "-f=${Package} ${Status}\\n"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        real = {
            line.split()[0]
            for line in out.splitlines()
            if len(line.split()) == 4 and line.split()[3] not in ("not-installed", "config-files")
        }
        assert linux.installed_packages(variant.data) == real, (variant.name, variant.notes)
