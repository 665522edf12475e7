"""The organization's waivers: drawn per trial, stated in the requirement, judged."""

from __future__ import annotations

import json
from pathlib import Path

from itbench_ciso.checks import k8s, waivers
from itbench_ciso.domain import CisoDomain
from itbench_ciso.oracle import reference
from itbench_ciso.spec import CisoSpec

from itbench import testing
from itbench.catalog import Catalog

from .conftest import judge, toolbox_and_task


def test_a_policy_from_the_catalog_text_alone_fails_and_one_that_reads_the_waivers_passes(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/k8s-privileged"]
    assert isinstance(spec, CisoSpec) and k8s.waivable(spec.check)
    seen = []
    for secret in (b"one", b"two", b"three"):
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            assert requirement.startswith(spec.requirement) and requirement != spec.requirement
            assert f"Requirement: {requirement}" in task.goal
            # The visible snapshot holds the config map the requirement names.
            snapshot = json.loads(Path(task.context["cluster_snapshot"]).read_text())
            [where] = waivers._WHERE.findall(requirement)
            home, name, key = where
            [cm] = [
                o
                for o in snapshot["items"]
                if o["kind"] == "ConfigMap"
                and o["metadata"]["name"] == name
                and o["metadata"].get("namespace") == home
            ]
            assert cm["data"][key].strip()
            honouring = judge(domain, spec, env, ctx, reference(spec, requirement))
            text_only = judge(domain, spec, env, ctx, reference(spec))
            seen.append((home, name, key, requirement))
        assert honouring.passed, honouring.details
        assert not text_only.passed
        # Only false positives: violations in namespaces whose waiver still holds.
        assert text_only.metrics["fp"] > 0
        assert text_only.metrics["fn"] == 0
    # Where the waivers live and how the requirement words them change from trial to trial.
    assert len({s[:3] for s in seen}) > 1 and len({s[3] for s in seen}) == 3


def test_expired_waivers_exempt_nothing() -> None:
    """A policy that exempts every listed namespace, whatever its date, misses violations."""
    import random

    from itbench_ciso.engine import WorkerEngine
    from itbench_ciso.families.kubernetes import flagged_ids

    check = k8s.by_id("k8s-host-path")
    drawn = waivers.draw(random.Random(5))
    visible, hidden = k8s.variants(check.id, 5, 3, 4, waivers=drawn)
    assert any("expired waiver" in n for v in hidden for n in v.notes)
    requirement = f"{check.requirement} {drawn.sentence()}"
    right = waivers.policy_for(requirement, check.policy())
    dateless = right.replace("found[0][2] >= waiver_today", "true")
    assert dateless != right
    engine = WorkerEngine("regorus")
    try:
        missed = 0
        for v in [visible, *hidden]:
            [good] = engine.evaluate({"p.rego": right}, "data.compliance.violations", [v.data])
            [loose] = engine.evaluate({"p.rego": dateless}, "data.compliance.violations", [v.data])
            assert flagged_ids(good.value) == v.violating, v.notes
            missed += len(v.violating - flagged_ids(loose.value))
    finally:
        engine.close()
    assert missed > 0


def test_a_policy_set_update_keeps_no_waivers(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    # The changed requirement states the organization's parameters, and no waivers.
    spec = catalog.scenarios["ciso/update-resource-limits-limits-and-requests"]
    assert isinstance(spec, CisoSpec)
    with testing.live_environment(domain, spec, tmp_path, until="setup") as (env, ctx):
        _, task = toolbox_and_task(domain, spec, env, ctx)
        requirement = str(task.context["requirement"])
        assert not waivers._WHERE.findall(requirement) and not waivers._TODAY.findall(requirement)
        snapshot = json.loads(Path(task.context["cluster_snapshot"]).read_text())
        assert not any(o["metadata"]["name"] in waivers.NAMES for o in snapshot["items"])
        result = judge(domain, spec, env, ctx, reference(spec, requirement, task.workspace))
    assert result.passed
