"""The probe agents (a constant answer; flag everything) fail every CISO scenario."""

from __future__ import annotations

from pathlib import Path

import pytest
from itbench_ciso.domain import CisoDomain
from itbench_ciso.spec import CisoSpec

from itbench.catalog import Catalog

from .conftest import live, toolbox_and_task

#: Judged whole (hosts, accounts): the slow families, a few of each.
SYSTEMS = ["ciso/linux-sshd", "ciso/linux-file-permissions", "ciso/cloud-sg-admin-ports"]


def _run_probes(domain: CisoDomain, spec: CisoSpec, tmp: Path) -> dict[str, dict[str, object]]:
    out = {}
    for kind in ("constant", "thrash"):
        with live(domain, spec, tmp / kind) as (env, ctx):
            toolbox, task = toolbox_and_task(domain, spec, env, ctx)
            submission = domain.probe(kind, task, toolbox)
            assert submission is not None
            result = domain.evaluate(spec, env, submission, toolbox, ctx)
        out[kind] = {"passed": result.passed, **result.metrics}
    return out


@pytest.mark.parametrize("family", ["kubernetes", "policy-update"])
def test_probes_fail_every_snapshot_scenario(
    family: str, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    specs = [
        s for s in catalog.scenarios.values() if isinstance(s, CisoSpec) and s.family == family
    ]
    assert specs
    for i, spec in enumerate(specs):
        runs = _run_probes(domain, spec, tmp_path / str(i))
        assert not runs["constant"]["passed"] and not runs["thrash"]["passed"], spec.id
        assert runs["constant"]["policy_compiles"] is True, spec.id
        if family == "kubernetes":  # flagging every pod: every violation found, clean pods too
            assert runs["thrash"]["recall"] == 1.0 and runs["thrash"]["fp"] > 0, spec.id
        else:
            assert runs["thrash"]["other_policies_unchanged"] is False, spec.id


@pytest.mark.parametrize("sid", SYSTEMS)
def test_probes_fail_host_and_account_scenarios(
    sid: str, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios[sid]
    assert isinstance(spec, CisoSpec)
    runs = _run_probes(domain, spec, tmp_path)
    constant, thrash = runs["constant"], runs["thrash"]
    assert not constant["passed"] and not thrash["passed"]
    # Empty evidence was collected everywhere; one verdict for all systems is wrong on some.
    assert constant["evidence_collected"] == 1.0 and thrash["evidence_collected"] == 1.0
    assert constant["fn"] == spec.variants.non_compliant and constant["tp"] == 0
    assert thrash["fp"] == spec.variants.compliant and thrash["tn"] == 0
