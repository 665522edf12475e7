"""The organization's values of the cluster-wide Kubernetes checks: tolerated objects in the
default namespace, namespaces exempt from network policies, subjects allowed cluster-admin.

A policy written from the catalog's text alone fails every drawn trial; the reference reading
the trial's values passes.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from itbench_ciso.checks import k8s, k8sparams, orgparams
from itbench_ciso.domain import CisoDomain
from itbench_ciso.engine import WorkerEngine
from itbench_ciso.oracle import reference
from itbench_ciso.spec import CisoSpec

from itbench import testing
from itbench.catalog import Catalog

from .conftest import judge, toolbox_and_task

CHECKS = ("k8s-default-namespace", "k8s-network-policies", "k8s-rbac-cluster-admin")
QUERY = "data.compliance.violations"


@pytest.mark.parametrize("check_id", CHECKS)
def test_the_reference_with_the_values_is_right_and_the_catalog_is_not(
    engine: WorkerEngine, check_id: str
) -> None:
    for seed in range(5):
        org = orgparams.draw(check_id, random.Random(seed))
        assert org is not None
        check = org.check()
        visible, hidden = k8s.variants(
            check_id, seed, 3, 4, judged=check, org_objects=org.objects()
        )
        snaps = [visible, *hidden]
        good = engine.evaluate({"p.rego": check.policy()}, QUERY, [v.data for v in snaps])
        for v, a in zip(snaps, good, strict=True):
            assert a.error is None, a.error
            assert bool(a.value) == (not v.compliant), (seed, v.notes, a.value)
        plain = engine.evaluate(
            {"p.rego": k8s.by_id(check_id).policy()}, QUERY, [v.data for v in hidden]
        )
        assert any(bool(a.value) == v.compliant for v, a in zip(hidden, plain, strict=True))


def test_the_namespaces_keeping_exemptions_have_network_policies() -> None:
    """Else the places keeping the values would break the very rule they qualify."""
    for seed in range(10):
        org = orgparams.draw("k8s-network-policies", random.Random(seed))
        assert org is not None
        objects = org.objects()
        spaces = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
        guarded = {o["metadata"]["namespace"] for o in objects if o["kind"] == "NetworkPolicy"}
        assert spaces and spaces == guarded
        assert not set(org.values) & spaces


def test_a_swapped_subject_kind_is_no_allowed_admin() -> None:
    """An allowed group's name bound as a user (or the reverse) stays a violation."""
    check = k8sparams.derive_admins(k8s.by_id("k8s-rbac-cluster-admin"), ("Group:sre-oncall",))
    assert any("as a User" in label for label in check.bad)
    assert any("bound to listed sre-oncall" in label for label in check.near)


@pytest.mark.parametrize("scenario", [f"ciso/{c}" for c in CHECKS])
def test_a_catalog_text_only_answer_fails_every_drawn_trial(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path, scenario: str
) -> None:
    spec = catalog.scenarios[scenario]
    assert isinstance(spec, CisoSpec) and spec.check in orgparams.KINDS
    seen = set()
    for secret in (b"k-0", b"k-1", b"k-2"):
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            right = judge(domain, spec, env, ctx, reference(spec, requirement, task.workspace))
            text_only = judge(domain, spec, env, ctx, reference(spec))
            seen.add(requirement)
        assert right.passed, right.details
        assert text_only.metrics["policy_compiles"]
        assert not text_only.passed
    assert len(seen) == 3
