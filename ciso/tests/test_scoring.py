"""The judge cannot be gamed: always-violation and never-violation policies fail everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from itbench_ciso.checks import cloud, linux
from itbench_ciso.checks.linux import playbook_for
from itbench_ciso.domain import CisoDomain
from itbench_ciso.families.kubernetes import file_of, original_set, package_of
from itbench_ciso.scoring import Confusion
from itbench_ciso.spec import CisoSpec, CisoSubmission

from itbench.catalog import Catalog

from .conftest import judge, live, toolbox_and_task

ALWAYS_POD = """package compliance

import rego.v1

violations contains {"kind": o.kind, "namespace": object.get(o.metadata, "namespace", ""), "name": o.metadata.name} if {
	some o in input.items
}
"""
NEVER = "package compliance\n\nimport rego.v1\n\nviolations := set()\n"
ALWAYS_SYSTEM = 'package compliance\n\nimport rego.v1\n\nviolations contains "always"\n'


def _specs(catalog: Catalog, family: str) -> list[CisoSpec]:
    out = [s for s in catalog.scenarios.values() if isinstance(s, CisoSpec) and s.family == family]
    assert out
    return out


def test_trivial_policies_fail_every_kubernetes_scenario(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    for spec in _specs(catalog, "kubernetes"):
        with live(domain, spec, tmp_path / spec.id.replace("/", "_")) as (env, ctx):
            always = judge(domain, spec, env, ctx, CisoSubmission(policy=ALWAYS_POD))
            never = judge(domain, spec, env, ctx, CisoSubmission(policy=NEVER))
        assert not always.passed and not never.passed, spec.id
        assert always.metrics["fp"] > 0 and always.metrics["recall"] == 1.0
        assert never.metrics["fn"] > 0 and never.metrics["tp"] == 0


def test_trivial_changes_fail_every_policy_update_scenario(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    for spec in _specs(catalog, "policy-update"):
        assert spec.changed is not None
        unchanged = original_set(spec.policy_set)
        for body in (ALWAYS_POD, NEVER):
            policies = dict(unchanged)
            policies[file_of(spec.policy_set, spec.changed)] = body.replace(
                "package compliance", f"package {package_of(spec.policy_set, spec.changed)}"
            )
            with live(domain, spec, tmp_path / f"{spec.id.replace('/', '_')}{len(body)}") as (
                env,
                ctx,
            ):
                result = judge(domain, spec, env, ctx, CisoSubmission(policies=policies))
                # Submitting the set unchanged fails too: the new requirement is not enforced.
                same = judge(domain, spec, env, ctx, CisoSubmission(policies=unchanged))
            assert not result.passed and result.metrics["other_policies_unchanged"] is True
            assert not same.passed and same.metrics["other_policies_unchanged"] is True


def test_other_policy_changes_are_detected(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/update-image-tag-image-registry"]
    assert isinstance(spec, CisoSpec) and spec.changed is not None
    from itbench_ciso.oracle import reference

    with live(domain, spec, tmp_path) as (env, ctx):
        # The reference reads the trial's organization parameters where its requirement says.
        _, task = toolbox_and_task(domain, spec, env, ctx)
        good = reference(spec, str(task.context["requirement"]), task.workspace)
        broken = dict(good.policies)
        other = next(c for c in spec.policy_set if c != spec.changed)
        broken[file_of(spec.policy_set, other)] = NEVER.replace(
            "package compliance", f"package {package_of(spec.policy_set, other)}"
        )
        ok = judge(domain, spec, env, ctx, good)
        bad = judge(domain, spec, env, ctx, CisoSubmission(policies=broken))
    assert ok.passed
    assert not bad.passed
    assert bad.metrics["other_policies_unchanged"] is False
    assert bad.metrics["other_policies_changed"] == 1


@pytest.mark.parametrize("module", [linux, cloud])
def test_every_host_and_account_scenario_has_both_verdicts(
    module: object, catalog: Catalog
) -> None:
    """Verdict families judge whole systems: with at least one compliant and one violating
    hidden system, a constant answer is wrong on some of them."""
    family = module.__name__.rsplit(".", 1)[-1]  # type: ignore[attr-defined]
    for spec in _specs(catalog, family):
        _, hidden = module.variants(  # type: ignore[attr-defined]
            spec.check, 7, spec.variants.compliant, spec.variants.non_compliant
        )
        verdicts = {v.compliant for v in hidden}
        assert verdicts == {True, False}, spec.id


def test_trivial_policies_fail_a_linux_scenario_end_to_end(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/linux-kernel-parameters"]
    assert isinstance(spec, CisoSpec)
    playbook = playbook_for(("/etc/sysctl.d/*", "/etc/sysctl.conf"), (), ())
    with live(domain, spec, tmp_path) as (env, ctx):
        always = judge(
            domain, spec, env, ctx, CisoSubmission(playbook=playbook, policy=ALWAYS_SYSTEM)
        )
        never = judge(domain, spec, env, ctx, CisoSubmission(playbook=playbook, policy=NEVER))
    for result in (always, never):
        assert not result.passed
        assert result.metrics["evidence_collected"] == 1.0
    assert always.metrics["fp"] == spec.variants.compliant and always.metrics["tn"] == 0
    assert never.metrics["fn"] == spec.variants.non_compliant and never.metrics["tp"] == 0


def test_confusion_metrics() -> None:
    conf = Confusion()
    for truth, predicted in [(True, True), (True, False), (False, True), (False, False)]:
        conf.add(truth, predicted)
    assert conf.metrics() == {
        "tp": 1,
        "fp": 1,
        "tn": 1,
        "fn": 1,
        "precision": 0.5,
        "recall": 0.5,
    }
