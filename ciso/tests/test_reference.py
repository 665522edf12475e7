"""The generated reference, the family contracts and spec errors that list the valid values."""

from __future__ import annotations

import re
from typing import Any, get_args

import pytest
from itbench_ciso.checks import FAMILIES, all_checks, ids_of
from itbench_ciso.contracts import CONTRACTS
from itbench_ciso.domain import CisoDomain
from itbench_ciso.oracle import reference
from itbench_ciso.spec import CisoSpec, CisoSubmission, Family
from pydantic import ValidationError

from itbench.catalog import Catalog

BASE: dict[str, Any] = {"id": "ciso/t", "domain": "ciso", "task_types": ["policy-generation"]}


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        CisoSpec.model_validate({**BASE, **data})
    return str(caught.value)


def test_an_unknown_check_is_rejected_with_the_family_s_check_ids() -> None:
    text = _error({"family": "linux", "check": "linux-ssh-rootlogin"})
    assert "unknown check 'linux-ssh-rootlogin'; valid checks of family 'linux': " in text
    assert all(cid in text for cid in ids_of("linux"))
    assert not any(cid in text for cid in ids_of("kubernetes") + ids_of("cloud"))
    update = _error({"family": "policy-update", "check": "k8s-nope"})
    assert "family 'policy-update' (the kubernetes checks)" in update
    assert all(cid in update for cid in ids_of("kubernetes"))


def test_without_a_valid_family_every_check_id_is_listed_by_family() -> None:
    text = _error({"family": "mainframe", "check": "nope"})
    assert "unknown check 'nope'; valid checks by family: kubernetes: k8s-host-namespaces" in text
    assert all(cid in text for cid in all_checks())


def test_a_family_mismatch_names_the_family_of_the_check() -> None:
    text = _error({"family": "cloud", "check": "linux-umask"})
    assert "check 'linux-umask' belongs to family 'linux', not 'cloud'" in text
    assert all(cid in text for cid in ids_of("cloud"))
    in_set = _error(
        {
            "family": "policy-update",
            "check": "k8s-host-network",
            "policy_set": ["k8s-host-pid", "linux-umask"],
            "changed": "k8s-host-pid",
        }
    )
    assert "policy_set: check 'linux-umask' belongs to family 'linux', not 'kubernetes'" in in_set
    changed = _error(
        {
            "family": "policy-update",
            "check": "k8s-host-network",
            "policy_set": ["k8s-host-pid", "k8s-privileged"],
            "changed": "k8s-host-ipc",
        }
    )
    assert "naming one id of `policy_set` (k8s-host-pid, k8s-privileged)" in changed


def test_the_reference_lists_every_check_with_its_family_and_submission() -> None:
    text = CisoDomain().reference()
    library = text.split("## Check library", 1)[1].split("## Submission fields", 1)[0]
    rows = dict(re.findall(r"^\| `([\w-]+)` \| (\w+) \| .+ \|$", library, re.MULTILINE))
    assert rows == {cid: check.family for cid, check in all_checks().items()}
    for family in FAMILIES:
        part = library.split(f"### {family}\n", 1)[1].split("\n### ", 1)[0]
        for contract in CONTRACTS.values():
            said = f"`{contract.name}` submits {contract.submission_text()}"
            assert (said in part) == (contract.checks == family)
    assert "`linux` submits `playbook` and `policy`" in library
    assert "`cloud` submits `policy` and either `collector` or `playbook`" in library
    families = text.split("## Scenario families", 1)[1].split("## Check library", 1)[0]
    for contract in CONTRACTS.values():
        assert f"### `{contract.name}`" in families
        assert " ".join(contract.contract.split()) in families
    assert "`task_types` takes these values: `policy-generation`" in text


def test_the_contracts_match_the_spec_the_submission_and_the_oracle(catalog: Catalog) -> None:
    assert list(CONTRACTS) == list(get_args(Family))
    fields = set(CisoSubmission.model_fields)
    for contract in CONTRACTS.values():
        assert contract.checks in FAMILIES
        assert set(contract.fields()) <= fields
        assert all(f"`{name}`" in contract.contract for name in contract.fields())
    specs = [s for s in catalog.scenarios.values() if isinstance(s, CisoSpec)]
    assert {s.family for s in specs} == set(CONTRACTS)
    for spec in specs:
        assert set(spec.task_types) <= set(CisoDomain.task_types), spec.id
        sub = reference(spec).model_dump()
        groups = CONTRACTS[spec.family].submit
        assert all(any(sub[name] for name in group) for group in groups), spec.id
        read = set(CONTRACTS[spec.family].fields())
        assert not any(value for name, value in sub.items() if name not in read | {"notes"})
