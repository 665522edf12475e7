"""Catalog scenarios: noop fails them and the oracle passes them (one environment each).

Each scenario runs one draw of its own (a fixed secret, so a failure replays); the suite runs
one scenario of each family plus controls, and the whole catalog is `itbench validate
'finops/*'` (or this module with ITBENCH_FINOPS_ALL=1).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.families import FAMILIES
from itbench_finops.spec import FinOpsSpec

from itbench import testing
from itbench.catalog import Catalog, ScenarioLoader

from .conftest import CATALOG, live, toolbox_and_task

#: One scenario per family (each exercising something the others do not), plus controls.
REPRESENTATIVE = [
    "finops/anomaly-nat",  # a NAT gateway's processed data in a member account
    "finops/idle-orphans",  # every idle kind, tickets, allowlists, DR lists
    "finops/idle-control",  # no incident: look-alikes only
    "finops/rightsizing-recommend",  # instances and a database, recommendation only
    "finops/storage-mixed",  # gp2 volumes to gp3 with IOPS and throughput, bucket rules
    "finops/transfer-accounts",  # S3 gateway endpoints in member accounts
    "finops/budget-teams",  # team budgets with filters, the endpoint's Budgets operations
    "finops/allocation-attached",  # tagging through attachments, shared costs
    "finops/commitment-reserved",  # reservations from the export's commitment columns
]
_ALL = sorted(ScenarioLoader({"finops": FinOpsDomain()}).load([CATALOG]).scenarios)
_IDS = _ALL if os.environ.get("ITBENCH_FINOPS_ALL") == "1" else REPRESENTATIVE


def test_catalog_is_valid_and_covers_every_family(catalog: Catalog) -> None:
    assert not catalog.errors, [e.line() for e in catalog.errors]
    families = {s.family for s in catalog.scenarios.values() if isinstance(s, FinOpsSpec)}
    assert families == set(FAMILIES)
    assert set(REPRESENTATIVE) <= set(catalog.scenarios)
    assert [s.id for s in catalog.scenarios.values() if "smoke" in s.tags] == [
        "finops/idle-orphans"
    ]
    assert all(s.facets() == {"family": s.family} for s in catalog.scenarios.values())  # type: ignore[attr-defined]


@pytest.mark.parametrize("sid", _IDS)
def test_noop_fails_and_oracle_passes(
    sid: str, domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    with testing.trial_context(tmp_path / "draw", secret=sid.encode()) as ctx:
        spec, drawn = domain.draw(catalog.scenarios[sid], ctx)  # type: ignore[arg-type]
    assert isinstance(spec, FinOpsSpec) and not spec.candidates
    with live(domain, spec, tmp_path) as (env, ctx):
        # noop makes no call and changes nothing, so the same account then serves the oracle.
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        noop = domain.evaluate(spec, env, None, toolbox, ctx)
        assert not noop.passed, noop
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        submission = domain.oracle(spec, task, toolbox)
        result = domain.evaluate(spec, env, submission, toolbox, ctx)
        assert result.passed, (drawn, result.metrics, result.details)
        assert result.metrics["harm_count"] == 0
