"""The organization's values of the Linux host checks: drawn per trial, kept under /etc, judged.

A playbook and policy written from the catalog's text alone (the answer key) fail every drawn
trial; the reference reading the trial's baseline passes.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from itbench_ciso.checks import linux, linuxparams
from itbench_ciso.domain import CisoDomain
from itbench_ciso.engine import WorkerEngine
from itbench_ciso.oracle import reference
from itbench_ciso.spec import CisoSpec

from itbench import testing
from itbench.catalog import Catalog

from .conftest import judge, toolbox_and_task

QUERY = "data.compliance.violations"
CHECKS = sorted(linuxparams.kinds())


@pytest.mark.parametrize("check_id", CHECKS)
def test_the_reference_reading_the_baseline_is_right_and_the_catalog_is_not(
    engine: WorkerEngine, check_id: str, tmp_path: Path
) -> None:
    """On every draw: the baseline read back from a host gives the values, the policy with
    them agrees with the ground truth on every host, the catalog's policy errs on a hidden one.
    """
    for seed in range(4):
        org = linuxparams.draw(check_id, random.Random(seed))
        assert org is not None
        check = org.check()
        visible, hidden = linux.variants(check_id, seed, 3, 4, judged=check, org=org.install())
        root = tmp_path / str(seed)
        linux.materialise(visible[0].data, root)
        found = linuxparams.read(org.requirement(), root)
        assert found == (org.values, org.path)
        derived = linuxparams.derive_from(check_id, org.requirement(), root)
        assert derived is not None and derived.policy() == check.policy()
        hosts = [*visible, *hidden]
        answers = engine.evaluate(
            {"p.rego": check.policy()}, QUERY, [check.evidence_of(v.data) for v in hosts]
        )
        for v, a in zip(hosts, answers, strict=True):
            assert a.error is None, a.error
            assert bool(a.value) == bool(v.violating), (seed, v.notes, a.value)
        base = linux.by_id(check_id)
        plain = engine.evaluate(
            {"p.rego": base.policy()}, QUERY, [base.evidence_of(v.data) for v in hidden]
        )
        assert any(bool(a.value) != bool(v.violating) for v, a in zip(hidden, plain, strict=True))


@pytest.mark.parametrize(
    "scenario", ["ciso/linux-password-aging", "ciso/linux-sshd", "ciso/linux-packages"]
)
def test_a_catalog_text_only_answer_fails_every_drawn_trial(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path, scenario: str
) -> None:
    spec = catalog.scenarios[scenario]
    assert isinstance(spec, CisoSpec)
    seen = set()
    for secret in (b"lin-0", b"lin-1", b"lin-2"):
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            assert f"Requirement: {requirement}" in task.goal
            right = judge(domain, spec, env, ctx, reference(spec, requirement, task.workspace))
            text_only = judge(domain, spec, env, ctx, reference(spec))
            seen.add(requirement)
        assert right.passed, right.details
        assert text_only.metrics.get("evidence_collected"), text_only.details
        assert not text_only.passed
    assert len(seen) == 3


def test_the_place_format_keys_and_wording_vary_per_trial() -> None:
    draws = [linuxparams.draw("linux-faillock", random.Random(s)) for s in range(40)]
    assert all(d is not None for d in draws)
    kept = [d for d in draws if d is not None]
    assert len({d.path for d in kept}) > 2
    assert {d.shape for d in kept} == set(linuxparams.FORMATS)
    assert len({d.keys for d in kept}) > 3
    assert len({d.values for d in kept}) > 3
    assert any(d.stale for d in kept) and not all(d.stale for d in kept)
    assert linuxparams.draw("linux-listening-ports", random.Random(0)) is None


def test_decoys_hold_other_values_than_the_baseline(tmp_path: Path) -> None:
    for seed in range(12):
        org = linuxparams.draw("linux-password-aging", random.Random(seed))
        assert org is not None
        host = linux.clean_host()
        org.install()(host)
        assert org.decoy_values != org.values
        decoy = linuxparams.parse(host[org.decoy_path].content)
        assert tuple(decoy[k] for k in org.keys) == org.decoy_values
        real = linuxparams.parse(host[org.path].content)
        # The commented-out old values never count.
        assert tuple(real[k] for k in org.keys) == org.values
        if org.stale:
            old = linuxparams.parse(host[f"{org.path}.dpkg-old"].content)
            assert tuple(old[k] for k in org.keys) == org.decoy_values


def test_a_missing_baseline_or_key_is_named(tmp_path: Path) -> None:
    org = linuxparams.draw("linux-umask", random.Random(3))
    assert org is not None
    with pytest.raises(linuxparams.ParamsError, match=org.path.lstrip("/")):
        linuxparams.read(org.requirement(), tmp_path)
    target = tmp_path / org.path.lstrip("/")
    target.parent.mkdir(parents=True)
    target.write_text("# nothing here\n", encoding="utf-8")
    with pytest.raises(linuxparams.ParamsError, match=org.keys[0]):
        linuxparams.read(org.requirement(), tmp_path)
    assert linuxparams.read("No file named.", tmp_path) is None
