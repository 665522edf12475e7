"""Catalog scenarios: oracle passes and noop fails (a representative few); baseline partial."""

from __future__ import annotations

from pathlib import Path

import pytest
from itbench_ciso.domain import CisoDomain
from itbench_ciso.spec import CisoSpec

from itbench.catalog import Catalog

from .conftest import judge, live, toolbox_and_task

REPRESENTATIVE = [
    "ciso/k8s-run-as-non-root",  # effective values: container overrides pod
    "ciso/update-image-tag-image-registry",  # policy set update
    "ciso/linux-services",  # evidence of symlinks through find
    "ciso/linux-file-permissions",  # evidence of permissions through stat
    "ciso/cloud-sg-admin-ports",  # collector against hidden moto accounts
]


def test_catalog_has_every_family_and_one_smoke_scenario(catalog: Catalog) -> None:
    assert not catalog.errors, [e.line() for e in catalog.errors]
    specs = [s for s in catalog.scenarios.values() if isinstance(s, CisoSpec)]
    by_family: dict[str, int] = {}
    for s in specs:
        by_family[s.family] = by_family.get(s.family, 0) + 1
    assert len(specs) >= 40 and len({(s.family, s.check) for s in specs}) == len(specs)
    assert by_family["kubernetes"] >= 20 and by_family["linux"] >= 12
    assert by_family["cloud"] >= 8 and by_family["policy-update"] >= 5
    assert [s.id for s in specs if "smoke" in s.tags] == ["ciso/k8s-host-namespaces"]


@pytest.mark.parametrize("sid", REPRESENTATIVE)
def test_noop_fails_and_oracle_passes(
    sid: str, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios[sid]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        noop = judge(domain, spec, env, ctx, None)
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        submission = domain.oracle(spec, task, toolbox)
        result = domain.evaluate(spec, env, submission, toolbox, ctx)
    assert not noop.passed
    assert result.passed, (result.metrics, result.details)
    assert result.metrics["precision"] == 1.0 and result.metrics["recall"] == 1.0


@pytest.mark.parametrize("sid", ["ciso/k8s-privileged", "ciso/linux-sshd"])
def test_baseline_templates_miss_what_hidden_variants_test(
    sid: str, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The keyword templates answer these requirements, and the hidden variants defeat them."""
    spec = catalog.scenarios[sid]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        submission = domain.baseline(task, toolbox)
        result = judge(domain, spec, env, ctx, submission)
    assert submission is not None and submission.policy
    assert result.metrics["policy_compiles"] is True and not result.passed, result.details


def test_cloud_evidence_through_an_ansible_playbook(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The cloud family accepts a playbook instead of a collector (one host per account)."""
    from itbench_ciso.oracle import reference

    spec = catalog.scenarios["ciso/cloud-password-policy"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        # The trial's requirement names where the organization's minimum is kept.
        ref = reference(spec, str(task.context["requirement"]), task.workspace)
        playbook = _collector_playbook(str(ref.collector))
        visible = toolbox.call("run_playbook", playbook=playbook)
        result = judge(
            domain, spec, env, ctx, ref.model_copy(update={"collector": None, "playbook": playbook})
        )
    assert visible["status"] == "successful" and "password_policy" in visible["evidence"]
    assert result.passed, result.details
    assert result.metrics["evidence_collected"] == 1.0


def _collector_playbook(collector: str) -> str:
    """A playbook running ``collector`` on every account."""
    import yaml

    return yaml.safe_dump(
        [
            {
                "hosts": "all",
                "gather_facts": False,
                "vars": {"collector": collector},
                "tasks": [
                    {
                        "name": "Collect with boto3",
                        "ansible.builtin.command": {
                            "argv": ["{{ ansible_python_interpreter }}", "-c", "{{ collector }}"]
                        },
                        "environment": "{{ aws_environment }}",
                        "register": "out",
                        "changed_when": False,
                    },
                    {"ansible.builtin.set_fact": {"evidence": "{{ out.stdout | from_json }}"}},
                ],
            }
        ],
        sort_keys=False,
    )


def test_evaluate_policy_runs_a_policy_set_module_in_its_own_package(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A policy set's module (package compliance.control_NN) is tried as it will be submitted;
    a package outside compliance is refused with the reason."""
    spec = catalog.scenarios["ciso/update-image-tag-image-registry"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        policies = toolbox.call("read_policies")
        tried = {
            name: toolbox.call("evaluate_policy", policy=text) for name, text in policies.items()
        }
        always = 'package compliance.control_09\n\nviolations contains "every" if true\n'
        flagged = toolbox.call("evaluate_policy", policy=always)
        foreign = toolbox.call(
            "evaluate_policy", policy=always.replace("compliance.control_09", "other")
        )
    assert all(t["compiles"] and isinstance(t["violations"], list) for t in tried.values()), tried
    assert flagged == {"compiles": True, "violations": ["every"], "error": None}
    assert foreign["compiles"] is False and "package other: use compliance" in foreign["error"]
