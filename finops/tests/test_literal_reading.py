"""Following the served handbook literally reaches the judge's optimum, in every family.

Each case draws a trial from a run's secret, sets its environment up, reads the handbook the
agent gets from the bucket (in whichever wording the trial serves), applies the rules as they
are written to what the account shows, and compares the result with what the judge scores:
the waste, the optimal sizes, the recorded peaks, the needed capacity, the commitment's
exclusions, the policy's values. Nothing of the draw is read back: values, tag keys and which
rule wins come from the text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from itbench_finops.conventions import table
from itbench_finops.domain import FinOpsDomain
from itbench_finops.environment import FinOpsEnvironment
from itbench_finops.optimum import (
    needed_capacity,
    rightsizing_target,
    volume_iops_need,
    volume_throughput_need,
)
from itbench_finops.prices import GP3_IOPS, GP3_THROUGHPUT, load_prices
from itbench_finops.server import MANAGEMENT_ACCOUNT
from itbench_finops.spec import (
    Address,
    AutoScalingGroup,
    Bucket,
    Budget,
    Database,
    FinOpsSpec,
    Instance,
    LoadBalancer,
    NatGateway,
    Snapshot,
    Truth,
    Volume,
)

from itbench import testing
from itbench.catalog import Catalog

from .conftest import live

#: Runs' secrets: each draws other conventions, wordings and forms.
SECRETS = (b"literal-1", b"literal-2", b"literal-3")
_PIECE = re.compile(r"(\$\{[A-Za-z_][A-Za-z0-9_.]*\})")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def read_rule(rule: str, text: str) -> dict[str, str]:
    """The values one rule of the handbook states, read from ``text`` in any of its wordings.

    Raises:
        AssertionError: no wording of the rule, or more than one, is in the text.
    """
    found = []
    for phrasing in table()["wordings"][rule]:
        pattern, seen = "", set()
        for piece in _PIECE.split(" ".join(phrasing.split())):
            if _PIECE.fullmatch(piece):
                group = piece[2:-1].replace(".", "__")
                pattern += f"(?P={group})" if group in seen else f"(?P<{group}>.+?)"
                seen.add(group)
            else:
                pattern += re.escape(piece).replace(r"\ ", r"\s+")
        m = re.search(pattern, text)
        if m:
            found.append({k: v.strip("`") for k, v in m.groupdict().items()})
    assert len(found) == 1, f"rule {rule}: {len(found)} wordings served in:\n{text}"
    return found[0]


def rows(text: str) -> list[list[str]]:
    """The body rows of the Markdown tables of ``text`` (cells stripped, headers left out)."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip().startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set("".join(cells)) <= set("-: "):
            out.pop()  # the row above a separator is the header
        else:
            out.append(cells)
    return out


def listed(text: str, heading: str) -> set[str]:
    """The bullet names under the paragraph that starts with ``heading``."""
    after = text.split(heading, 1)[1]
    block = after.split("\n\n", 1)[0]
    return {line[2:].strip() for line in block.splitlines() if line.startswith("- ")}


def day(value: str) -> date:
    m = _DATE.search(value)
    assert m, f"no date in {value!r}"
    return date.fromisoformat(m.group(0))


@dataclass
class Served:
    """What the agent can read of one trial: the handbook and the account's resources."""

    spec: FinOpsSpec
    env: FinOpsEnvironment
    pages: dict[str, str]
    today: date
    tags: dict[str, dict[str, str]] = field(default_factory=dict)

    def page(self, key: str) -> str:
        return self.pages[key]


def _tags(env: FinOpsEnvironment) -> dict[str, dict[str, str]]:
    """Every EC2 instance's, volume's and snapshot's tags by its Name tag, as the API shows."""
    ec2 = env.clients.client("ec2")
    out: dict[str, dict[str, str]] = {}
    found = [
        i
        for page in ec2.get_paginator("describe_instances").paginate()
        for res in page["Reservations"]
        for i in res["Instances"]
    ]
    found += (
        ec2.describe_volumes()["Volumes"] + ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]
    )
    for item in found:
        tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
        if "Name" in tags:
            out[tags["Name"]] = tags
    return out


@pytest.fixture
def served(
    request: pytest.FixtureRequest, domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> Iterator[Served]:
    sid, secret = request.param
    with testing.trial_context(tmp_path / "draw", secret=secret) as ctx:
        spec, _ = domain.draw(catalog.scenarios[sid], ctx)  # type: ignore[arg-type]
    assert isinstance(spec, FinOpsSpec)
    with live(domain, spec, tmp_path) as (env, _):
        s3 = env.clients.client("s3")
        bucket = spec.handbook_bucket
        pages = {
            o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read().decode()
            for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        }
        assert env.timeline is not None
        yield Served(spec, env, pages, env.timeline.now.date(), _tags(env))


def _cases(*sids: str) -> list[Any]:
    return [
        pytest.param((s, k), id=f"{s.split('/')[1]}-{k.decode()}") for s in sids for k in SECRETS
    ]


# --- idle ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "served", _cases("finops/idle-orphans", "finops/idle-control"), indirect=True
)
def test_idle_as_written(served: Served) -> None:
    policy = served.page("finops/idle-resources.md")
    volume = read_rule("idle_volume", policy)
    grace, ticket_tag = int(volume["grace"]), volume["ticket_tag"]
    stopped_days = int(read_rule("idle_stopped", policy)["stopped_days"])
    snap = read_rule("idle_snapshot", policy)
    snapshot_days, backup_tag = int(snap["snapshot_days"]), snap["backup_tag"]
    lb_days = int(read_rule("idle_lb", policy)["lb_days"])
    hold = read_rule("idle_hold", policy)["hold_tag"]
    backups = served.page("runbooks/backups.md")
    assert read_rule("backup_tag", backups)["backup_tag"] == backup_tag
    keeps = {r[0]: int(r[1].split()[0]) for r in rows(backups) if r[1].endswith("days")}
    tickets = {r[0]: r[1] for r in rows(served.page("ops/tickets.md"))}
    dr = served.page("runbooks/disaster-recovery.md")
    standby = listed(dr, "Warm standbys")
    replicas = listed(dr, "Database replicas")
    failover = listed(dr, "Load balancers kept")
    active_ips = {r[0] for r in rows(served.page("network/allowlisted-ips.md")) if r[2] == "active"}

    idle, looks_idle = set(), set()
    for r in served.spec.resources:
        if _looks_idle(r):
            looks_idle.add(r.name)
        if hold in r.tags:
            continue
        if isinstance(r, Volume):
            if ticket_tag in r.tags:
                if tickets[r.tags[ticket_tag]] == "closed":
                    idle.add(r.name)
            elif r.created_days_ago > grace:
                idle.add(r.name)
        elif isinstance(r, Address) and r.instance is None:
            if served.env.seeded.ips[r.name] not in active_ips:
                idle.add(r.name)
        elif isinstance(r, Instance) and r.state == "stopped":
            if r.name not in standby and (r.stopped_days_ago or 0) > stopped_days:
                idle.add(r.name)
        elif isinstance(r, Snapshot) and r.of_instance is None and not r.image:
            plan = r.tags.get(backup_tag)
            limit = keeps[plan] if plan else snapshot_days
            if r.created_days_ago > limit:
                idle.add(r.name)
        elif isinstance(r, LoadBalancer) and (r.requests is None or r.requests.peak == 0):
            age = r.launched_days_ago
            if r.name not in failover and (age is None or age >= lb_days):
                idle.add(r.name)
        elif isinstance(r, Database) and r.connections and r.connections.peak == 0:
            idle.update({r.name} - replicas)
    assert idle == set(served.spec.truth.waste)
    if not served.spec.truth.incident:  # a control explains what looks idle but stays
        assert looks_idle == set(served.spec.truth.explained)


def _looks_idle(r: Any) -> bool:
    """Idle at first sight, as the control's goal lists it (before any convention)."""
    if isinstance(r, Instance):
        return r.state == "stopped"
    if isinstance(r, Address):
        return r.instance is None
    if isinstance(r, LoadBalancer):
        return r.requests is None or r.requests.peak == 0
    if isinstance(r, Database):
        return r.connections is not None and r.connections.peak == 0
    return isinstance(r, Volume)


# --- rightsizing --------------------------------------------------------------------------

#: How a reader understands each stated precedence of a decommission over an exemption.
_DECOMMISSION_WINS = ("overrides exemptions", "decommission listing wins", "do not protect")
_EXEMPTION_WINS = ("holds even for", "the exemption wins", "does not cancel an exemption")


@pytest.mark.parametrize(
    "served",
    _cases("finops/rightsizing-ec2", "finops/rightsizing-recommend", "finops/rightsizing-control"),
    indirect=True,
)
def test_rightsizing_as_written(served: Served) -> None:
    sizing = served.page("finops/sizing.md")
    cpu = float(read_rule("sizing_cpu", sizing)["target_cpu"])
    memory = float(read_rule("sizing_memory", sizing)["target_memory"])
    canary = read_rule("sizing_canary", sizing)["canary_tag"]
    exempt_tag = read_rule("sizing_exempt_tag", sizing)["exempt_tag"]
    decommission_wins = any(p in sizing for p in _DECOMMISSION_WINS)
    assert decommission_wins != any(p in sizing for p in _EXEMPTION_WINS), sizing
    listed_until = {r[0]: day(r[1]) for r in rows(served.page("finops/sizing-exemptions.md"))}
    planned = {r[0] for r in rows(served.page("ops/decommission.md")) if r[2] == "planned"}
    prices = load_prices()
    stated = Truth(target_cpu=cpu, target_memory=memory)
    judged = served.spec.truth
    over, kept = {}, set()
    for r in served.spec.resources:
        if not isinstance(r, Instance | Database) or r.cpu is None:
            continue
        table_ = "ec2" if isinstance(r, Instance) else "rds"
        now = r.instance_type if isinstance(r, Instance) else r.instance_class
        best, _, _ = rightsizing_target(prices, r, stated)
        if prices.raw[table_][best][0] >= prices.raw[table_][now][0]:
            continue
        tags = served.tags.get(r.name, r.tags)
        if tags.get(canary) == "canary" or (isinstance(r, Instance) and r.reserved):
            kept.add(r.name)
            continue
        exempt = listed_until.get(r.name, date.min) >= served.today
        if exempt_tag in tags and day(tags[exempt_tag]) >= served.today:
            exempt = True
        if exempt and not (decommission_wins and r.name in planned):
            kept.add(r.name)
            continue
        over[r.name] = best
    assert set(over) == set(judged.waste)
    if not judged.incident:  # a control explains what looks oversized but stays
        assert kept == set(judged.explained)
    for name, best in over.items():
        r = served.spec.resource(name)
        assert isinstance(r, Instance | Database)
        assert rightsizing_target(prices, r, judged)[0] == best


# --- storage ------------------------------------------------------------------------------


def _busiest_hour(env: FinOpsEnvironment, vid: str, metrics: tuple[str, str]) -> float:
    """The largest hourly sum of two EBS metrics, as CloudWatch serves them."""
    cw = env.clients.client("cloudwatch")
    end = env.seeded.now + timedelta(hours=1)
    hours: dict[Any, float] = {}
    for metric in metrics:
        points = cw.get_metric_statistics(
            Namespace="AWS/EBS",
            MetricName=metric,
            Dimensions=[{"Name": "VolumeId", "Value": vid}],
            StartTime=end - timedelta(days=31),
            EndTime=end,
            Period=3600,
            Statistics=["Sum"],
        )["Datapoints"]
        for p in points:
            hours[p["Timestamp"]] = hours.get(p["Timestamp"], 0.0) + p["Sum"]
    return max(hours.values())


@pytest.mark.parametrize("served", _cases("finops/storage-mixed"), indirect=True)
def test_storage_as_written(served: Served) -> None:
    text = served.page("finops/storage.md")
    read_rule("storage_gp3", text)  # the busiest hour of reads plus writes
    cold = read_rule("storage_cold", text)
    judged = served.spec.truth
    assert cold["storage_class"] == judged.storage_class
    assert int(cold["transition_days"]) == judged.transition_days
    assert int(cold["noncurrent_days"]) == judged.noncurrent_days
    kept_until = {r[0]: day(r[1]) for r in rows(served.page("compliance/retention.md"))}
    waste = set()
    for r in served.spec.resources:
        if isinstance(r, Instance):
            for i, v in enumerate(r.volumes):
                if v.volume_type != "gp2":
                    continue
                waste.add(r.name)
                vid = served.env.seeded.data_volumes[r.name][i]
                iops = _busiest_hour(served.env, vid, ("VolumeReadOps", "VolumeWriteOps")) / 3600
                mbps = _busiest_hour(served.env, vid, ("VolumeReadBytes", "VolumeWriteBytes"))
                assert max(GP3_IOPS, math.ceil(iops - 1e-6)) == volume_iops_need(v), r.name
                speed = max(GP3_THROUGHPUT, math.ceil(mbps / 3600 / 1e6 - 1e-6))
                assert speed == volume_throughput_need(v), r.name
        elif isinstance(r, Bucket) and r.reads is not None:
            small = r.objects is not None and r.size_gb * 1e9 / r.objects < 128e3
            held = kept_until.get(r.name, date.min) >= served.today
            if r.reads.mean < float(cold["cold_reads"]) and not small and not held:
                waste.add(r.name)
    assert waste == set(judged.waste)


# --- autoscaling --------------------------------------------------------------------------


@pytest.mark.parametrize("served", _cases("finops/autoscaling-web"), indirect=True)
def test_autoscaling_as_written(served: Served) -> None:
    target = float(read_rule("capacity_target", served.page("finops/capacity.md"))["target_cpu"])
    held = {r[1] for r in rows(served.page("ops/events.md")) if day(r[2]) >= served.today}
    prices = load_prices()
    above = {
        g.name: needed_capacity(prices, g, target)
        for g in served.spec.resources
        if isinstance(g, AutoScalingGroup) and g.name not in held
        if g.desired > needed_capacity(prices, g, target)
    }
    judged = served.spec.truth
    assert set(above) == {judged.group}
    group = served.spec.resource(judged.group or "")
    assert isinstance(group, AutoScalingGroup)
    assert above[group.name] == needed_capacity(prices, group, judged.target_cpu)


# --- commitment ---------------------------------------------------------------------------

_NUMBERS = {"one": 1, "1": 1, "twelve": 12, "three": 3, "3": 3, "36": 36}


def _term_days(text: str) -> int:
    """A reservation's term in days, as a reader understands its wording."""
    m = re.search(r"\b(one|three|twelve|36|1|3)[- ](year|years|months)\b", text)
    assert m, f"no term in {text!r}"
    n = _NUMBERS[m.group(1)]
    return n * 365 if m.group(2).startswith("year") else n // 12 * 365


def _planned(text: str) -> set[str]:
    return {r[0] for r in rows(text) if r[2] == "planned"}


@pytest.mark.parametrize("served", _cases("finops/commitment-reserved"), indirect=True)
def test_reservations_as_written(served: Served) -> None:
    page = served.page("finops/commitments.md")
    term = _term_days(read_rule("commit_terms", page)["commit_term__text"])
    retire = read_rule("commit_retire", page)["retire_tag"]
    planned = _planned(served.page("ops/decommission.md"))
    billing_days = served.spec.billing_days
    qualify = set()
    for r in served.spec.resources:
        if not isinstance(r, Instance) or r.state != "running" or r.schedule != "always":
            continue
        if r.reserved or r.name in planned:
            continue
        if r.launched_days_ago is not None and r.launched_days_ago < billing_days:
            continue
        tags = served.tags[r.name]
        if retire in tags and day(tags[retire]) < served.today + timedelta(days=term):
            continue
        qualify.add(r.name)
    assert qualify == set(served.spec.truth.waste)


@pytest.mark.parametrize("served", _cases("finops/commitment-savings-plan"), indirect=True)
def test_savings_plan_exclusions_as_written(served: Served) -> None:
    page = served.page("finops/savings-plans.md")
    m = re.search(r"whose `([^`]+)` tag falls\s+within the plan's year", page)
    assert m, page
    planned = _planned(served.page("ops/decommission.md"))
    year = served.today + timedelta(days=365)
    gone = {
        name
        for name, tags in served.tags.items()
        if name in planned or (m.group(1) in tags and day(tags[m.group(1)]) < year)
    }
    assert gone == set(served.spec.truth.exclude)


# --- transfer -----------------------------------------------------------------------------


@pytest.mark.parametrize("served", _cases("finops/transfer-nat"), indirect=True)
def test_transfer_as_written(served: Served) -> None:
    page = served.page("network/egress.md")
    assert "most of its NAT gateway's traffic goes to S3" in page
    ours = next(r[0].split()[0] for r in rows(page) if "(ours)" in r[0])
    endpoints = {
        n.name
        for n in served.spec.resources
        if isinstance(n, NatGateway) and n.s3_share > 0.5 and n.s3_region == ours
    }
    assert endpoints == set(served.spec.truth.waste)


# --- allocation ---------------------------------------------------------------------------

#: How a reader understands each stated split of the costs that belong to no team.
_SPLITS = {"as they are": "none", "evenly": "even", "in proportion": "proportional"}


@pytest.mark.parametrize("served", _cases("finops/allocation-prefix"), indirect=True)
def test_allocation_split_as_written(served: Served) -> None:
    page = served.page("finops/ownership.md")
    modes = {mode for words, mode in _SPLITS.items() if words in page}
    assert modes == {served.spec.truth.shared}, page


# --- budget -------------------------------------------------------------------------------


@pytest.mark.parametrize("served", _cases("finops/budget-policy"), indirect=True)
def test_budget_policy_as_written(served: Served) -> None:
    policy = {r[0]: r for r in rows(served.page("finops/budgets.md"))}
    judged = {b.name: b for b in served.spec.truth.budgets}
    row = policy["monthly-cost"]
    budget = judged["monthly-cost"]
    assert float(row[1]) == budget.amount
    assert row[2] == budget.time_unit
    (alert,) = budget.notifications
    assert row[4].split()[0] == alert.notification_type
    assert float(row[5].split("%")[0]) == alert.threshold
    assert [row[6]] == alert.subscribers


@pytest.mark.parametrize("served", _cases("finops/budget-control"), indirect=True)
def test_temporary_limits_as_written(served: Served) -> None:
    """A budget on the temporary limits table is the control's evidence, at that limit."""
    temporary = {r[0]: float(r[1]) for r in rows(served.page("finops/budgets.md")) if len(r) == 4}
    assert set(temporary) == set(served.spec.truth.explained)
    budgets = served.env.clients.client("budgets")
    for name, limit in temporary.items():
        got = budgets.describe_budget(AccountId=MANAGEMENT_ACCOUNT, BudgetName=name)["Budget"]
        assert float(got["BudgetLimit"]["Amount"]) == limit


# --- anomaly and forecast -----------------------------------------------------------------


@pytest.mark.parametrize("served", _cases("finops/anomaly-launch"), indirect=True)
def test_anomaly_as_written(served: Served) -> None:
    log = rows(served.page("ops/change-log.md"))
    explained = set()
    for _, name, change, decision in log:
        r = served.spec.resource(name) if name in {x.name for x in served.spec.resources} else None
        made = r.instance_type if isinstance(r, Instance) else None
        stated = re.search(r"\bone (\S+)$", change)
        if decision == "approved" and not (stated and made and stated.group(1) != made):
            explained.add(name)
    rose = {
        r.name
        for r in served.spec.resources
        if isinstance(r, Instance) and r.launched_days_ago is not None and r.launched_days_ago < 14
    }
    assert rose - explained == {served.spec.truth.resource}


def _rose(r: Any) -> bool:
    """Whether the resource's cost changed within the last two weeks."""
    recent = (r.launched_days_ago, getattr(r, "changed_days_ago", None))
    return any(d is not None and d < 14 for d in recent) or getattr(r, "spike_days", 0) > 0


@pytest.mark.parametrize(
    "served", _cases("finops/anomaly-type-change", "finops/anomaly-control"), indirect=True
)
def test_change_log_as_written(served: Served) -> None:
    """A change explains a rise when the board approved it as made ("move to TYPE" states it)."""
    names = {x.name for x in served.spec.resources}
    explained = set()
    for _, name, change, decision in rows(served.page("ops/change-log.md")):
        r = served.spec.resource(name) if name in names else None
        stated = re.search(r"\bmove to (\S+)", change)
        made = r.instance_type if isinstance(r, Instance) else None
        if decision == "approved" and not (stated and stated.group(1) != made):
            explained.add(name)
    rose = {r.name for r in served.spec.resources if _rose(r)}
    unexplained = rose - explained
    if served.spec.truth.incident:
        assert unexplained == {served.spec.truth.resource}
    else:
        assert not unexplained
        assert rose == set(served.spec.truth.explained)


@pytest.mark.parametrize("served", _cases("finops/forecast-data"), indirect=True)
def test_forecast_within_the_budget_as_written(served: Served) -> None:
    assert "Costs outside a budget's filters do not count" in served.page("finops/budget-alerts.md")
    (fired,) = [
        b
        for b in served.spec.resources
        if isinstance(b, Budget) and b.forecast_share is not None and b.forecast_share < 1
    ]
    cause = served.spec.resource(served.spec.truth.resource or "")
    assert fired.team is None or cause.tags.get("team") == fired.team
    assert not fired.accounts or (cause.account or MANAGEMENT_ACCOUNT) in fired.accounts
