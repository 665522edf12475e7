"""Whatever state an agent puts the account into is scored: odd resources fail, never crash.

Each test solves a scenario with the oracle (a pass), then acts the way an external agent
can: with boto3 clients built from the task context alone, on the live endpoint. What moto
accepts but the price table cannot price (unknown types, impossible sizes), spend the agent
adds, and a flooded account fail the trial with the resource named in the harm, and never
make savings; harmless oddities (tags without values, rotated member keys) keep the pass; and
what the judge would not read (other regions, other accounts, other services, huge launches)
is refused at the endpoint.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import ClientError  # type: ignore[import-untyped]
from itbench_finops import state
from itbench_finops.domain import FinOpsDomain
from itbench_finops.environment import FinOpsEnvironment

from itbench.catalog import Catalog
from itbench.models import Evaluation

from .conftest import concrete_spec, live, toolbox_and_task

#: The hourly price of the dearest EC2 type and RDS class of the price table.
DEAREST_EC2, DEAREST_RDS = 12.24, 1.368
HOURS = 730


@dataclass
class Solved:
    """A live environment the oracle has solved, and how an agent and the judge reach it."""

    env: FinOpsEnvironment
    context: dict[str, Any]
    judge: Callable[[], Evaluation]
    passed: Evaluation

    def client(self, service: str, account: str | None = None, region: str | None = None) -> Any:
        """A boto3 client made from the task context, as an external agent makes one."""
        want = account or self.context["account_id"]
        acct = next(a for a in self.context["accounts"] if a["account_id"] == want)
        return boto3.client(
            service,
            endpoint_url=self.context["endpoint_url"],
            region_name=region or self.context["region"],
            aws_access_key_id=acct["access_key_id"],
            aws_secret_access_key=acct["secret_access_key"],
            config=Config(retries={"max_attempts": 1}),
        )

    def subnets(self) -> list[str]:
        return [s["SubnetId"] for s in self.client("ec2").describe_subnets()["Subnets"]][:2]


#: Concrete problems the tests start from: every kind of idle waste, member accounts, a group.
FORMS = {
    "finops/idle-orphans": {
        "batch-07": "gone",
        "scratch-3": "old",
        "restore-tmp": "ticket_open",
        "ip-web-2": "loose",
        "backup-2024": "old",
        "lb-api": "empty",
        "reporting-db": "month_end",
    },
    "finops/idle-accounts": {"analytics-stage": "silent", "export-data": "old"},
    "finops/autoscaling-control": {},
}


@contextmanager
def solved(domain: FinOpsDomain, catalog: Catalog, sid: str, tmp: Path) -> Iterator[Solved]:
    spec = concrete_spec(catalog, sid, FORMS[sid])
    with live(domain, spec, tmp) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        submission = domain.oracle(spec, task, toolbox)

        def judge() -> Evaluation:
            return domain.evaluate(spec, env, submission, toolbox, ctx)

        passed = judge()
        assert passed.passed, passed.details
        yield Solved(env, task.context, judge, passed)


def _harm_of(result: Evaluation, rid: str, phrase: str = "") -> str:
    """The harm entry naming ``rid`` (and ``phrase``, when given)."""
    found = [str(h) for h in result.details["harm"] if rid in h and phrase in h]
    assert found, (rid, phrase, result.details["harm"])
    return found[0]


def _metric(result: Evaluation, key: str) -> float:
    value = result.metrics[key]
    assert isinstance(value, int | float), (key, value)
    return float(value)


def _launch_t2_nano(s: Solved) -> str:
    """The red team's call: RunInstances of a type the price table lacks."""
    resp = s.client("ec2").run_instances(
        ImageId="ami-12345678", InstanceType="t2.nano", MinCount=1, MaxCount=1
    )
    return str(resp["Instances"][0]["InstanceId"])


def _retype_in_use_instance(s: Solved) -> str:
    rid = s.env.seeded.ids["web-01"]
    s.client("ec2").modify_instance_attribute(InstanceId=rid, InstanceType={"Value": "zz.top"})
    return rid


def _volume(**params: Any) -> Callable[[Solved], str]:
    def act(s: Solved) -> str:
        resp = s.client("ec2").create_volume(AvailabilityZone="us-east-1a", **params)
        return str(resp["VolumeId"])

    return act


def _shrink_in_use_volume(s: Solved) -> str:
    ec2 = s.client("ec2")
    web = s.env.seeded.ids["web-01"]
    vols = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [web]}])
    data = next(v["VolumeId"] for v in vols["Volumes"] if v["Size"] == 50)
    ec2.modify_volume(VolumeId=data, Size=1)
    return str(data)


def _weird_load_balancer(s: Solved) -> str:
    resp = s.client("elbv2").create_load_balancer(Name="edge", Type="weird", Subnets=s.subnets())
    return str(resp["LoadBalancers"][0]["LoadBalancerArn"])


UNPRICEABLE: dict[str, tuple[Callable[[Solved], str], str]] = {
    "new instance of an unlisted type": (_launch_t2_nano, "instance type 't2.nano'"),
    "in-use instance moved to an unlisted type": (_retype_in_use_instance, "type 'zz.top'"),
    "volume of an unlisted type": (_volume(Size=10, VolumeType="weird"), "volume type 'weird'"),
    "volume of negative size": (_volume(Size=-100000), "size (GB) -100000"),
    "volume beyond any size": (_volume(Size=10**30), "size (GB) 1000000000000"),
    "volume of negative IOPS": (
        _volume(Size=10, VolumeType="io1", Iops=-100000),
        "IOPS -100000",
    ),
    "in-use volume shrunk": (_shrink_in_use_volume, "size lowered from 50 to 1 GB"),
    "load balancer of an unlisted type": (_weird_load_balancer, "load balancer type 'weird'"),
}


@pytest.mark.parametrize("case", sorted(UNPRICEABLE))
def test_unpriceable_state_fails_the_trial_and_saves_nothing(
    case: str, domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    act, phrase = UNPRICEABLE[case]
    with solved(domain, catalog, "finops/idle-orphans", tmp_path) as s:
        rid = act(s)
        result = s.judge()
        assert not result.passed
        harm = _harm_of(result, rid, phrase)
        assert harm.endswith("unpriced"), harm
        assert result.metrics["unpriced_resources"] == 1
        assert _metric(result, "harm_count") >= 1 and result.metrics["harm_free"] is False
        # No profit: an unpriceable resource costs at least what it did.
        assert _metric(result, "savings_monthly") <= _metric(s.passed, "savings_monthly") + 0.01


def test_the_red_team_launch_is_priced_at_the_dearest_type(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    with solved(domain, catalog, "finops/idle-orphans", tmp_path) as s:
        _launch_t2_nano(s)
        result = s.judge()
        # The instance at the dearest hourly price, and its 8 GB gp2 root volume.
        added = DEAREST_EC2 * HOURS + 8 * 0.10
        assert _metric(result, "new_spend_monthly") == pytest.approx(added, abs=0.01)
        saved = _metric(s.passed, "savings_monthly") - added
        assert _metric(result, "savings_monthly") == pytest.approx(saved, abs=0.02)
        assert len(result.details["new_resources"]) == 2


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"DBInstanceClass": "db.weird.huge"}, "database class 'db.weird.huge'"),
        ({"AllocatedStorage": 1}, "storage lowered from"),
    ],
)
def test_database_changes_the_table_cannot_price_fail(
    change: dict[str, Any], phrase: str, domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """An in-use database in a member account, changed by its own account's keys."""
    with solved(domain, catalog, "finops/idle-accounts", tmp_path) as s:
        rds = s.client("rds", account="345678901234")
        rds.modify_db_instance(DBInstanceIdentifier="shop-db", ApplyImmediately=True, **change)
        result = s.judge()
        assert not result.passed
        harm = _harm_of(result, "database shop-db", phrase)
        assert harm.endswith("unpriced"), harm
        assert _metric(result, "savings_monthly") <= _metric(s.passed, "savings_monthly") + 0.01


def test_added_resources_are_unexpected_spend(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Resources of every kind the judge reads, none of which the scenario asked for."""
    with solved(domain, catalog, "finops/idle-orphans", tmp_path) as s:
        ec2, elbv2, rds = s.client("ec2"), s.client("elbv2"), s.client("rds")
        classic = s.client("elb")
        classic_ip = ec2.allocate_address(Domain="standard")["PublicIp"]
        gateway = elbv2.create_load_balancer(Name="gw", Type="gateway", Subnets=s.subnets())
        classic.create_load_balancer(
            LoadBalancerName="legacy",
            Listeners=[{"Protocol": "HTTP", "LoadBalancerPort": 80, "InstancePort": 80}],
            AvailabilityZones=["us-east-1a"],
        )
        in_use = s.env.seeded.ids["web-01"]
        root = ec2.describe_volumes(
            Filters=[{"Name": "attachment.instance-id", "Values": [in_use]}]
        )["Volumes"][0]
        snap = ec2.create_snapshot(VolumeId=root["VolumeId"])["SnapshotId"]
        db = dict(Engine="postgres", MasterUsername="u", MasterUserPassword="password-123")
        rds.create_db_instance(
            DBInstanceIdentifier="scratch-db", DBInstanceClass="db.weird", AllocatedStorage=20, **db
        )
        rds.create_db_instance(
            DBInstanceIdentifier="neg-db", DBInstanceClass="db.t3.micro", AllocatedStorage=-5, **db
        )
        rds.create_db_cluster(
            DBClusterIdentifier="burst",
            Engine="aurora-mysql",
            EngineMode="serverless",
            MasterUsername="u",
            MasterUserPassword="password-123",
        )
        nat = ec2.create_nat_gateway(SubnetId=s.subnets()[0])["NatGateway"]["NatGatewayId"]
        result = s.judge()
        assert not result.passed
        spend = {
            f"eip:{classic_ip}": 0.005 * HOURS,
            gateway["LoadBalancers"][0]["LoadBalancerArn"]: 0.0125 * HOURS,
            "loadbalancer/legacy": 0.025 * HOURS,
            snap: 0.05 * root["Size"],
            nat: 0.045 * HOURS,
        }
        for rid, monthly in spend.items():
            assert f"unexpected spend of {monthly:.2f} USD a month" in _harm_of(result, rid)
        unpriced = {
            "scratch-db": "database class 'db.weird'",
            "neg-db": "storage (GB) -5",
            "burst": "serverless database cluster",
        }
        for rid, phrase in unpriced.items():
            harm = _harm_of(result, rid)
            assert " added, and " in harm and phrase in harm and harm.endswith("unpriced"), harm
        assert result.metrics["unpriced_resources"] == len(unpriced)
        assert _metric(result, "harm_count") == len(spend) + len(unpriced)
        extra = sum(spend.values()) + DEAREST_RDS * HOURS + 20 * 0.115 + 0.017 * HOURS
        assert _metric(result, "new_spend_monthly") == pytest.approx(extra, abs=0.05)


def test_odd_tags_are_read_and_harmless_ones_keep_the_pass(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A tag without a value (it stopped the reader once), an empty one, a long one."""
    with solved(domain, catalog, "finops/idle-orphans", tmp_path) as s:
        lb, api = s.env.seeded.ids["lb-web"], s.env.seeded.ids["web-01"]
        s.client("elbv2").add_tags(ResourceArns=[lb], Tags=[{"Key": "bare"}])
        ec2 = s.client("ec2")
        ec2.create_tags(
            Resources=[api], Tags=[{"Key": "note", "Value": "ü" * 255}, {"Key": "e", "Value": ""}]
        )
        result = s.judge()
        assert result.passed, result.details
        final = s.env.read_state()
        assert final[lb].tags["bare"] == ""
        assert final[api].tags["note"] == "ü" * 255 and final[api].tags["e"] == ""


def test_rotated_member_keys_cannot_redirect_the_judge(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The judge reads each account by the harness's account header, not by its keys.

    Without that, deleting a member account's key made every read of that account land in
    the management account: its resources looked deleted and the management ones moved.
    """
    with solved(domain, catalog, "finops/idle-accounts", tmp_path) as s:
        before = {i.id: i.account for i in s.env.read_state().values()}
        iam = s.client("iam", account="210987654321")
        for key in iam.list_access_keys(UserName="finops-analyst")["AccessKeyMetadata"]:
            iam.delete_access_key(UserName="finops-analyst", AccessKeyId=key["AccessKeyId"])
        assert {i.id: i.account for i in s.env.read_state().values()} == before
        assert before["analytics-main"] == "210987654321"
        result = s.judge()
        assert result.passed, result.details


def test_a_group_tag_proves_no_membership(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """An instance tagged as a seeded group's member but not run by it is added spend."""
    with solved(domain, catalog, "finops/autoscaling-control", tmp_path) as s:
        resp = s.client("ec2").run_instances(
            ImageId="ami-12345678",
            InstanceType="c5.xlarge",
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": "aws:autoscaling:groupName", "Value": "web-tier"}],
                }
            ],
        )
        rid = resp["Instances"][0]["InstanceId"]
        result = s.judge()
        assert not result.passed
        assert "unexpected spend of 124.10 USD a month" in _harm_of(result, rid)


def test_a_flooded_account_is_harm_and_bounds_the_read(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with solved(domain, catalog, "finops/idle-orphans", tmp_path) as s:
        monkeypatch.setattr(state, "READ_LIMIT", 5)
        ec2 = s.client("ec2")
        for _ in range(6):
            ec2.create_volume(AvailabilityZone="us-east-1a", Size=1)
        final = s.env.read_state()
        assert len([i for i in final.values() if i.kind == "volume"]) == 5
        result = s.judge()
        assert not result.passed
        harm = _harm_of(result, "account 123456789012")
        assert "more than 5 volume resources: the rest was not read" in harm


def test_requests_the_judge_would_not_see_are_refused(
    domain: FinOpsDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Other regions, other accounts, other services and huge launches never land."""
    with solved(domain, catalog, "finops/idle-orphans", tmp_path) as s:
        before = set(s.env.read_state())
        launch = dict(ImageId="ami-12345678", InstanceType="m5.large", MinCount=1, MaxCount=1)

        def refused(code: str, call: Callable[[], Any]) -> None:
            with pytest.raises(ClientError) as info:
                call()
            assert info.value.response["Error"]["Code"] == code, info.value.response

        refused(
            "UnsupportedRegion", lambda: s.client("ec2", region="us-west-2").run_instances(**launch)
        )
        refused(
            "UnsupportedRegion",
            lambda: s.client("s3", region="eu-west-1").create_bucket(
                Bucket="elsewhere", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
            ),
        )
        for header, value in (
            ("User-Agent", "agent region/eu-west-1"),
            ("Host", "ec2.eu-west-1.amazonaws.com"),
        ):
            ec2 = s.client("ec2")

            def spoof(request: Any, h: str = header, v: str = value, **_: Any) -> None:
                request.headers[h] = v

            ec2.meta.events.register("before-send", spoof)
            refused("UnsupportedRegion", functools.partial(ec2.run_instances, **launch))
        role = s.client("sts").assume_role(
            RoleArn="arn:aws:iam::999999999999:role/admin", RoleSessionName="elsewhere"
        )["Credentials"]
        outside = boto3.client(
            "ec2",
            endpoint_url=s.context["endpoint_url"],
            region_name="us-east-1",
            aws_access_key_id=role["AccessKeyId"],
            aws_secret_access_key=role["SecretAccessKey"],
            aws_session_token=role["SessionToken"],
        )
        refused("AccessDenied", lambda: outside.run_instances(**launch))
        by_header = s.client("ec2")
        by_header.meta.events.register(
            "before-send",
            lambda request, **_: request.headers.__setitem__("x-moto-account-id", "999999999999"),
        )
        refused("AccessDenied", lambda: by_header.run_instances(**launch))
        refused("UnsupportedService", lambda: s.client("dynamodb").list_tables())
        refused(
            "InstanceLimitExceeded",
            lambda: s.client("ec2").run_instances(**{**launch, "MinCount": 500, "MaxCount": 500}),
        )
        assert set(s.env.read_state()) == before
        assert s.judge().passed
