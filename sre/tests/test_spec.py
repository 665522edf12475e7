"""Scenario files, spec validation and the agent's view (no live environment needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

import pytest
from itbench_sre import agents, faults, topology
from itbench_sre.domain import SreDomain
from itbench_sre.embedded import HARNESS_RECORD, recorded_shared
from itbench_sre.pgtemplate import shared_root
from itbench_sre.scoring import judge_answer
from itbench_sre.spec import NOISE_KINDS, TASK_TYPES, NoiseKind, SreSpec
from pydantic import ValidationError

from itbench.catalog import Catalog


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
    with pytest.raises(ValidationError, match=r"needs a service instance, got 'cart' \(valid: "):
        _spec(noise=[{"kind": "restart_replica", "target": "cart"}])


def test_errors_list_the_valid_values() -> None:
    """A wrong mechanism, target, parameter or noise target names what would be valid."""
    with pytest.raises(ValidationError, match=r"unknown mechanism 'nope' \(known: bad_release, "):
        _spec(faults=[{"mechanism": "nope", "target": "redis"}])
    with pytest.raises(ValidationError, match="mechanisms for 'cart': crash_loop_config, "):
        _spec(faults=[{"mechanism": "redis_down", "target": "cart"}])
    edge = {"mechanism": "edge_latency", "target": "frontend->cart"}
    with pytest.raises(ValidationError, match=r"unknown parameter 'delay' .* \(valid: delay_ms\)"):
        _spec(faults=[{**edge, "params": {"delay": 5}}])
    with pytest.raises(ValidationError, match="'delay_ms' of edge_latency must be number, got"):
        _spec(faults=[{**edge, "params": {"delay_ms": "slow"}}])
    with pytest.raises(ValidationError, match="must be number, got True"):
        _spec(faults=[{**edge, "params": {"delay_ms": True}}])
    loss = {"mechanism": "edge_loss", "target": "frontend->cart", "params": {"loss": 2}}
    with pytest.raises(ValidationError, match="'loss' of edge_loss must be >= 0, <= 1, got 2"):
        _spec(faults=[loss])
    flag = {"mechanism": "feature_flag", "target": "checkout"}
    with pytest.raises(ValidationError, match="on checkout must be one of 'gift_wrap'.*default"):
        _spec(faults=[flag])
    assert _spec(faults=[{**flag, "params": {"flag": "gift_wrap"}}]).faults[0].merged_params()
    with pytest.raises(ValidationError, match=r"needs a service, got 'cart' \(valid: frontend, "):
        _spec(noise=[{"kind": "compatible_release", "target": "cart"}])


def test_noise_kinds_and_task_types_are_the_domains_vocabulary() -> None:
    assert set(NOISE_KINDS) == set(get_args(NoiseKind))
    assert SreDomain.task_types == TASK_TYPES
    for mech in faults.MECHANISMS.values():
        assert mech.summary
        assert any(not mech.param_problems(t, {}) for t in mech.targets), mech.name


def test_reference_lists_mechanisms_params_targets_noise_and_services(domain: SreDomain) -> None:
    text = domain.reference()
    for heading in ("Task types", "Fault mechanisms", "Noise", "Controls", "Double faults"):
        assert f"\n## {heading}\n" in text, heading
    for mech in faults.MECHANISMS.values():
        section = text.split(f"### `{mech.name}`\n", 1)[1].split("\n## ", 1)[0]
        section = section.split("\n### ", 1)[0]
        for param in mech.params:
            row = f"| `{param.name}` | {param.type_name} | `{json.dumps(param.default)}` |"
            assert row in section, (mech.name, param.name)
        for target in mech.targets:
            assert f"| `{target}` | `{mech.root(target)}` |" in section, (mech.name, target)
    noise = text.split("\n## Noise\n", 1)[1].split("\n## ", 1)[0]
    for kind, definition in NOISE_KINDS.items():
        row = next(line for line in noise.splitlines() if line.startswith(f"| `{kind}` |"))
        assert all(f"`{t}`" in row for t in definition.targets), kind
    for service in topology.SERVICES:
        assert f"| `{service.name}` | {service.replicas} ({service.max_replicas}) |" in text


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


def _public_view(spec: SreSpec) -> tuple[object, ...]:
    """What an agent learns about a scenario before looking at the shop."""
    return (
        spec.goal,
        tuple(spec.task_types),
        spec.time_limit,
        spec.traces,
        spec.workload_rate,
        spec.slo.model_dump_json(),
    )


def test_public_facts_never_determine_the_answer(catalog: Catalog) -> None:
    """Scenarios that look alike to the agent before it observes anything have different answers.

    Goal, task types, time limit and whether traces are on are all an agent knows up front;
    every group of scenarios sharing them holds at least two different correct answers.
    """
    groups: dict[tuple[object, ...], set[tuple[object, ...]]] = {}
    for spec in catalog.scenarios.values():
        assert isinstance(spec, SreSpec)
        truth = spec.truth()
        answer = (truth.incident, tuple(truth.root_causes), tuple(truth.fault_types))
        groups.setdefault(_public_view(spec), set()).add(answer)
    assert len(groups) >= 4
    for view, answers in groups.items():
        assert len(answers) >= 2, (view, answers)


def test_probe_answers_fail_every_scenario_without_mitigation(catalog: Catalog) -> None:
    """The probes' fixed answer fails detection, localization or diagnosis everywhere.

    So ``probe/constant`` and ``probe/thrash`` (which acts on everything and then gives the same
    answer) fail every scenario whatever their actions mitigate, controls included.
    """
    constant = agents.probe_constant()
    assert constant.incident and constant.root_causes == ["frontend"] and not constant.propagation
    for spec in catalog.scenarios.values():
        assert isinstance(spec, SreSpec)
        passes, _ = judge_answer(spec.truth(), constant)
        asked = [t for t in spec.task_types if t != "mitigation"]
        assert not all(passes[t] for t in asked), spec.id
        if "control" in spec.tags:
            assert not passes["detection"], spec.id


def test_recovery_accepts_only_a_shared_directory_of_deploys_shape(tmp_path: Path) -> None:
    """Recover reads the shared directory from the trial's record, never an arbitrary path."""
    record = tmp_path / HARNESS_RECORD
    for bad in ("/etc", str(tmp_path), str(shared_root() / "env-../../etc"), "relative"):
        record.write_text(json.dumps({"shared": bad}))
        assert recorded_shared(tmp_path) is None, bad
    good = shared_root() / "env-0123456789ab"
    record.write_text(json.dumps({"shared": str(good)}))
    assert recorded_shared(tmp_path) == good
    record.write_text("not json")
    assert recorded_shared(tmp_path) is None
