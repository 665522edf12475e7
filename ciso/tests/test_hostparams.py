"""The organization's approved ports on Linux hosts: drawn per trial, kept under /etc, judged."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from itbench_ciso.checks import hostparams, linux
from itbench_ciso.domain import CisoDomain
from itbench_ciso.engine import WorkerEngine
from itbench_ciso.oracle import reference
from itbench_ciso.spec import CisoSpec

from itbench import testing
from itbench.catalog import Catalog

from .conftest import judge, toolbox_and_task


def test_a_live_trial_needs_the_hosts_approved_ports(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios[f"ciso/{hostparams.CHECK}"]
    assert isinstance(spec, CisoSpec)
    seen = []
    for secret in (b"one", b"two"):
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            assert f"Requirement: {requirement}" in task.goal
            assert requirement != spec.requirement
            # Every visible host keeps the file the requirement names.
            for root in task.context["hosts"].values():
                assert hostparams.read(requirement, Path(root))
            reading = judge(domain, spec, env, ctx, reference(spec, requirement, task.workspace))
            text_only = judge(domain, spec, env, ctx, reference(spec, requirement))
            seen.append(requirement)
        assert reading.passed, reading.details
        assert not text_only.passed
        assert text_only.metrics["fp"] > 0
    assert seen[0] != seen[1]


@pytest.mark.parametrize("engine_name", ["regorus", "regopy"])
def test_the_reference_reading_the_ports_is_right_on_every_host(
    engine_name: str, tmp_path: Path
) -> None:
    engine = WorkerEngine(engine_name)
    shapes = set()
    try:
        default_wrong = 0
        for seed in range(8):
            org = hostparams.draw(hostparams.CHECK, random.Random(seed))
            assert org is not None
            shapes.add(org.shape)
            check = org.check()
            visible, hidden = linux.variants(check.id, seed, 3, 4, judged=check, org=org.install())
            root = tmp_path / str(seed)
            linux.materialise(visible[0].data, root)
            ports = hostparams.read(org.requirement(), root)
            assert ports == org.ports
            right = hostparams.derive(ports).policy()
            hosts = [*visible, *hidden]
            docs = [check.evidence_of(v.data) for v in hosts]
            query = "data.compliance.violations"
            good = engine.evaluate({"p.rego": right}, query, docs)
            plain = engine.evaluate({"p.rego": linux.by_id(check.id).policy()}, query, docs)
            for v, g, p in zip(hosts, good, plain, strict=True):
                assert g.error is None, g.error
                assert bool(g.value) == (not v.compliant), (seed, v.notes, g.value)
                default_wrong += bool(p.value) != (not v.compliant)
        assert default_wrong > 0
    finally:
        engine.close()
    assert shapes == set(hostparams.FORMATS)


def test_hidden_hosts_exercise_the_ports() -> None:
    org = hostparams.draw(hostparams.CHECK, random.Random(4))
    assert org is not None
    _, hidden = linux.variants(org.check().id, 4, 3, 4, judged=org.check(), org=org.install())
    good = " | ".join(n for v in hidden if v.compliant for n in v.notes)
    bad = " | ".join(n for v in hidden if not v.compliant for n in v.notes)
    assert "approved" in good
    assert "next to an approved port" in bad


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    org = hostparams.draw(hostparams.CHECK, random.Random(1))
    assert org is not None
    with pytest.raises(hostparams.ParamsError, match=org.path.lstrip("/")):
        hostparams.read(org.requirement(), tmp_path)
    (tmp_path / org.path.lstrip("/")).parent.mkdir(parents=True)
    (tmp_path / org.path.lstrip("/")).write_text("# nothing approved\n")
    with pytest.raises(hostparams.ParamsError, match="lists no port"):
        hostparams.read(org.requirement(), tmp_path)
    assert hostparams.read("No file named.", tmp_path) is None
