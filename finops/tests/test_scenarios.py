"""Catalog scenarios: noop fails them and the oracle passes them (one environment each).

The suite runs one scenario of each family plus the controls; the whole catalog is
`itbench validate 'finops/*'` (or this module with ITBENCH_FINOPS_ALL=1).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.spec import FinOpsSpec

from itbench.catalog import Catalog, ScenarioLoader

from .conftest import CATALOG, live, toolbox_and_task

FAMILIES = {"anomaly", "idle", "rightsizing", "budget", "autoscaling", "allocation", "commitment"}
#: One scenario per family (each exercising something the others do not), plus controls.
REPRESENTATIVE = [
    "finops/anomaly-egress-spike",  # usage spike in a member account's bucket
    "finops/idle-member-accounts",  # remediation across member accounts
    "finops/idle-control",  # no incident: look-alikes only
    "finops/rightsizing-recommend",  # recommendation without changes
    "finops/budget-subscriber",  # the endpoint's added Budgets operations
    "finops/autoscaling-control",  # no incident in another family
    "finops/allocation-accounts",  # tagging databases and buckets in member accounts
    "finops/commitment-general-m5-2xlarge-m5-xlarge",  # hourly billing rows
]
_ALL = sorted(ScenarioLoader({"finops": FinOpsDomain()}).load([CATALOG]).scenarios)
_IDS = _ALL if os.environ.get("ITBENCH_FINOPS_ALL") == "1" else REPRESENTATIVE


def test_catalog_is_valid_and_covers_every_family(catalog: Catalog) -> None:
    assert not catalog.errors, [e.line() for e in catalog.errors]
    assert len(catalog.scenarios) >= 20
    families = {s.family for s in catalog.scenarios.values() if isinstance(s, FinOpsSpec)}
    assert families == FAMILIES
    assert set(REPRESENTATIVE) <= set(catalog.scenarios)
    assert [s.id for s in catalog.scenarios.values() if "smoke" in s.tags] == ["finops/idle-plain"]


@pytest.mark.parametrize("sid", _IDS)
def test_noop_fails_and_oracle_passes(
    sid: str, domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios[sid]
    assert isinstance(spec, FinOpsSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        # noop makes no call and changes nothing, so the same account then serves the oracle.
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        noop = domain.evaluate(spec, env, None, toolbox, ctx)
        assert not noop.passed, noop
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        submission = domain.oracle(spec, task, toolbox)
        result = domain.evaluate(spec, env, submission, toolbox, ctx)
        assert result.passed, (result.metrics, result.details)
        assert result.metrics["harm_count"] == 0
