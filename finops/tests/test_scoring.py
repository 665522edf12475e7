"""Scoring from the account's final state: savings, proximity, harm, diagnosis and timings."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.prices import load_prices
from itbench_finops.scoring import Trial, evaluate
from itbench_finops.spec import FinOpsSpec, FinOpsSubmission, Recommendation
from itbench_finops.state import Item

from itbench.catalog import Catalog

from .conftest import live, toolbox_and_task

HOURS = 730


def _spec(catalog: Catalog, sid: str) -> FinOpsSpec:
    spec = catalog.scenarios[sid]
    assert isinstance(spec, FinOpsSpec)
    return spec


def _trial(
    spec: FinOpsSpec,
    ids: dict[str, str],
    initial: dict[str, Item],
    final: dict[str, Item],
    submission: FinOpsSubmission | None,
) -> Trial:
    return Trial(
        spec=spec,
        prices=load_prices(),
        ids=ids,
        initial=initial,
        final=final,
        rows=[],
        period_start=datetime(2026, 11, 1, tzinfo=UTC),
        submission=submission,
    )


@pytest.mark.parametrize(
    ("chosen", "proximity"),
    [
        ("m5.xlarge", 1.0),  # the optimum: 4 vCPU for a 10 % peak of 32 vCPU at 80 %
        ("c5.xlarge", 1 - abs(0.17 - 0.192) / 0.192),
        ("r5.xlarge", 1 - abs(0.252 - 0.192) / 0.192),
        ("m5.2xlarge", 0.0),  # twice the optimal price: 1 - |0.384 - 0.192| / 0.192
        ("m5.large", 0.0),  # too small for the peak: zero and harm
    ],
)
def test_rightsizing_proximity_is_relative_distance_to_the_optimal_price(
    chosen: str, proximity: float, catalog: Catalog
) -> None:
    spec = _spec(catalog, "finops/rightsizing-recommend")
    ids = {"etl-main": "i-etl", "render-1": "i-render"}
    sub = FinOpsSubmission(
        recommendations=[
            Recommendation(resource_id="i-etl", recommended_type=chosen),
            Recommendation(resource_id="i-render", recommended_type="c5.xlarge"),
        ]
    )
    result = evaluate(_trial(spec, ids, {}, {}, sub))
    # render-1: 16 vCPU at a 22 % peak needs 4.4 vCPU at 80 %: c5.2xlarge is optimal and
    # c5.xlarge (4 vCPU) is too small, so that target scores 0 whatever etl-main scores.
    assert result.metrics["proximity"] == pytest.approx(proximity / 2, abs=1e-4)
    assert not result.passed
    harms = " | ".join(result.details["harm"])
    assert "i-render: c5.xlarge has 4 vCPU" in harms
    assert ("i-etl: m5.large" in harms) is (chosen == "m5.large")
    assert result.metrics["harm_count"] == 1 + (chosen == "m5.large")


def test_rightsizing_recommendation_of_both_optima_passes_with_optimal_savings(
    catalog: Catalog,
) -> None:
    spec = _spec(catalog, "finops/rightsizing-recommend")
    ids = {"etl-main": "i-etl", "render-1": "i-render"}
    sub = FinOpsSubmission(
        recommendations=[
            Recommendation(resource_id="i-etl", recommended_type="m5.xlarge"),
            Recommendation(resource_id="i-render", recommended_type="c5.2xlarge"),
        ]
    )
    result = evaluate(_trial(spec, ids, {}, {}, sub))
    assert result.passed, result.details
    assert result.metrics["proximity"] == 1.0
    want = ((1.536 - 0.192) + (0.68 - 0.34)) * HOURS
    assert result.metrics["optimal_savings_monthly"] == pytest.approx(want, abs=0.01)
    # Recommending changes nothing in the account: nothing is saved yet.
    assert result.metrics["savings_monthly"] == 0


def test_autoscaling_capacity_below_the_peak_need_is_harm(catalog: Catalog) -> None:
    spec = _spec(catalog, "finops/autoscaling-m5-large-20-5-10")
    group = {"min": 20, "max": 40, "desired": 20, "template": "t"}

    def state(**attrs: int) -> dict[str, Item]:
        """The group and its running members (the members carry the cost)."""
        g = {**group, **attrs}
        members = {
            f"i-{k}": Item(
                "instance",
                f"i-{k}",
                f"i-{k}",
                "123456789012",
                {"type": "m5.large", "state": "running", "group": "web-tier"},
            )
            for k in range(g["desired"])
        }
        return {"web-tier": Item("asg", "web-tier", "web-tier", "123456789012", g), **members}

    ids = {"web-tier": "web-tier"}
    # Peak 10 busy vCPUs on 2-vCPU instances at 70 % needs ceil(10 / 1.4) = 8 instances.
    low = evaluate(_trial(spec, ids, state(), state(min=1, desired=4), FinOpsSubmission()))
    assert not low.passed
    assert low.metrics["harm_count"] == 1
    assert "below the recorded peak's need of 8" in low.details["harm"][0]
    right = evaluate(_trial(spec, ids, state(), state(min=8, desired=8), FinOpsSubmission()))
    assert right.passed, right.details
    assert right.metrics["savings_fraction"] == 1.0
    assert right.metrics["optimal_savings_monthly"] == pytest.approx(12 * 0.096 * HOURS, abs=0.01)
    half = evaluate(_trial(spec, ids, state(), state(min=8, desired=14), FinOpsSubmission()))
    assert not half.passed
    assert half.metrics["savings_fraction"] == 0.5


def test_anomaly_diagnosis_needs_account_service_resource_and_cause(catalog: Catalog) -> None:
    spec = _spec(catalog, "finops/anomaly-type-change")
    ids = {"feature-store": "i-0fs"}
    good = FinOpsSubmission(
        account_id="210987654321",
        service="EC2",
        resource_id="i-0fs",
        resource_type="instance",
        cause="type_change",
    )
    result = evaluate(_trial(spec, ids, {}, {}, good))
    assert result.passed and result.metrics["diagnosis"] is True
    wrong_type = good.model_copy(update={"resource_type": "Volume"})
    result = evaluate(_trial(spec, ids, {}, {}, wrong_type))
    assert not result.passed and result.metrics["diagnosis_resource_type"] is False
    wrong_cause = good.model_copy(update={"cause": "usage_spike"})
    result = evaluate(_trial(spec, ids, {}, {}, wrong_cause))
    assert not result.passed
    assert result.metrics["diagnosis"] is False
    assert result.metrics["diagnosis_resource"] is True
    assert result.metrics["diagnosis_cause"] is False
    no_incident = FinOpsSubmission(incident=False)
    assert not evaluate(_trial(spec, ids, {}, {}, no_incident)).passed


def test_idle_savings_fraction_comes_from_the_price_table(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Partial cleanup scores a partial fraction; the full one passes with its timings."""
    spec = _spec(catalog, "finops/idle-plain")
    # 400 GB gp2, 250 GB io1 with 1000 IOPS, two addresses, one load balancer.
    optimal = 400 * 0.10 + (250 * 0.125 + 1000 * 0.065) + 2 * 0.005 * HOURS + 0.0225 * HOURS
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        toolbox.call(
            "aws_call",
            service="ec2",
            operation="DeleteVolume",
            params={"VolumeId": env.seeded.ids["build-cache"]},
        )
        partial = domain.evaluate(spec, env, FinOpsSubmission(), toolbox, ctx)
        assert not partial.passed
        assert partial.metrics["savings_monthly"] == pytest.approx(40.0, abs=0.01)
        assert partial.metrics["optimal_savings_monthly"] == pytest.approx(optimal, abs=0.01)
        assert partial.metrics["savings_fraction"] == pytest.approx(40.0 / optimal, abs=1e-4)
        assert partial.metrics["waste_remaining"] == 4
        assert partial.time_to_mitigate is None  # timings only for passed trials

        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        spec_rest = spec.model_copy(
            update={
                "truth": spec.truth.model_copy(
                    update={"removable": [n for n in spec.truth.removable if n != "build-cache"]}
                )
            }
        )
        submission = domain.oracle(spec_rest, task, toolbox)
        result = domain.evaluate(spec, env, submission, toolbox, ctx)
        assert result.passed, result.details
        assert result.metrics["savings_fraction"] == pytest.approx(1.0, abs=1e-4)
        assert result.metrics["action_calls"] == 4
        assert result.time_to_detect is not None and result.time_to_mitigate is not None
        assert 0 <= result.time_to_detect <= result.time_to_mitigate < spec.time_limit
