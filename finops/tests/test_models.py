"""Spec validation, the price table and billing generation without a server."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import get_args

from itbench_finops.billing import FOCUS_COLUMNS, BillItem, focus_rows, to_csv
from itbench_finops.domain import FinOpsDomain
from itbench_finops.families import FAMILIES, Family
from itbench_finops.optimum import best_commitment, best_type, commitment_savings
from itbench_finops.prices import load_prices
from itbench_finops.spec import FinOpsSpec

from itbench.catalog import Catalog, ScenarioLoader
from itbench.plugins import make_plugin_manager


def test_plugin_registers_the_domain() -> None:
    host = make_plugin_manager()
    domains = [d for _, d in host.call_list("itbench_register_domains")]
    assert "finops" in {d.name for d in domains}


def test_bad_scenario_names_file_field_and_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "domain: finops\nfamily: idle\ngoal: g\ntask_types: [detection]\n"
        "resources:\n  - {kind: volume, name: v1, size: 10}\n"
        "truth: {waste: [v2]}\n"
    )
    errors = ScenarioLoader({"finops": FinOpsDomain()}).load_file(bad)
    line = errors[0].line()  # type: ignore[union-attr]
    assert "bad.yaml" in line and "unknown resources: v2" in line
    bad.write_text(
        "domain: finops\nfamily: idle\ngoal: g\ntask_types: [detection]\nresources: [{kind: volume, name: v, size: -1}]\ntruth: {}\n"
    )
    line = ScenarioLoader({"finops": FinOpsDomain()}).load_file(bad)[0].line()  # type: ignore[union-attr]
    assert "resources.0.volume.size" in line
    bad.write_text(
        "domain: finops\nfamily: rightsizing\ngoal: g\ntask_types: [detection]\nresources:\n"
        "  - {kind: instance, name: a, instance_type: m5.huge}\n"
        "  - {kind: address, name: ip, instance: b}\n"
        "truth: {waste: [ip]}\n"
    )
    line = ScenarioLoader({"finops": FinOpsDomain()}).load_file(bad)[0].line()  # type: ignore[union-attr]
    assert "bad.yaml" in line
    assert "resource 'a': instance_type 'm5.huge' is not in the price table" in line
    assert "resource 'ip': instance 'b' is not an instance" in line
    assert "truth.waste: 'ip' is a address; family rightsizing fixes instance, database" in line
    bad.write_text(
        "domain: finops\nfamily: idle\ngoal: g\ntask_types: [detection]\n"
        "documents: [{key: a.md, page: no-such-page}]\ntruth: {}\n"
    )
    line = ScenarioLoader({"finops": FinOpsDomain()}).load_file(bad)[0].line()  # type: ignore[union-attr]
    assert "no shipped page 'no-such-page' (pages: allowlisted-ips, anomalies" in line


def test_errors_from_closed_sets_list_the_valid_values(tmp_path: Path) -> None:
    """An author who names an unknown value reads which values there are."""
    head = "domain: finops\ngoal: g\n"
    cases = {
        "family: waste\ntask_types: [detection]\ntruth: {}\n": [
            "'anomaly', 'forecast', 'idle', 'rightsizing'"
        ],
        "family: idle\ntask_types: [fixing]\ntruth: {}\n": [
            "unknown task type(s) 'fixing'",
            "(valid: detection, localization, diagnosis, mitigation)",
        ],
        "family: idle\ntask_types: [detection]\nresources: [{kind: disk, name: a}]\ntruth: {}\n": [
            "expected tags: 'instance', 'volume'"
        ],
        "family: idle\ntask_types: [detection]\n"
        "resources: [{kind: volume, name: a, size: 1, volume_type: gp9}]\ntruth: {}\n": [
            "volume_type 'gp9' is not in the price table (priced: gp2, gp3, io1"
        ],
        "family: anomaly\ntask_types: [diagnosis]\nresources: [{kind: volume, name: a, size: 1}]\n"
        "truth: {resource: a, service: ebs, cause: spike, account: '111111111111'}\n": [
            "cause 'spike' is not a cause of family anomaly (one of: new_resource, "
            "type_change, usage_spike)",
            "service 'ebs' is unknown (one of: ec2_compute, ec2_other, elb, rds, s3)",
            "truth.account '111111111111' is not an account of the scenario (one of: 123456789012)",
        ],
        "family: budget\ntask_types: [detection]\ntruth: {cause: amount}\n": [
            "family budget needs truth.budgets"
        ],
        "family: idle\ntask_types: [detection]\ntruth: {incident: false}\n": [
            "a control (truth.incident: false) needs truth.explained"
        ],
        "family: idle\ntask_types: [detection]\ntruth: {incident: false, explained: [b]}\n"
        "resources: [{kind: bucket, name: a}]\n": ["truth.explained names unknown resources: b"],
        "family: storage\ntask_types: [detection]\ntruth: {waste: [a], storage_class: GLACIER_X}\n"
        "resources: [{kind: bucket, name: a}]\n": [
            "truth.storage_class 'GLACIER_X' is not priced (one of: STANDARD, STANDARD_IA"
        ],
    }
    bad = tmp_path / "bad.yaml"
    loader = ScenarioLoader({"finops": FinOpsDomain()})
    for body, phrases in cases.items():
        bad.write_text(head + body)
        errors = loader.load_file(bad)
        assert not isinstance(errors[0], FinOpsSpec), body
        line = errors[0].line()
        for phrase in phrases:
            assert phrase in line, (phrase, line)
    bad.write_text(
        head + "family: budget\ntask_types: [detection]\n"
        "resources: [{kind: bucket, name: a}]\ntruth: {incident: false, explained: [a]}\n"
    )
    assert isinstance(loader.load_file(bad)[0], FinOpsSpec)  # a control needs no budget


def test_reference_is_generated_from_the_tables() -> None:
    """Every family, resource kind, priced type and service key appears in the reference."""
    text = FinOpsDomain().reference()
    prices = load_prices()
    assert set(get_args(Family)) == set(FAMILIES)
    for family, rule in FAMILIES.items():
        assert f"### `{family}`" in text
        assert all(f"`{c}`" in text for c in rule.causes)
    for kind in ("instance", "volume", "asg", "budget", "nat_gateway"):
        assert f"| `{kind}` |" in text
    for name in [*prices.instance_types(), *prices.database_classes(), *prices.raw["services"]]:
        assert f"| `{name}` |" in text
    assert "`task_types` takes these values: `detection`" in text


def test_price_table_drives_rightsizing_and_service_names() -> None:
    prices = load_prices()
    assert best_type(prices, "m5.4xlarge", 3.0) == "m5.xlarge"
    assert prices.service_key("Amazon Simple Storage Service") == "s3"
    assert prices.service_key("EC2") == "ec2_compute"


def test_best_commitment_is_the_steady_floor() -> None:
    usage = [1.0] * 100 + [3.0] * 40
    best, saved = best_commitment(usage, 0.28)
    assert abs(best - 0.72) < 1e-9
    assert saved > commitment_savings(usage, 1.2, 0.28)


#: The columns a FOCUS 1.0 cost and usage dataset carries.
FOCUS_1_0 = set(
    [
        "AvailabilityZone",
        "BilledCost",
        "BillingAccountId",
        "BillingAccountName",
        "BillingCurrency",
        "BillingPeriodEnd",
        "BillingPeriodStart",
        "ChargeCategory",
        "ChargeClass",
        "ChargeDescription",
        "ChargeFrequency",
        "ChargePeriodEnd",
        "ChargePeriodStart",
        "CommitmentDiscountCategory",
        "CommitmentDiscountId",
        "CommitmentDiscountName",
        "CommitmentDiscountStatus",
        "CommitmentDiscountType",
        "ConsumedQuantity",
        "ConsumedUnit",
        "ContractedCost",
        "ContractedUnitPrice",
        "EffectiveCost",
        "InvoiceIssuerName",
        "ListCost",
        "ListUnitPrice",
        "PricingCategory",
        "PricingQuantity",
        "PricingUnit",
        "ProviderName",
        "PublisherName",
        "RegionId",
        "RegionName",
        "ResourceId",
        "ResourceName",
        "ResourceType",
        "ServiceCategory",
        "ServiceName",
        "SkuId",
        "SkuPriceId",
        "SubAccountId",
        "SubAccountName",
        "Tags",
    ]
)


def test_focus_rows_price_every_day() -> None:
    prices = load_prices()
    line = BillItem(
        "i-1",
        "a",
        "123456789012",
        "ec2_compute",
        "Instance",
        "BoxUsage:m5.large",
        "Hours",
        0.096,
        [24.0] * 30,
    )
    rows = focus_rows([line], prices, date(2026, 11, 1), "123456789012", {})
    assert len(rows) == 30
    assert all(set(r) == set(FOCUS_COLUMNS) for r in rows)
    header = to_csv(rows).decode().splitlines()[0].split(",")
    assert set(header) >= FOCUS_1_0, FOCUS_1_0 - set(header)
    assert rows[0]["AvailabilityZone"] == "us-east-1a"
    assert rows[0]["ChargeFrequency"] == "Usage-Based"
    assert abs(sum(r["BilledCost"] for r in rows) - 0.096 * 24 * 30) < 1e-6
    hourly = focus_rows([line], prices, date(2026, 11, 1), "123456789012", {}, hourly=True)
    assert len(hourly) == 720


#: Words that would tell an agent which resource is the planted fault.
TELLTALE = {
    "idle",
    "orphan",
    "orphaned",
    "unused",
    "unattached",
    "waste",
    "stale",
    "old",
    "legacy",
    "spare",
    "zombie",
    "junk",
    "leak",
    "obsolete",
    "deprecated",
    "unneeded",
    "poc",
    "demo",
    "fault",
    "anomaly",
    "spike",
    "big",
    "oversized",
    "overprovisioned",
    "misconfigured",
    "wrong",
    "removable",
    "delete",
    "remove",
    "target",
    "incident",
}


def telltales(text: str) -> set[str]:
    """Telltale words among the alphabetic tokens of ``text``."""
    return set(re.split(r"[^a-z]+", text.lower())) & TELLTALE


def test_no_resource_name_or_tag_in_the_catalog_names_its_fault(catalog: Catalog) -> None:
    """Names and tags of every resource, in every form a trial may draw."""
    found = []
    for sid, spec in sorted(catalog.scenarios.items()):
        assert isinstance(spec, FinOpsSpec)
        for r in spec.all_forms():
            texts = [r.name, *r.tags, *r.tags.values()]
            texts += [a.name for a in spec.accounts]
            for text in texts:
                if telltales(text):
                    found.append(f"{sid}: {text!r}")
    assert not found, found
    assert telltales("lb-old-api") == {"old"}  # the check itself bites


_REGION_CHECK = """
import boto3.session
from itbench_finops import endpoint

original = boto3.session.Session.get_available_regions
keys = [
    (service, partition, False)
    for service in ("ec2", "elb", "elbv2", "rds", "autoscaling", "cloudwatch", "no-such")
    for partition in ("aws", "aws-cn")
] + [("s3", "aws", True)]
want = [original(boto3.session.Session(), *k) for k in keys]
endpoint.cache_region_lists()
got = [boto3.session.Session().get_available_regions(*k) for k in keys]
assert got == want, [k for k, g, w in zip(keys, got, want) if g != w]
assert "us-east-1" in got[0]
print("ok")
"""


def test_endpoint_region_cache_answers_as_botocore_does() -> None:
    """The endpoint's shortcut for moto's region lists changes no answer (own process)."""
    out = subprocess.run(
        [sys.executable, "-c", _REGION_CHECK], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_controls_and_variants_read_like_the_rest_of_their_family(catalog: Catalog) -> None:
    """A control's task view (goal, task types, time) is that of a scenario with a fault."""
    faulty: dict[str, set[tuple[str, tuple[str, ...], float]]] = {}
    controls = []
    for spec in catalog.scenarios.values():
        assert isinstance(spec, FinOpsSpec)
        view = (spec.goal, tuple(spec.task_types), spec.time_limit)
        if spec.truth.incident:
            faulty.setdefault(spec.family, set()).add(view)
        else:
            controls.append((spec.id, spec.family, view))
    assert len(controls) >= 3
    for sid, family, view in controls:
        assert view in faulty[family], sid
    # Every idle scenario states the whole cleanup policy, not only the rules its waste breaks.
    assert len(faulty["idle"]) == 1


def test_scenarios_of_the_first_catalog_still_load(tmp_path: Path) -> None:
    """Community packs written for the first catalog keep working: old truth fields map."""
    head = "domain: finops\ngoal: g\ntask_types: [detection]\n"
    cases = {
        "family: idle\nresources: [{kind: volume, name: v, size: 1}]\ntruth: {removable: [v]}\n": (
            "waste",
            ["v"],
        ),
        "family: rightsizing\nresources: [{kind: instance, name: i, instance_type: m5.large}]\n"
        "truth: {targets: [i]}\n": ("waste", ["i"]),
        "family: budget\ntruth: {budget: {kind: budget, name: b, amount: 5}}\n": ("budgets", 1),
    }
    loader = ScenarioLoader({"finops": FinOpsDomain()})
    path = tmp_path / "old.yaml"
    for body, (field, want) in cases.items():
        path.write_text(head + body)
        (spec,) = loader.load_file(path)
        assert isinstance(spec, FinOpsSpec), spec.line()  # type: ignore[union-attr]
        got = getattr(spec.truth, field)
        assert (len(got) if isinstance(want, int) else got) == want, body
