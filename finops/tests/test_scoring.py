"""Scoring: every waste item counts, any harm fails, and the diagnosis needs its start date.

Most tests judge hand-made final states (no server); the issue's two worked cases run live.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from itbench_finops.domain import FinOpsDomain
from itbench_finops.prices import load_prices
from itbench_finops.scoring import SHARED, allocate, evaluate
from itbench_finops.seed import S3_SERVICE, Nat, Seeded
from itbench_finops.spec import FinOpsSpec, FinOpsSubmission, Recommendation
from itbench_finops.state import Item
from itbench_finops.trial import Trial

from itbench.catalog import Catalog

from .conftest import concrete_spec, live, toolbox_and_task

HOURS = 730
ACCOUNT = "123456789012"
PERIOD_START = datetime(2026, 11, 1, tzinfo=UTC)


def _trial(
    spec: FinOpsSpec,
    ids: dict[str, str],
    initial: dict[str, Item],
    final: dict[str, Item],
    submission: FinOpsSubmission | None,
    seeded: Seeded | None = None,
) -> Trial:
    return Trial(
        spec=spec,
        prices=load_prices(),
        ids=ids,
        initial=initial,
        final=final,
        rows=[],
        period_start=PERIOD_START,
        submission=submission,
        seeded=seeded or Seeded(ids=dict(ids)),
    )


def _recommend(catalog: Catalog) -> FinOpsSpec:
    return concrete_spec(
        catalog,
        "finops/rightsizing-recommend",
        {"etl-main": "idle", "render-1": "idle", "cache-3": "exempt", "bi-db": "memory_bound"},
        {"target_cpu": 80, "target_memory": 90},
    )


RECOMMEND_IDS = {
    "etl-main": "i-etl",
    "render-1": "i-render",
    "cache-3": "i-cache",
    "bi-db": "bi-db",
}


@pytest.mark.parametrize(
    ("chosen", "proximity"),
    [
        # 32 vCPU at a 10 % peak need 4 vCPU at 80 %, 128 GiB at 12 % need 17.1 GiB at 90 %.
        ("m5.2xlarge", 1.0),
        ("m5.4xlarge", 0.0),  # twice the optimal price
        ("r5.xlarge", 1 - abs(0.252 - 0.384) / 0.384),  # another family's price, no cheaper
    ],
)
def test_rightsizing_proximity_is_relative_distance_to_the_optimal_price(
    chosen: str, proximity: float, catalog: Catalog
) -> None:
    spec = _recommend(catalog)
    sub = FinOpsSubmission(
        recommendations=[
            Recommendation(resource_id="i-etl", recommended_type=chosen),
            Recommendation(resource_id="i-render", recommended_type="c5.xlarge"),
        ]
    )
    result = evaluate(_trial(spec, RECOMMEND_IDS, {}, {}, sub))
    assert result.details["targets"]["i-etl"]["proximity"] == pytest.approx(proximity, abs=1e-3)
    assert result.details["targets"]["i-render"]["proximity"] == 1.0
    assert result.passed is (chosen == "m5.2xlarge"), result.details
    assert result.metrics["items_total"] == 2


def test_rightsizing_counts_every_target_and_honours_leave_alone(catalog: Catalog) -> None:
    spec = _recommend(catalog)
    best = [
        Recommendation(resource_id="i-etl", recommended_type="m5.2xlarge"),
        Recommendation(resource_id="i-render", recommended_type="c5.xlarge"),
    ]
    result = evaluate(_trial(spec, RECOMMEND_IDS, {}, {}, FinOpsSubmission(recommendations=best)))
    assert result.passed, result.details
    assert result.metrics["optimal_savings_monthly"] == pytest.approx(
        ((1.536 - 0.384) + (0.68 - 0.17)) * HOURS, abs=0.01
    )
    one = evaluate(_trial(spec, RECOMMEND_IDS, {}, {}, FinOpsSubmission(recommendations=best[:1])))
    assert not one.passed and one.metrics["items_fixed"] == 1
    # The exempt cache keeps its size: recommending a change to it fails, however cheap.
    extra = [*best, Recommendation(resource_id="i-cache", recommended_type="r5.large")]
    result = evaluate(_trial(spec, RECOMMEND_IDS, {}, {}, FinOpsSubmission(recommendations=extra)))
    assert not result.passed and result.details["unwanted_recommendations"] == ["i-cache"]
    # Below the need (c5.large: 2 vCPU, 4 GiB for 2.8 vCPU): harm, named.
    low = [best[0], Recommendation(resource_id="i-render", recommended_type="c5.large")]
    result = evaluate(_trial(spec, RECOMMEND_IDS, {}, {}, FinOpsSubmission(recommendations=low)))
    assert not result.passed
    assert any("i-render (render-1): c5.large has 2 vCPU" in h for h in result.details["harm"])


def _group_state(desired: int, minimum: int, members: int | None = None) -> dict[str, Item]:
    group = {"min": minimum, "max": 40, "desired": desired, "template": "t"}
    items = {
        f"i-{k}": Item(
            "instance",
            f"i-{k}",
            f"i-{k}",
            ACCOUNT,
            {"type": "m5.large", "state": "running", "group": "web-tier"},
        )
        for k in range(desired if members is None else members)
    }
    group["members"] = sorted(items)  # type: ignore[assignment]
    return {"web-tier": Item("asg", "web-tier", "web-tier", ACCOUNT, group), **items}


def test_autoscaling_capacity_below_the_peak_need_is_harm(catalog: Catalog) -> None:
    spec = concrete_spec(
        catalog, "finops/autoscaling-web", {"web-tier": "oversized"}, {"target_cpu": 70}
    )
    ids = {"web-tier": "web-tier"}
    start = _group_state(10, 10)
    # Peak 5 busy vCPUs on 2-vCPU instances at 70 % needs ceil(5 / 1.4) = 4 instances.
    low = evaluate(_trial(spec, ids, start, _group_state(2, 1), FinOpsSubmission()))
    assert not low.passed and "below the recorded peak's need of 4" in low.details["harm"][0]
    right = evaluate(_trial(spec, ids, start, _group_state(4, 4), FinOpsSubmission()))
    assert right.passed, right.details
    assert right.metrics["optimal_savings_monthly"] == pytest.approx(6 * 0.096 * HOURS, abs=0.01)


def test_anomaly_diagnosis_needs_the_start_date(catalog: Catalog) -> None:
    spec = concrete_spec(
        catalog,
        "finops/anomaly-type-change",
        {"feature-store": "approved_other", "api-3": "steady"},
    )
    ids = {"feature-store": "i-0fs"}
    changed = (PERIOD_START + timedelta(days=spec.billing_days - 8)).date()
    good = FinOpsSubmission(
        account_id="210987654321",
        service="EC2",
        resource_id="i-0fs",
        resource_type="instance",
        cause="type_change",
        start_date=changed,
    )
    result = evaluate(_trial(spec, ids, {}, {}, good))
    assert result.passed and result.details["expected"]["start_date"] == changed.isoformat()
    for days, ok in ((1, True), (-1, True), (2, False), (-3, False)):
        moved = good.model_copy(update={"start_date": changed + timedelta(days=days)})
        result = evaluate(_trial(spec, ids, {}, {}, moved))
        assert result.passed is ok and result.metrics["diagnosis_start"] is ok, days
    for field, value in (
        ("cause", "new_resource"),
        ("resource_type", "Volume"),
        ("start_date", None),
    ):
        wrong = good.model_copy(update={field: value})
        assert not evaluate(_trial(spec, ids, {}, {}, wrong)).passed, field
    assert not evaluate(_trial(spec, ids, {}, {}, FinOpsSubmission(incident=False))).passed


def _volume(vid: str, vtype: str, size: int, iops: int, throughput: int, instance: str) -> Item:
    attrs = {
        "size": size,
        "volume_type": vtype,
        "iops": iops,
        "throughput": throughput,
        "instance": instance,
    }
    return Item("volume", vid, "pg-analytics", ACCOUNT, attrs)


def test_storage_needs_the_recorded_iops_and_throughput(catalog: Catalog) -> None:
    spec = concrete_spec(
        catalog,
        "finops/storage-volumes",
        {"pg-analytics": "gp2_busy", "kafka-1": "gp3", "git-server": "gp3"},
    )
    ids = {"pg-analytics": "i-pg"}
    seeded = Seeded(ids=dict(ids), data_volumes={"pg-analytics": ["vol-1"]})
    start = {"vol-1": _volume("vol-1", "gp2", 2000, 6000, 0, "i-pg")}

    def judge(iops: int, throughput: int) -> Any:
        final = {"vol-1": _volume("vol-1", "gp3", 2000, iops, throughput, "i-pg")}
        return evaluate(_trial(spec, ids, start, final, FinOpsSubmission(), seeded))

    # The busiest hour: 5200 IOPS and 210 MB/s; at most a tenth more of each.
    assert judge(5200, 210).passed
    default = judge(3000, 125)
    assert not default.passed
    harms = " | ".join(default.details["harm"])
    assert "3000 IOPS below its recorded peak of 5200" in harms
    assert "125 MB/s below its recorded peak of 210" in harms
    assert not judge(16000, 1000).passed  # paid for far more than the peak
    assert "to 5720" in judge(16000, 1000).details["items_missing"][0]


def _table(tid: str, routes: list[list[str]]) -> Item:
    return Item(
        "route_table", tid, tid, ACCOUNT, {"vpc": "vpc-1", "routes": routes, "subnets": ["s"]}
    )


def test_transfer_counts_endpoints_where_the_s3_traffic_is(catalog: Catalog) -> None:
    spec = concrete_spec(
        catalog,
        "finops/transfer-nat",
        {"egress-a": "s3_heavy", "egress-b": "external", "egress-c": "s3_remote"},
    )
    ids = {n: f"nat-{n[-1]}" for n in ("egress-a", "egress-b", "egress-c")}
    nats = {
        n: Nat(rid, "vpc-1", f"s-{rid}", f"rt-{rid}", f"eip-{rid}", f"eni-{rid}")
        for n, rid in ids.items()
    }
    seeded = Seeded(ids=dict(ids), nats=nats)
    start = {f"rt-{rid}": _table(f"rt-{rid}", [["0.0.0.0/0", rid]]) for rid in ids.values()}

    def with_endpoint(*rids: str) -> dict[str, Item]:
        final = {
            k: Item(v.kind, v.id, v.name, v.account, json.loads(json.dumps(v.attrs)))
            for k, v in start.items()
        }
        for rid in rids:
            final[f"rt-{rid}"].attrs["routes"].append(["pl-s3", "vpce-1"])
        final["vpce-1"] = Item(
            "gateway_endpoint",
            "vpce-1",
            "vpce-1",
            ACCOUNT,
            {"service": S3_SERVICE, "vpc": "vpc-1", "route_tables": [f"rt-{r}" for r in rids]},
        )
        return final

    right = evaluate(_trial(spec, ids, start, with_endpoint("nat-a"), FinOpsSubmission(), seeded))
    assert right.passed, right.details
    assert right.metrics["optimal_savings_monthly"] == pytest.approx(
        0.82 * 600 * 30 * 0.045, abs=0.01
    )
    # An endpoint for the subnet whose S3 traffic goes to another region reroutes it for
    # nothing: harm, even though the waste is fixed.
    blanket = evaluate(
        _trial(
            spec, ids, start, with_endpoint("nat-a", "nat-b", "nat-c"), FinOpsSubmission(), seeded
        )
    )
    assert not blanket.passed and blanket.metrics["items_fixed"] == 1
    assert len([h for h in blanket.details["harm"] if "gained routes" in h]) == 2


def test_allocation_splits_shared_costs_as_the_conventions_say() -> None:
    rows = [
        {"Tags": json.dumps({"team": "web"}), "ResourceName": "a", "BilledCost": 30.0},
        {"Tags": "{}", "ResourceName": "b", "BilledCost": 10.0},
        {"Tags": json.dumps({"cost-pool": "shared"}), "ResourceName": "nat", "BilledCost": 20.0},
    ]
    owners = {"b": "data"}
    assert allocate(rows, owners, "none") == {"web": 30.0, "data": 10.0, SHARED: 20.0}
    assert allocate(rows, owners, "even") == {"web": 40.0, "data": 20.0}
    assert allocate(rows, owners, "proportional") == {"web": 45.0, "data": 15.0}


def test_idle_orphans_two_of_six_and_a_type_change_fail_with_the_harm_listed(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The issue's first worked case: partial cleanup plus an in-use instance moved down."""
    forms = {
        "batch-07": "gone",
        "scratch-3": "old",
        "restore-tmp": "ticket_closed",
        "ip-web-2": "loose",
        "backup-2024": "old",
        "lb-api": "empty",
        "reporting-db": "month_end",
    }
    spec = concrete_spec(catalog, "finops/idle-orphans", forms)
    assert len(spec.truth.waste) == 6
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        ids = env.seeded.ids

        def call(op: str, **params: Any) -> Any:
            return toolbox.call("aws_call", service="ec2", operation=op, params=params)

        call("DeleteVolume", VolumeId=ids["scratch-3"])
        call("ReleaseAddress", AllocationId=ids["ip-web-2"])
        call("StopInstances", InstanceIds=[ids["web-02"]])
        call(
            "ModifyInstanceAttribute", InstanceId=ids["web-02"], InstanceType={"Value": "t3.micro"}
        )
        call("StartInstances", InstanceIds=[ids["web-02"]])
        result = domain.evaluate(spec, env, FinOpsSubmission(), toolbox, ctx)
        assert not result.passed
        assert (result.metrics["items_fixed"], result.metrics["items_total"]) == (2, 6)
        assert result.metrics["fixed_fraction"] == pytest.approx(2 / 6, abs=1e-3)
        assert result.details["harm"] == [
            f"instance {ids['web-02']} (web-02) changed type from m5.large to t3.micro"
        ]
        assert len(result.details["items_missing"]) == 4
        # The move saves about as much as the whole cleanup would: dollars decide nothing.
        assert result.metrics["savings_fraction"] > 0.9


def test_rightsizing_every_instance_including_the_busy_canary_fails_with_the_harm_listed(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The issue's second worked case: resizing everything, the canary upwards."""
    forms = {
        "api-main": "idle",
        "search-node": "memory_bound",
        "render-1": "canary",
        "etl-main": "busy",
    }
    spec = concrete_spec(
        catalog, "finops/rightsizing-ec2", forms, {"target_cpu": 80, "target_memory": 90}
    )
    new_types = {
        "api-main": "m5.xlarge",  # the one over-provisioned instance, to its optimum
        "api-canary": "m5.xlarge",  # the busy canary, up
        "search-node": "r5.xlarge",
        "render-1": "c5.xlarge",
        "etl-main": "m5.4xlarge",
        "cron-host": "t3.small",
    }
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        for name, itype in new_types.items():
            rid = env.seeded.ids[name]
            for op, extra in (
                ("StopInstances", {"InstanceIds": [rid]}),
                ("ModifyInstanceAttribute", {"InstanceId": rid, "InstanceType": {"Value": itype}}),
                ("StartInstances", {"InstanceIds": [rid]}),
            ):
                toolbox.call("aws_call", service="ec2", operation=op, params=extra)
        result = domain.evaluate(spec, env, FinOpsSubmission(), toolbox, ctx)
        assert not result.passed
        assert result.metrics["items_fixed"] == result.metrics["items_total"] == 1
        harms = result.details["harm"]
        canary = env.seeded.ids["api-canary"]
        assert f"instance {canary} (api-canary) changed type from m5.large to m5.xlarge" in harms
        assert result.metrics["harm_count"] == 5
        assert not any(env.seeded.ids["api-main"] in h for h in harms)


def test_idle_savings_and_timings_of_a_full_cleanup(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The oracle's cleanup: every item, the optimum saved, times to detect and mitigate."""
    spec = concrete_spec(catalog, "finops/idle-volumes", {"scratch-3": "old", "build-cache": "old"})
    # 500 GB and 400 GB of gp2.
    optimal = 500 * 0.10 + 400 * 0.10
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        submission = domain.oracle(spec, task, toolbox)
        result = domain.evaluate(spec, env, submission, toolbox, ctx)
        assert result.passed, result.details
        assert result.metrics["optimal_savings_monthly"] == pytest.approx(optimal, abs=0.01)
        assert result.metrics["savings_fraction"] == pytest.approx(1.0, abs=1e-4)
        assert result.metrics["action_calls"] == 2
        assert result.time_to_detect is not None and result.time_to_mitigate is not None
        assert 0 <= result.time_to_detect <= result.time_to_mitigate < spec.time_limit
        assert (
            date.fromisoformat(task.context["billing_export"]["period_end"])
            == env.seeded.now.date()
        )


def test_a_control_needs_what_explains_it_by_id_and_nothing_else(catalog: Catalog) -> None:
    """A constant "no incident" fails a control; naming exactly the explaining resources'
    ids passes; their names (public in the catalog), a missing or an extra id fail."""
    spec = concrete_spec(
        catalog, "finops/anomaly-control", {"trainer": "approved", "ml-exports": "steady"}
    )
    assert sorted(spec.truth.explained) == ["search-2", "trainer"]
    ids = {"search-2": "i-0search", "trainer": "i-0trainer", "ml-exports": "ml-exports"}

    def judged(sub: FinOpsSubmission) -> bool:
        return evaluate(_trial(spec, ids, {}, {}, sub)).passed

    assert judged(FinOpsSubmission(incident=False, explained_by=["i-0trainer", " i-0search"]))
    assert not judged(FinOpsSubmission(incident=False))
    assert not judged(FinOpsSubmission(incident=False, explained_by=["search-2", "trainer"]))
    assert not judged(FinOpsSubmission(incident=False, explained_by=["i-0search"]))
    assert not judged(
        FinOpsSubmission(incident=False, explained_by=["i-0search", "i-0trainer", "ml-exports"])
    )
    assert not judged(FinOpsSubmission(incident=True, explained_by=["i-0search", "i-0trainer"]))
    result = evaluate(_trial(spec, ids, {}, {}, FinOpsSubmission(incident=False)))
    assert result.metrics["explanation"] is False
    assert result.details["explained"]["missing"] == ["i-0search", "i-0trainer"]


def test_every_control_explains_itself_on_every_draw(catalog: Catalog) -> None:
    """No form of a control leaves nothing to explain (a constant answer would pass it)."""
    controls = [
        s for s in catalog.scenarios.values() if isinstance(s, FinOpsSpec) and not s.truth.incident
    ]
    assert len(controls) == 5
    for spec in controls:
        for candidate in spec.candidates:
            for form in candidate.keep_forms():
                drawn = concrete_spec(catalog, spec.id, {candidate.name: form})
                assert drawn.truth.explained, (spec.id, candidate.name, form)
