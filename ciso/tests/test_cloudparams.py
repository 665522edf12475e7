"""Cloud requirements take the organization's own parameters, drawn per trial.

An answer written from the catalog's text alone (the library's collector and policy, the
catalog's defaults: no exemption, the catalog's minimum, every region, any KMS key) fails
every drawn trial, judged with the project's own judge on a real moto server; the reference,
which reads the place the trial's requirement names, passes them.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from itbench_ciso.checks import cloud, cloudparams, cloudreference
from itbench_ciso.domain import CisoDomain
from itbench_ciso.oracle import reference
from itbench_ciso.spec import CisoSpec, CisoSubmission

from itbench import testing
from itbench.catalog import Catalog

from .conftest import judge, toolbox_and_task


def test_every_cloud_check_takes_parameters() -> None:
    assert set(cloudparams.CHECKS) == {c.id for c in cloud.CHECKS}


@pytest.mark.parametrize("check_id", sorted(cloudparams.CHECKS))
def test_the_catalogs_verdict_is_wrong_on_some_hidden_account_of_every_draw(
    check_id: str,
) -> None:
    """On every draw, some hidden account is judged otherwise by the catalog's predicate."""
    base = cloud.by_id(check_id)
    homes, texts = set(), set()
    for seed in range(24):
        org = cloudparams.draw(check_id, random.Random(seed))
        assert org is not None
        judged, prepare = org.derived()
        _, hidden = cloud.variants(check_id, seed, 3, 3, judged=judged, org=prepare)
        wrong = [v.name for v in hidden if base.violates(v.data) != (not v.compliant)]
        assert wrong, (check_id, seed)
        homes.add(org.home)
        texts.add(org.requirement())
        assert check_id not in org.requirement()
    assert len(homes) >= 2 and len(texts) >= 12


@pytest.mark.parametrize("check_id", sorted(cloudparams.EXEMPTIBLE))
def test_an_expired_exemption_and_a_decoys_exempt_nothing(check_id: str) -> None:
    org = cloudparams.draw(check_id, random.Random(5))
    assert org is not None and org.expired and org.active
    judged, prepare = org.derived()
    plan = cloud.clean_account()
    prepare(plan)
    kind = cloudparams.EXEMPTIBLE[check_id]
    assert not judged.violates(plan)
    for name in (org.expired[0], org.decoy_entries[0].name):
        spoiled = cloud.clean_account()
        prepare(spoiled)
        kind.spoil(spoiled, name)
        assert judged.violates(spoiled), name
    exempt = cloud.clean_account()
    prepare(exempt)
    kind.spoil(exempt, org.active[0])
    assert not judged.violates(exempt) and cloud.by_id(check_id).violates(exempt)


def test_a_document_lists_the_values_beside_a_marked_copy(tmp_path: Path) -> None:
    """The reference reads the named heading, not the marked one (drafts, older revisions)."""
    seen = 0
    for seed in range(40):
        org = cloudparams.draw("cloud-password-policy", random.Random(seed))
        assert org is not None
        if org.home != "document":
            continue
        seen += 1
        for rel, text in org.documents().items():
            (tmp_path / str(seed) / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / str(seed) / rel).write_text(text, encoding="utf-8")
            assert text.count(org.heading) == 2
        script = cloudreference.collector(org.check, org.requirement(), tmp_path / str(seed))
        assert f"{{'min_length': [{org.values[0]!r}]}}" in script
        assert org.decoy_values[0] in org.documents()[org.document]
    assert seen


def test_a_requirement_without_a_place_is_refused() -> None:
    with pytest.raises(cloudreference.ParamsError):
        cloudreference.collector(
            "cloud-password-policy", cloud.by_id("cloud-password-policy").requirement
        )


@pytest.mark.parametrize("scenario", sorted(f"ciso/{c}" for c in cloudparams.CHECKS))
def test_the_catalogs_answer_fails_and_the_reference_passes(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path, scenario: str
) -> None:
    spec = catalog.scenarios[scenario]
    assert isinstance(spec, CisoSpec)
    text_only = reference(spec)
    # One live draw per scenario (each its own): the 24 draws per check above cover the rest.
    for secret in (f"cloud-org-{scenario.replace('/', '-')}".encode(),):
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            assert requirement != spec.requirement
            right = reference(spec, requirement, task.workspace)
            passed = judge(domain, spec, env, ctx, right)
            fixed = judge(domain, spec, env, ctx, text_only)
        assert passed.passed, (secret, requirement, passed.details)
        assert fixed.metrics["evidence_collected"] == 1.0, fixed.details
        assert not fixed.passed, (secret, requirement)


def test_the_draft_object_is_not_the_organizations(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A collector reading the governance bucket's copy not in force fails."""
    spec = catalog.scenarios["ciso/cloud-iam-console-mfa"]
    assert isinstance(spec, CisoSpec)
    for i in range(12):
        secret = f"draft-{i}".encode()
        with testing.live_environment(
            domain, spec, tmp_path / str(i), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            found = re.search(r"JSON object `([^`]+)`", requirement)
            if found is None:
                continue
            org = cloudparams.draw(spec.check, random.Random(ctx.secret_seed("ciso:org")))
            assert org is not None and org.object_key == found.group(1)
            draft = requirement.replace(found.group(1), org.decoy_key)
            right = reference(spec, requirement, task.workspace)
            wrong = CisoSubmission(
                collector=cloudreference.collector(spec.check, draft), policy=right.policy
            )
            assert judge(domain, spec, env, ctx, right).passed
            assert not judge(domain, spec, env, ctx, wrong).passed
            return
    pytest.fail("no draw kept the exemptions in an object")
