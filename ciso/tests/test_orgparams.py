"""The organization's parameters: drawn per trial, kept in its systems, judged."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from itbench_ciso.checks import k8s, orgparams, waivers
from itbench_ciso.domain import CisoDomain
from itbench_ciso.engine import WorkerEngine
from itbench_ciso.families.kubernetes import flagged_ids
from itbench_ciso.oracle import reference
from itbench_ciso.spec import CisoSpec

from itbench import testing
from itbench.catalog import Catalog

from .conftest import judge, toolbox_and_task

#: Scenarios whose checks carry organization parameters (both families).
LIVE = (
    "ciso/k8s-added-capabilities",
    "ciso/k8s-host-ports",
    "ciso/k8s-resource-limits",
    "ciso/update-image-tag-image-registry",
    "ciso/update-privileged-privileged-except-system",
    "ciso/update-host-network-host-namespaces",
)


@pytest.mark.parametrize("scenario", LIVE)
def test_a_policy_from_the_catalog_text_fails_and_one_reading_the_parameters_passes(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path, scenario: str
) -> None:
    spec = catalog.scenarios[scenario]
    assert isinstance(spec, CisoSpec) and spec.check in orgparams.KINDS
    seen = []
    for secret in (b"one", b"two", b"three", b"four"):
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            assert f"Requirement: {requirement}" in task.goal
            assert spec.requirement not in requirement
            reading = judge(domain, spec, env, ctx, reference(spec, requirement, task.workspace))
            # The catalog's defaults, honouring the waivers the requirement states.
            text_only = judge(domain, spec, env, ctx, reference(spec, requirement))
            seen.append(requirement)
        assert reading.passed, reading.details
        assert not text_only.passed
        assert text_only.metrics["fp"] + text_only.metrics["fn"] > 0
    # Where the values live and how the requirement words them change from trial to trial.
    assert len(set(seen)) == len(seen)


@pytest.mark.parametrize("engine_name", ["regorus", "regopy"])
def test_the_reference_reading_the_parameters_is_right_on_every_snapshot(
    tmp_path: Path, engine_name: str
) -> None:
    """Every check with parameters, several draws (every kind of home): the reference policy
    built from the values found where the requirement says flags exactly the violating
    objects of the visible and every hidden snapshot; the catalog's default is wrong on some."""
    engine = WorkerEngine(engine_name)
    homes = set()
    try:
        for check_id in orgparams.KINDS:
            default_wrong = 0
            for seed in range(6):
                org = orgparams.draw(check_id, random.Random(seed))
                assert org is not None
                homes.add(org.home.kind)
                drawn = None
                if k8s.waivable(check_id):
                    drawn = waivers.draw(random.Random(seed))
                visible, hidden = k8s.variants(
                    check_id,
                    seed,
                    3,
                    4,
                    waivers=drawn,
                    judged=org.check(),
                    org_objects=org.objects(),
                )
                workspace = tmp_path / f"{check_id}-{seed}"
                if org.home.kind == "document":
                    (workspace / org.home.name).parent.mkdir(parents=True)
                    (workspace / org.home.name).write_text(org.document(), encoding="utf-8")
                requirement = org.requirement() + (f" {drawn.sentence()}" if drawn else "")
                values = orgparams.read(requirement, visible.data, workspace)
                assert values == org.values
                right = waivers.policy_for(requirement, orgparams.policy(check_id, values))
                default = waivers.policy_for(requirement, k8s.by_id(check_id).policy())
                snaps = [visible, *hidden]
                docs = [v.data for v in snaps]
                query = "data.compliance.violations"
                good = engine.evaluate({"p.rego": right}, query, docs)
                plain = engine.evaluate({"p.rego": default}, query, docs)
                for v, g, p in zip(snaps, good, plain, strict=True):
                    assert g.error is None, g.error
                    assert flagged_ids(g.value) == v.violating, (check_id, seed, v.notes)
                    default_wrong += flagged_ids(p.value) != v.violating
            assert default_wrong > 0, check_id
    finally:
        engine.close()
    assert homes == {"configmap", "annotation", "document"}


def test_hidden_snapshots_exercise_the_parameters() -> None:
    """Listed values the catalog's default flags, unlisted ones, a value next to a listed one."""
    for seed in range(4):
        caps = orgparams.draw("k8s-added-capabilities", random.Random(seed))
        ports = orgparams.draw("k8s-host-ports", random.Random(seed))
        assert caps is not None and ports is not None
        _, hidden = k8s.variants(
            caps.kind.check, seed, 3, 4, judged=caps.check(), org_objects=caps.objects()
        )
        notes = " | ".join(n for v in hidden if v.compliant for n in v.notes)
        assert any(f"adds {c}" in notes for c in caps.values if c != "NET_BIND_SERVICE")
        _, hidden = k8s.variants(
            ports.kind.check, seed, 3, 4, judged=ports.check(), org_objects=ports.objects()
        )
        bad = " | ".join(n for v in hidden if not v.compliant for n in v.notes)
        assert "next to a listed one" in bad
        good = " | ".join(n for v in hidden if v.compliant for n in v.notes)
        assert any(p in good for p in ports.values)


def test_a_missing_place_is_named(tmp_path: Path) -> None:
    org = orgparams.draw("k8s-host-ports", random.Random(3))
    assert org is not None
    empty: dict[str, list[dict[str, object]]] = {"items": []}
    for home in (
        orgparams.Home("configmap", "org-standards", "platform-baseline", "host-ports"),
        orgparams.Home("annotation", "org-standards", key="policy.corp.example/host-ports"),
        orgparams.Home("document", name="standards/platform.md", key="Allowed host ports"),
    ):
        stated = orgparams.OrgParams(org.kind, org.values, home, 0, 0).requirement()
        with pytest.raises(orgparams.ParamsError, match="org-standards|platform.md"):
            orgparams.read(stated, empty, tmp_path)
    assert orgparams.read("No place named.", empty, tmp_path) is None
    snapshot = {"items": org.objects()}
    if org.home.kind != "document":
        assert orgparams.read(org.requirement(), json.loads(json.dumps(snapshot)), tmp_path)


def test_no_drawn_wording_names_a_scenario(catalog: Catalog) -> None:
    """Every string a trial may draw (places, keys, headings, phrasings, values) is free of the
    names of the catalog's scenarios and checks."""
    drawn = [
        *orgparams.HOMES,
        *orgparams.CONFIG_MAPS,
        *orgparams.DOCUMENTS,
        *orgparams.PHRASINGS,
    ]
    for kind in orgparams.KINDS.values():
        drawn += [*kind.requirements, kind.what, *kind.keys, kind.heading]
        for seed in range(20):
            org = orgparams.draw(kind.check, random.Random(seed))
            assert org is not None
            drawn += [org.requirement(), org.document(), json.dumps(org.objects())]
    text = "\n".join(drawn).lower()
    words = set()
    for spec in catalog.scenarios.values():
        assert isinstance(spec, CisoSpec)
        words |= {spec.id, spec.id.split("/", 1)[1], spec.check, spec.changed or ""}
        words |= {str(v) for v in spec.params.values()}
    checked = [w for w in words if "-" in w]
    assert len(checked) > 20
    for word in checked:
        assert word.lower() not in text, word
