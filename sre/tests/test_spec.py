"""Scenario files, spec validation and the agent's view (no live environment needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from itbench_sre import faults, topology
from itbench_sre.spec import SreSpec
from pydantic import ValidationError

from itbench.registry import Catalog


def test_catalog_is_complete(catalog: Catalog) -> None:
    assert not catalog.errors, [e.line() for e in catalog.errors]
    specs = list(catalog.scenarios.values())
    assert len(specs) >= 40
    smoke = [s for s in specs if "smoke" in s.tags]
    assert len(smoke) == 1
    used = {f.mechanism for s in specs for f in s.faults}  # type: ignore[attr-defined]
    assert used >= set(faults.MECHANISMS), set(faults.MECHANISMS) - used
    assert any(not s.faults for s in specs)  # type: ignore[attr-defined]
    assert any(s.noise for s in specs)  # type: ignore[attr-defined]


def test_fault_library_has_twenty_mechanisms() -> None:
    assert len(faults.MECHANISMS) >= 20
    for mech in faults.MECHANISMS.values():
        assert mech.fault_type in faults.FAULT_TYPES
        for target in mech.targets:
            assert mech.alerts(target)
            assert topology.canonical(mech.root(target)) == mech.root(target)


def _spec(**fields: object) -> SreSpec:
    base = {
        "id": "sre/x",
        "domain": "sre",
        "goal": "g",
        "task_types": ["detection"],
        "faults": [{"mechanism": "redis_down", "target": "redis"}],
    }
    base.update(fields)
    return SreSpec.model_validate(base)


def test_bad_specs_name_the_field_and_reason() -> None:
    with pytest.raises(ValidationError, match="unknown mechanism 'nope'"):
        _spec(faults=[{"mechanism": "nope", "target": "redis"}])
    with pytest.raises(ValidationError, match="target 'cart' is not valid for redis_down"):
        _spec(faults=[{"mechanism": "redis_down", "target": "cart"}])
    with pytest.raises(ValidationError, match="cannot be mitigated"):
        _spec(
            task_types=["mitigation"],
            faults=[{"mechanism": "edge_latency", "target": "frontend->cart"}],
        )
    with pytest.raises(ValidationError, match="unknown task type"):
        _spec(task_types=["fixing"])
    with pytest.raises(ValidationError, match="needs an instance name"):
        _spec(noise=[{"kind": "restart_replica", "target": "cart"}])


def test_ground_truth_is_derived_from_the_library() -> None:
    truth = _spec(
        faults=[
            {"mechanism": "hung_process", "target": "currency-0"},
            {"mechanism": "edge_latency", "target": "checkout->payment"},
        ]
    ).truth()
    assert truth.incident
    assert truth.root_causes == ["currency", "payment"]
    assert truth.fault_types == ["process_hang", "network_latency"]
    assert ("currency", "payment") in truth.propagation
    assert ("payment", "checkout") in truth.propagation
    assert "checkout->payment" in truth.aliases["payment"]


def test_nothing_the_agent_reads_names_the_mechanism(catalog: Catalog) -> None:
    """Goals (the only scenario text an agent gets) never name a mechanism or target."""
    names = set(faults.MECHANISMS) | {m.replace("_", " ") for m in faults.MECHANISMS}
    for spec in catalog.scenarios.values():
        text = spec.goal.lower()
        for name in names:
            assert name not in text, (spec.id, name)
        for f in spec.faults:  # type: ignore[attr-defined]
            assert f.target not in text, (spec.id, f.target)


def test_injector_code_stays_out_of_the_shop_tree() -> None:
    """The shop's processes run only the app package: no fault code or wording in it."""
    app = Path(faults.__file__).parent / "app"
    text = " ".join(p.read_text() for p in app.glob("*.py")).lower()
    for word in ("fault", "inject", "chaos", "mechanism"):
        assert not re.search(rf"\b{word}", text), word
    assert json.dumps(topology.entities())
