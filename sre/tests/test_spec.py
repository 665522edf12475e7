"""Scenario files, spec validation and the agent's view (no live environment needed)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import get_args

import pytest
from itbench_sre import agents, faults, topology
from itbench_sre.domain import SreDomain
from itbench_sre.embedded import HARNESS_RECORD, recorded_groups, recorded_shared
from itbench_sre.pgtemplate import shared_root
from itbench_sre.rules import RULES
from itbench_sre.scoring import judge_answer
from itbench_sre.spec import (
    NOISE_KINDS,
    RESOLVED,
    ROTATED,
    STRAY_OFFSETS,
    TASK_TYPES,
    DecoySpec,
    FaultSpec,
    NoiseKind,
    SreSpec,
    SreSubmission,
)
from pydantic import ValidationError

from itbench.builtin.agents import answer_spread
from itbench.catalog import Catalog


def _draws(spec: SreSpec, n: int = 12) -> list[SreSpec]:
    """``n`` concrete draws of a scenario, as trials get them."""
    return [spec.concrete(random.Random(seed)) for seed in range(n)]


def test_catalog_is_complete(catalog: Catalog) -> None:
    """At least 60 problems, 10 multi-fault, noisy or metastable, 6 controls, every mechanism."""
    assert not catalog.errors, [e.line() for e in catalog.errors]
    specs = [s for s in catalog.scenarios.values() if isinstance(s, SreSpec)]
    assert len(specs) >= 60
    assert len([s for s in specs if "smoke" in s.tags]) == 1
    used = {m for s in specs for m in s.mechanisms()}
    assert used >= set(faults.MECHANISMS), set(faults.MECHANISMS) - used
    hard = [
        s for s in specs if len(s.faults) > 1 or (s.faults and s.noise) or "metastable" in s.tags
    ]
    assert len(hard) >= 10
    controls = [s for s in specs if not s.faults]
    assert len(controls) >= 6 and all("control" in s.tags for s in controls)
    assert any(s.noise and not s.decoys for s in controls)  # noise and nothing else
    assert any(any(n.kind == "alert_blip" for n in s.noise) for s in controls)
    # Problems, not variants: no two files share their faults, noise, history and tasks.
    shapes = [
        (
            tuple((f.mechanism, tuple(f.declared)) for f in s.faults),
            tuple(n.kind for n in s.noise),
            s.decoys,
            tuple(s.task_types),
        )
        for s in specs
    ]
    assert len(set(shapes)) == len(shapes)


def test_draws_explore_the_declared_sets(catalog: Catalog) -> None:
    """Targets, parameters, noise and decoys are drawn per trial, within the declared sets."""
    spec = catalog.scenarios["sre/wrong-upstream"]
    assert isinstance(spec, SreSpec)
    draws = _draws(spec, 40)
    targets = {d.faults[0].chosen for d in draws}
    assert targets == set(spec.faults[0].declared)
    for d in draws:
        fault = d.faults[0]
        assert fault.params["upstream"] in topology.BY_NAME[fault.chosen].upstreams
        routine = [x for x in d.decoy_changes if x.kind not in ("follow_up", "registry")]
        assert d.drawn and len({x.target for x in routine}) == spec.decoys
        assert fault.chosen not in {x.target for x in routine}
        # The first decoy is a change: the fault's is never the only one.
        assert any(x.kind in ("patch_release", "tuning") for x in routine)
        # A follow-up change, if any, lands on the faulted service itself, after the fault.
        assert {x.target for x in d.decoy_changes if x.kind == "follow_up"} <= {fault.chosen}
        assert all(x.after for x in d.decoy_changes if x.kind == "follow_up")
        # One decoy service gets a second change, after the faults.
        changes = [x.target for x in routine if x.kind != "stray_client"]
        twice = {t for t in changes if changes.count(t) == 2}
        assert len(twice) == 1 and len(changes) == len(set(changes)) + 1
        assert [x.after for x in routine if x.target in twice][-1]
        record = d.drawn_record()
        assert record["faults"][0]["target"] == fault.chosen
    # The faults take every place among the first changes of the decoy services: how many of
    # those come after them (the second change aside) is 0, 1 or 2.
    firsts = [
        sum(x.after for x in d.decoy_changes if x.kind in ("patch_release", "tuning")) - 1
        for d in _draws(spec, 60)
    ]
    assert set(firsts) == {0, 1, 2}
    # About half the trials of a fault a rollback mends get a follow-up change after it.
    followed = sum(any(x.kind == "follow_up" for x in d.decoy_changes) for d in _draws(spec, 60))
    assert 15 < followed < 45
    for name in ("sre/smoke-cart-bad-release", "sre/deadlock", "sre/redis-down"):
        other = catalog.scenarios[name]
        assert isinstance(other, SreSpec)
        assert not any(x.kind == "follow_up" for d in _draws(other, 30) for x in d.decoy_changes)
    # A follow-up never overwrites the key a crash loop's bad value sits in.
    crash = catalog.scenarios["sre/crash-loop"]
    assert isinstance(crash, SreSpec)
    for key in ("memory_limit_mb", "max_open_files"):
        pinned = crash.model_copy(
            update={
                "faults": [
                    FaultSpec(
                        mechanism="crash_loop_config",
                        target="catalog",
                        params={"key": key, "value": "lots"},
                    )
                ]
            }
        )
        for d in _draws(pinned, 30):
            assert all(x.key != key for x in d.decoy_changes if x.kind == "follow_up")
    # Decoys are routine changes, stray clients or follow-ups, each drawn often.
    kinds = [x.kind for d in _draws(spec, 60) for x in d.decoy_changes]
    assert {k: kinds.count(k) > 10 for k in set(kinds)} == dict.fromkeys(
        ("patch_release", "tuning", "stray_client", "follow_up", "registry"), True
    )
    assert all(
        x.value in STRAY_OFFSETS and abs(x.value) > 30
        for d in draws
        for x in d.decoy_changes
        if x.kind == "stray_client"
    )
    # A routine change may switch off a routine flag, never a flag with a fault behind it.
    keys = [x.key for d in _draws(spec, 60) for x in d.decoy_changes]
    assert any(k.startswith("flags.") for k in keys)
    with pytest.raises(ValueError, match="tuning key/value of cart"):
        DecoySpec(kind="tuning", target="cart", key="flags.session_cache", value=False)
    DecoySpec(kind="tuning", target="cart", key="flags.saved_for_later", value=False)
    with pytest.raises(ValueError, match="registry key/value"):
        DecoySpec(kind="registry", target="dns", key="records.payment.svc", value="127.0.0.2")
    with pytest.raises(ValueError, match="a registry change targets"):
        DecoySpec(kind="registry", target="cart", key="ttl_s", value=2)
    with pytest.raises(ValueError, match="clock offset"):
        DecoySpec(kind="stray_client", target="shipping", value=10)
    # Two faults of a problem get different targets where the sets allow it.
    double = catalog.scenarios["sre/deadlock-and-rollout"]
    assert isinstance(double, SreSpec)
    for d in _draws(double):
        assert d.faults[0].chosen != d.faults[1].chosen
    # The same seed draws the same problem; a concrete scenario draws nothing more.
    assert spec.concrete(random.Random(3)) == spec.concrete(random.Random(3))
    once = spec.concrete(random.Random(3))
    assert once.concrete(random.Random(4)) == once


def test_summary_and_facets_show_mechanisms_and_declared_targets(catalog: Catalog) -> None:
    spec = catalog.scenarios["sre/leak-and-release"]
    assert isinstance(spec, SreSpec)
    summary = spec.summary()
    assert summary["mechanisms"] == ["fd_leak", "bad_release"]
    assert summary["targets"] == [
        ["catalog", "checkout"],
        ["cart", "payment", "shipping", "recommendation"],
    ]
    assert spec.facets() == {"mechanism": "fd_leak+bad_release", "kind": "multi-fault"}
    control = catalog.scenarios["sre/control-quiet"]
    assert control.facets() == {"mechanism": "none", "kind": "control"}


def test_fault_library_has_every_mechanism_with_a_signature() -> None:
    assert len(faults.MECHANISMS) >= 34
    for mech in faults.MECHANISMS.values():
        assert mech.fault_type in faults.FAULT_TYPES
        assert mech.observable, mech.name
        for target in mech.targets:
            fault = FaultSpec(
                mechanism=mech.name,
                target=target,
                draw={p.name: [] for p in mech.params if p.choices},
            )
            concrete = fault.concrete(random.Random(0))
            checks = mech.signature(target, concrete.merged_params())
            assert checks and all(c.promql or c.log_text for c in checks), (mech.name, target)
            root = mech.root(target)
            assert topology.canonical(root) == root or topology.parse_edge(root), root


def test_no_alert_names_a_fault_type() -> None:
    """Alerts are symptoms per service: no name or summary tells a fault type or mechanism.

    So the baseline, which reads types off alert names, cannot: it maps only a latency
    symptom (which slow releases, saturated CPUs, locked tables and slow links all raise).
    """
    words = {w for t in faults.FAULT_TYPES for w in t.split("_")} | set(faults.MECHANISMS)
    # Symptom words several mechanisms share (an alert may say what hurts).
    words -= {
        "down",
        "loss",
        "failure",
        "release",
        "bad",
        "latency",
        "saturation",
        "reset",
        "upstream",
    }
    for rule in RULES:
        text = f"{rule['alert']} {rule['annotations']}".lower()
        for word in words:
            assert word not in text, (rule["alert"], word)
    names = {str(r["alert"]) for r in RULES}
    assert names == {
        "HighErrorRate",
        "HighLatency",
        "InstanceDown",
        "UpstreamErrors",
        "DependencyUnreachable",
        "Saturation",
        "InstanceRestarting",
        "WorkloadErrors",
    }
    assert set(agents._ALERT_TYPES) <= {"HighLatency"}
    saturation = next(r for r in RULES if r["alert"] == "Saturation")
    for resource in ("cpu", "memory", "pool", "fds", "threads", "queue"):
        assert f'"{resource}"' in str(saturation["expr"])


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
    with pytest.raises(
        ValidationError,
        match="mechanisms for 'cart': bad_release, cpu_limit_too_low, crash_loop_config, ",
    ):
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
    with pytest.raises(ValidationError, match="give exactly one of 'target' or 'targets'"):
        _spec(faults=[{"mechanism": "redis_down"}])
    with pytest.raises(ValidationError, match=r"no value of 'flag' in \['nope'\] is valid"):
        _spec(faults=[{**flag, "draw": {"flag": ["nope"]}}])
    with pytest.raises(ValidationError, match="unknown parameter 'nope' for feature_flag"):
        _spec(faults=[{**flag, "draw": {"nope": []}}])
    assert _spec(faults=[{**flag, "params": {"flag": "gift_wrap"}}]).faults[0].merged_params()
    with pytest.raises(ValidationError, match=r"needs a service, got 'cart-1' \(valid: frontend, "):
        _spec(noise=[{"kind": "compatible_release", "target": "cart-1"}])


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
    # A network fault's root is its link, never the mesh.
    assert truth.root_causes == ["currency", "checkout->payment"]
    assert truth.fault_types == ["process_hang", "network_latency"]
    assert ("currency", "payment") in truth.propagation
    assert ("payment", "checkout") in truth.propagation
    assert "mesh" not in json.dumps(truth.model_dump())
    with pytest.raises(ValueError, match="has not been drawn"):
        _spec(faults=[{"mechanism": "redis_down", "targets": ["redis"]}]).truth()


def test_nothing_the_agent_reads_names_the_mechanism(catalog: Catalog) -> None:
    """Goals (the only scenario text an agent gets) never name a mechanism or target."""
    names = set(faults.MECHANISMS) | {m.replace("_", " ") for m in faults.MECHANISMS}
    for spec in catalog.scenarios.values():
        text = spec.goal.lower()
        for name in names:
            assert name not in text, (spec.id, name)
        for f in spec.faults:  # type: ignore[attr-defined]
            for one in f.alternatives():
                for target in one.declared:
                    assert target not in text, (spec.id, target)


def test_injector_code_stays_out_of_the_shop_tree() -> None:
    """The shop's processes run only the app package: no fault code or wording in it."""
    app = Path(faults.__file__).parents[1] / "app"
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
        for drawn in _draws(spec, 6):
            truth = drawn.truth()
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
        for drawn in _draws(spec, 6):
            passes, _ = judge_answer(drawn.truth(), constant)
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


def test_recovery_removes_only_control_groups_of_deploys_shape(tmp_path: Path) -> None:
    """Recover removes the instances' groups the trial's record names only when deploy could
    have made them: a group of each controller's hierarchy named ``itbench-shop-<12 hex>``."""
    record = tmp_path / HARNESS_RECORD
    name = "itbench-shop-0123456789ab"
    good = {
        "memory": f"/sys/fs/cgroup/memory/x/{name}",
        "cpu": f"/sys/fs/cgroup/cpu,cpuacct/{name}",
        "pids": f"/sys/fs/cgroup/pids/{name}",
    }
    bad: list[object] = [
        "itbench-shop-0123456789ab",
        {"memory": good["memory"]},
        {**good, "blkio": f"/sys/fs/cgroup/blkio/{name}"},
        {**good, "memory": "/sys/fs/cgroup/memory"},
        {**good, "memory": f"/etc/{name}"},
        {**good, "memory": f"/sys/fs/cgroup/cpu/{name}"},
        {**good, "memory": f"/sys/fs/cgroup/memory/../../../etc/{name}"},
        {**good, "memory": f"memory/{name}"},
        {**good, "cpu": "/sys/fs/cgroup/cpu/itbench-0123456789ab"},
        {**good, "cpu": 5},
    ]
    for value in bad:
        record.write_text(json.dumps({"shared": "", "groups": value}))
        assert recorded_groups(tmp_path) is None, value
    record.write_text(json.dumps({"shared": "", "groups": good}))
    groups = recorded_groups(tmp_path)
    assert groups is not None and groups.record() == good


def test_configurations_keep_the_shops_traffic_on_this_machine() -> None:
    """Registry records and service upstreams the agent edits stay on loopback addresses."""
    from itbench_sre.tools import _check_addresses

    from itbench import ToolError

    _check_addresses("dns", json.dumps({"records": {"payment.svc": "127.0.0.2"}}))
    _check_addresses("cart", json.dumps({"upstreams": {"redis": "127.0.0.1:6379"}}))
    _check_addresses("checkout", json.dumps({"upstreams": {"payment": "payment.svc:5000"}}))
    for entity, doc in (
        ("dns", {"records": {"payment.svc": "10.1.2.3"}}),
        ("dns", {"records": {"payment.svc": "example.org"}}),
        ("dns", {"records": {"evil": "127.0.0.1"}}),
        ("checkout", {"upstreams": {"payment": "192.168.1.9:443"}}),
        ("checkout", {"upstreams": {"payment": "example.org:80"}}),
    ):
        with pytest.raises(ToolError, match="loopback"):
            _check_addresses(entity, json.dumps(doc))


def test_docs_describe_each_mechanism_but_publish_no_detector() -> None:
    """sre/README.md has a row per mechanism with what it looks like, and no doc gives away a
    readiness expression or a reference fix: a published threshold is a ready-made detector.

    Every target's check with default parameters (or the first valid value) is looked for in
    the README and in the generated reference.
    """
    root = Path(__file__).resolve().parents[2]
    readme = (root / "sre" / "README.md").read_text()
    reference = (root / "docs" / "sre.md").read_text()
    for mech in faults.MECHANISMS.values():
        row = next((ln for ln in readme.splitlines() if ln.startswith(f"| `{mech.name}` |")), "")
        assert mech.observable in row, mech.name
        for target in mech.targets:
            params = dict(mech.defaults)
            for p in mech.params:
                valid = p.choices(target) if p.choices else ()
                if valid and params[p.name] not in valid:
                    params[p.name] = valid[0]
            for check in mech.signature(target, params):
                text = check.describe()
                assert text not in readme and text.replace("|", "\\|") not in readme, text
                assert text not in reference and text.replace("|", "\\|") not in reference, text
    assert "| reference fix" not in readme and "readiness check (" not in readme


def test_listing_every_entity_and_edge_passes_nothing(catalog: Catalog) -> None:
    """The lister's answer (every entity and edge, both directions) fails every problem."""
    edges = [(a, b) for a, b in topology.edges()]
    answer = SreSubmission(
        incident=True,
        root_causes=[*topology.entities(), *(topology.edge_name(a, b) for a, b in edges)],
        fault_type=faults.FAULT_TYPES[0],
        propagation=[(b, a) for a, b in edges] + edges,
    )
    for spec in catalog.scenarios.values():
        assert isinstance(spec, SreSpec)
        for drawn in _draws(spec, 4):
            truth = drawn.truth()
            passes, metrics = judge_answer(truth, answer)
            asked = [t for t in spec.task_types if t != "mitigation"]
            assert not all(passes[t] for t in asked), spec.id
            if truth.incident:
                assert metrics["loc_score"] < 0.1 and not passes["localization"], spec.id


def test_flag_names_wording_and_the_faulty_release_are_drawn_per_trial(catalog: Catalog) -> None:
    """No literal names a cause: what a flag, a message or a release number stands for varies."""
    spec = catalog.scenarios["sre/feature-flag"]
    assert isinstance(spec, SreSpec)
    draws = [spec.concrete(random.Random(i)) for i in range(40)]
    fault_names = {d.faults[0].merged_params()["flag_name"] for d in draws}
    assert len(fault_names) > 8 and fault_names <= set(topology.FLAG_NAMES)
    routine = {
        d.flag_names[s][f] for d in draws for s in d.flag_names for f in topology.ROUTINE_FLAGS[s]
    }
    # A name that names the fault's flag in one trial is a harmless routine flag in another.
    assert fault_names & routine
    for d in draws:
        for service, names in d.flag_names.items():
            assert set(names) == set(topology.flags_of(service))
            assert len(set(names.values())) == len(names)
        assert set(d.faulty_releases) == set(topology.BY_NAME)
        assert all(r in topology.candidates(s) for s, r in d.faulty_releases.items())
    assert len({tuple(sorted(d.phrasing.items())) for d in draws}) == len(draws)
    assert len({d.faulty_releases["cart"] for d in draws}) == 3
    # The draw survives a round trip through a scenario file.
    again = SreSpec.model_validate(draws[0].model_dump(mode="json"))
    assert again.flag_names == draws[0].flag_names and again.faults == draws[0].faults


def test_decoys_make_the_kinds_of_change_faults_make(catalog: Catalog) -> None:
    """Routine changes move upstreams, resize pools and switch new flags on, harmlessly."""
    keys: set[str] = set()
    followed: set[str] = set()
    registry: dict[str, int] = {"dns_fault": 0, "other": 0}
    for spec in catalog.scenarios.values():
        assert isinstance(spec, SreSpec)
        for i in range(15):
            d = spec.concrete(random.Random(i))
            for decoy in d.decoy_changes:
                if decoy.kind == "tuning":
                    keys.add(f"{decoy.key}={decoy.value}")
                elif decoy.kind == "follow_up":
                    followed.add(decoy.key)
                elif decoy.kind == "registry":
                    dns_fault = topology.DNS in {f.chosen for f in d.faults}
                    registry["dns_fault" if dns_fault else "other"] += 1
    # The name registry changes routinely too, but never beside a fault of its own.
    assert registry["other"] >= 20 and registry["dns_fault"] == 0, registry
    assert any(k.startswith("upstreams.") and k.endswith(f"={RESOLVED}") for k in keys)
    assert {"pool_size=6", "pool_size=8"} <= keys
    assert any(k.startswith("flags.") and k.endswith("=True") for k in keys)
    assert any(k.startswith("flags.") and k.endswith("=False") for k in keys)
    # A follow-up on a faulted service never touches an upstream or its pool.
    assert followed and not any(k.startswith(("upstreams.", "pool_")) for k in followed)


def test_a_constant_no_incident_passes_no_control(catalog: Catalog) -> None:
    """Every control has benign events to explain, drawn per trial: no constant names them."""
    controls = [s for s in catalog.scenarios.values() if isinstance(s, SreSpec) and not s.faults]
    assert len(controls) >= 5
    constants = [SreSubmission(incident=False)] + [
        SreSubmission(incident=False, benign=[s.name]) for s in topology.SERVICES
    ]
    for spec in controls:
        for i in range(20):
            truth = spec.concrete(random.Random(i)).truth()
            assert truth.benign, spec.id
            for answer in constants:
                assert not judge_answer(truth, answer)[0]["localization"], (spec.id, answer)
            right = SreSubmission(incident=False, benign=list(truth.benign))
            assert judge_answer(truth, right)[0]["localization"], spec.id


def test_no_routine_change_needs_a_datastore_a_fault_stopped(catalog: Catalog) -> None:
    """While PostgreSQL is stopped, no decoy rotates a database password (it could not)."""
    spec = catalog.scenarios["sre/redis-down"]
    assert isinstance(spec, SreSpec)
    rotated = {"redis": 0, "postgres": 0}
    for i in range(240):
        d = spec.concrete(random.Random(i))
        if d.faults[0].mechanism != "datastore_down":
            continue  # a look-alike: nothing is stopped
        stopped = d.faults[0].chosen
        rotated[stopped] += sum(
            1 for c in d.decoy_changes if c.key.startswith("postgres.") and c.value == ROTATED
        )
    # Redis down leaves the password rotations in the draw; PostgreSQL down takes them out.
    assert rotated["redis"] > 0 and rotated["postgres"] == 0, rotated


def test_the_readmes_fault_table_lists_each_mechanisms_targets() -> None:
    """The README's targets column says what the library draws from, no more and no less."""
    readme = (Path(__file__).resolve().parents[2] / "sre" / "README.md").read_text()
    services = {s.name for s in topology.SERVICES}
    for mech in faults.MECHANISMS.values():
        row = next(ln for ln in readme.splitlines() if ln.startswith(f"| `{mech.name}` |"))
        cell = row.split("|")[3].strip()
        if cell == "any service":
            assert set(mech.targets) == services, mech.name
        elif m := re.fullmatch(r"any of the (\d+) service call edges", cell):
            assert len(mech.targets) == int(m.group(1)), mech.name
            assert all(topology.parse_edge(t) for t in mech.targets), mech.name
        else:
            assert set(re.findall(r"`([^`]+)`", cell)) == set(mech.targets), (mech.name, cell)


#: Problems whose answer is the same on every draw, on purpose: the smoke problem of
#: `make evaluate` (a demonstration), and two services that lost access in one change.
FIXED_ANSWER = {"sre/smoke-cart-bad-release", "sre/correlated-credentials"}


def test_every_problem_asks_for_more_than_one_answer(catalog: Catalog, tmp_path: Path) -> None:
    """A memorizer of the catalog cannot give one answer that every draw of a problem asks for.

    Counted as ``itbench validate`` counts it: each fault's root, fault type and, where
    mitigation is asked, reference fix, over 64 public draws.
    """
    domain = SreDomain()
    single = set()
    for spec in catalog.scenarios.values():
        assert isinstance(spec, SreSpec)
        spread = answer_spread(domain, spec, tmp_path)
        assert spread is not None
        if spread["distinct"] < 2:
            single.add(spec.id)
    assert single == FIXED_ANSWER
