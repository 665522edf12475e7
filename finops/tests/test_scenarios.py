"""Every catalog scenario: noop fails it and the oracle passes it (one environment each)."""

from __future__ import annotations

from pathlib import Path

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.spec import FinOpsSpec

from itbench.registry import Catalog, ScenarioLoader

from .conftest import CATALOG, live, toolbox_and_task

FAMILIES = {"anomaly", "idle", "rightsizing", "budget", "autoscaling", "allocation", "commitment"}
_IDS = sorted(ScenarioLoader({"finops": FinOpsDomain()}).load([CATALOG]).scenarios)


def test_catalog_is_valid_and_covers_every_family(catalog: Catalog) -> None:
    assert not catalog.errors, [e.line() for e in catalog.errors]
    assert len(catalog.scenarios) >= 20
    families = {s.family for s in catalog.scenarios.values() if isinstance(s, FinOpsSpec)}
    assert families == FAMILIES


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
