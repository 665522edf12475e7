"""Seeds a fresh sandbox account from a scenario's inventory, through the AWS API."""

from __future__ import annotations

import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from itbench_finops.aws import Clients, Credentials
from itbench_finops.profiles import hour_floor, series
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
    Profile,
    Snapshot,
    Volume,
)

WORKERS = 6
IMAGE_ID = "ami-0a1b2c3d4e5f60718"
ZONE = "us-east-1a"
DB_PASSWORD = "sandbox-password-1"  # noqa: S105 - a throwaway sandbox database


@dataclass
class Seeded:
    """What seeding created: the id of each named resource and the member accounts' keys."""

    ids: dict[str, str] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)  # name -> account id
    lb_dimensions: dict[str, str] = field(default_factory=dict)  # lb name -> metric dimension
    root_volumes: dict[str, str] = field(default_factory=dict)  # instance name -> volume id
    now: datetime = field(default_factory=lambda: hour_floor(datetime.now(UTC)))


def _tags(name: str, tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": "Name", "Value": name}, *({"Key": k, "Value": v} for k, v in tags.items())]


def _iops(volume_type: str, iops: int | None) -> dict[str, int]:
    if volume_type in ("io1", "io2"):
        return {"Iops": iops or 1000}
    return {}


def _seed_of(base: int, *parts: str) -> int:
    return zlib.crc32("/".join(parts).encode()) ^ base


class Seeder:
    """Creates a scenario's resources, metric history and budgets.

    Args:
        spec: The scenario.
        clients: Clients of the sandbox endpoint.
        seed: The trial's seed (drives the metric noise).
    """

    def __init__(self, spec: FinOpsSpec, clients: Clients, seed: int) -> None:
        self.spec = spec
        self.clients = clients
        self.seed = seed
        self.out = Seeded()
        self._metrics: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def run(self) -> Seeded:
        """Create everything; returns the ids."""
        self._accounts()
        # Instances first (the others refer to them), then the rest; independent resources
        # are created concurrently to keep setup short.
        phases: list[tuple[type, ...]] = [
            (Instance,),
            (Volume, Snapshot, Address, LoadBalancer, Database, Bucket, AutoScalingGroup, Budget),
        ]
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            for kinds in phases:
                batch = [r for r in self.spec.resources if isinstance(r, kinds)]
                for fut in [pool.submit(getattr(self, f"_{r.kind}"), r) for r in batch]:
                    fut.result()
            chunks = [
                (account, namespace, data[i : i + 1000])
                for (account, namespace), data in self._metrics.items()
                for i in range(0, len(data), 1000)
            ]
            for fut in [pool.submit(self._put_metrics, *c) for c in chunks]:
                fut.result()
        return self.out

    # --- accounts -------------------------------------------------------------------------

    def _accounts(self) -> None:
        for acct in self.spec.accounts:
            self.out.accounts[acct.name] = acct.id
            iam = self.clients.client("iam", acct.id)
            iam.create_user(UserName="finops-analyst")
            key = iam.create_access_key(UserName="finops-analyst")["AccessKey"]
            self.clients.credentials[acct.id] = Credentials(
                acct.id, key["AccessKeyId"], key["SecretAccessKey"]
            )
            self.clients.forget(acct.id)

    def _ec2(self, account: str | None) -> Any:
        return self.clients.client("ec2", account)

    # --- resources ------------------------------------------------------------------------

    def _instance(self, r: Instance) -> None:
        ec2 = self._ec2(r.account)
        root = {
            "DeviceName": "/dev/sda1",
            "Ebs": {"VolumeSize": 8, "VolumeType": "gp3", "DeleteOnTermination": True},
        }
        mappings = [root] + [
            {
                "DeviceName": f"/dev/sd{chr(ord('f') + i)}",
                "Ebs": {
                    "VolumeSize": v.size,
                    "VolumeType": v.volume_type,
                    "DeleteOnTermination": True,
                    **_iops(v.volume_type, v.iops),
                },
            }
            for i, v in enumerate(r.volumes)
        ]
        resp = ec2.run_instances(
            ImageId=IMAGE_ID,
            MinCount=1,
            MaxCount=1,
            InstanceType=r.instance_type,
            Placement={"AvailabilityZone": ZONE},
            BlockDeviceMappings=mappings,
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": _tags(r.name, r.tags)},
                {"ResourceType": "volume", "Tags": _tags(r.name, r.tags)},
            ],
        )
        inst = resp["Instances"][0]
        iid = inst["InstanceId"]
        with self._lock:
            self.out.ids[r.name] = iid
            for m in inst.get("BlockDeviceMappings", []):
                if m["DeviceName"] == "/dev/sda1":
                    self.out.root_volumes[r.name] = m["Ebs"]["VolumeId"]
        if r.state == "stopped":
            ec2.stop_instances(InstanceIds=[iid])
        if r.cpu is not None:
            self._metric(
                r.account,
                "AWS/EC2",
                "CPUUtilization",
                "InstanceId",
                iid,
                r.cpu,
                "Percent",
                business=r.schedule == "business_hours",
            )
        if r.network_mb is not None:
            scaled = Profile(
                mean=r.network_mb.mean * 1e6,
                peak=r.network_mb.peak * 1e6,
                quiet_days=r.network_mb.quiet_days,
            )
            self._metric(r.account, "AWS/EC2", "NetworkOut", "InstanceId", iid, scaled, "Bytes")

    def _volume(self, r: Volume) -> None:
        created = (self.out.now - timedelta(days=r.created_days_ago)).date().isoformat()
        resp = self._ec2(r.account).create_volume(
            AvailabilityZone=ZONE,
            Size=r.size,
            VolumeType=r.volume_type,
            **_iops(r.volume_type, r.iops),
            TagSpecifications=[
                {"ResourceType": "volume", "Tags": _tags(r.name, {**r.tags, "created": created})}
            ],
        )
        self.out.ids[r.name] = resp["VolumeId"]

    def _snapshot(self, r: Snapshot) -> None:
        ec2 = self._ec2(r.account)
        created = (self.out.now - timedelta(days=r.created_days_ago)).date().isoformat()
        tags = _tags(r.name, {**r.tags, "created": created})
        if r.image:
            # An AMI registered here owns its own root snapshot: that one is the look-alike.
            image = ec2.register_image(Name=f"{r.name}-image", RootDeviceName="/dev/sda1")
            desc = ec2.describe_images(ImageIds=[image["ImageId"]])["Images"][0]
            snap_id = next(
                m["Ebs"]["SnapshotId"] for m in desc["BlockDeviceMappings"] if "Ebs" in m
            )
            ec2.create_tags(Resources=[snap_id], Tags=tags)
            self.out.ids[r.name] = snap_id
            return
        if r.of_instance is not None:
            volume_id = self.out.root_volumes[r.of_instance]
            temp = None
        else:
            temp = ec2.create_volume(AvailabilityZone=ZONE, Size=r.size, VolumeType="gp2")
            volume_id = temp["VolumeId"]
        snap = ec2.create_snapshot(
            VolumeId=volume_id,
            Description=f"backup of {volume_id}",
            TagSpecifications=[{"ResourceType": "snapshot", "Tags": tags}],
        )
        if temp is not None:
            ec2.delete_volume(VolumeId=volume_id)
        self.out.ids[r.name] = snap["SnapshotId"]

    def _address(self, r: Address) -> None:
        ec2 = self._ec2(r.account)
        alloc = ec2.allocate_address(
            Domain="vpc",
            TagSpecifications=[{"ResourceType": "elastic-ip", "Tags": _tags(r.name, r.tags)}],
        )
        self.out.ids[r.name] = alloc["AllocationId"]
        if r.instance is not None:
            ec2.associate_address(
                AllocationId=alloc["AllocationId"], InstanceId=self.out.ids[r.instance]
            )

    def _load_balancer(self, r: LoadBalancer) -> None:
        ec2 = self._ec2(r.account)
        elb = self.clients.client("elbv2", r.account)
        subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
        subnet_ids = [s["SubnetId"] for s in subnets["Subnets"]][:2]
        vpc_id = subnets["Subnets"][0]["VpcId"]
        lb = elb.create_load_balancer(
            Name=r.name, Subnets=subnet_ids, Type="application", Tags=_tags(r.name, r.tags)
        )["LoadBalancers"][0]
        arn = lb["LoadBalancerArn"]
        self.out.ids[r.name] = arn
        self.out.lb_dimensions[r.name] = arn.split(":loadbalancer/", 1)[1]
        tg = elb.create_target_group(
            Name=f"{r.name}-tg", Protocol="HTTP", Port=80, VpcId=vpc_id, TargetType="instance"
        )["TargetGroups"][0]
        elb.create_listener(
            LoadBalancerArn=arn,
            Protocol="HTTP",
            Port=80,
            DefaultActions=[{"Type": "forward", "TargetGroupArn": tg["TargetGroupArn"]}],
        )
        if r.targets:
            elb.register_targets(
                TargetGroupArn=tg["TargetGroupArn"],
                Targets=[{"Id": self.out.ids[t], "Port": 80} for t in r.targets],
            )
        if r.requests is not None:
            self._metric(
                r.account,
                "AWS/ApplicationELB",
                "RequestCount",
                "LoadBalancer",
                self.out.lb_dimensions[r.name],
                r.requests,
                "Count",
            )

    def _database(self, r: Database) -> None:
        rds = self.clients.client("rds", r.account)
        rds.create_db_instance(
            DBInstanceIdentifier=r.name,
            DBInstanceClass=r.instance_class,
            Engine=r.engine,
            AllocatedStorage=r.storage_gb,
            MasterUsername="app",
            MasterUserPassword=DB_PASSWORD,
            Tags=[{"Key": k, "Value": v} for k, v in r.tags.items()],
        )
        self.out.ids[r.name] = r.name
        if r.connections is not None:
            self._metric(
                r.account,
                "AWS/RDS",
                "DatabaseConnections",
                "DBInstanceIdentifier",
                r.name,
                r.connections,
                "Count",
            )
        if r.cpu is not None:
            self._metric(
                r.account,
                "AWS/RDS",
                "CPUUtilization",
                "DBInstanceIdentifier",
                r.name,
                r.cpu,
                "Percent",
            )

    def _bucket(self, r: Bucket) -> None:
        s3 = self.clients.client("s3", r.account)
        s3.create_bucket(Bucket=r.name)
        if r.tags:
            s3.put_bucket_tagging(
                Bucket=r.name,
                Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in r.tags.items()]},
            )
        self.out.ids[r.name] = r.name

    def _asg(self, r: AutoScalingGroup) -> None:
        ec2 = self._ec2(r.account)
        ec2.create_launch_template(
            LaunchTemplateName=f"{r.name}-template",
            LaunchTemplateData={"ImageId": IMAGE_ID, "InstanceType": r.instance_type},
        )
        asg = self.clients.client("autoscaling", r.account)
        asg.create_auto_scaling_group(
            AutoScalingGroupName=r.name,
            LaunchTemplate={"LaunchTemplateName": f"{r.name}-template", "Version": "$Latest"},
            MinSize=r.min_size,
            MaxSize=r.max_size,
            DesiredCapacity=r.desired,
            AvailabilityZones=[ZONE],
            Tags=[
                {"Key": k, "Value": v, "PropagateAtLaunch": True}
                for k, v in {"Name": r.name, **r.tags}.items()
            ],
        )
        self.out.ids[r.name] = r.name
        from itbench_finops.prices import load_prices

        vcpu = load_prices().instance(r.instance_type).vcpu
        total = max(r.desired, 1) * vcpu
        cpu = Profile(
            mean=100 * r.load_vcpus.mean / total,
            peak=100 * r.load_vcpus.peak / total,
            quiet_days=r.load_vcpus.quiet_days,
        )
        self._metric(
            r.account, "AWS/EC2", "CPUUtilization", "AutoScalingGroupName", r.name, cpu, "Percent"
        )
        flat = Profile(mean=r.desired, peak=r.desired)
        self._metric(
            r.account,
            "AWS/AutoScaling",
            "GroupInServiceInstances",
            "AutoScalingGroupName",
            r.name,
            flat,
            "None",
        )

    def _budget(self, r: Budget) -> None:
        budgets = self.clients.client("budgets")
        budgets.create_budget(
            AccountId=MANAGEMENT_ACCOUNT,
            Budget=budget_document(r),
            NotificationsWithSubscribers=[
                {
                    "Notification": {
                        "NotificationType": n.notification_type,
                        "ComparisonOperator": n.comparison,
                        "Threshold": n.threshold,
                        "ThresholdType": n.threshold_type,
                    },
                    "Subscribers": [
                        {"SubscriptionType": "EMAIL", "Address": a} for a in n.subscribers
                    ],
                }
                for n in r.notifications
            ],
        )
        self.out.ids[r.name] = r.name

    # --- metrics --------------------------------------------------------------------------

    def _metric(
        self,
        account: str | None,
        namespace: str,
        metric: str,
        dim: str,
        dim_value: str,
        profile: Profile,
        unit: str,
        *,
        business: bool = False,
    ) -> None:
        points = series(
            profile,
            self.out.now,
            self.spec.metric_days,
            _seed_of(self.seed, namespace, metric, dim_value),
            business_only=business,
        )
        with self._lock:
            data = self._metrics.setdefault((account or MANAGEMENT_ACCOUNT, namespace), [])
            data.extend(
                {
                    "MetricName": metric,
                    "Dimensions": [{"Name": dim, "Value": dim_value}],
                    "Timestamp": t,
                    "Value": round(v, 3),
                    "Unit": unit,
                }
                for t, v in points
            )

    def _put_metrics(self, account: str, namespace: str, data: list[dict[str, Any]]) -> None:
        self.clients.client("cloudwatch", account).put_metric_data(
            Namespace=namespace, MetricData=data
        )


def budget_document(r: Budget) -> dict[str, Any]:
    """The ``Budget`` argument of ``create_budget`` for a budget spec."""
    return {
        "BudgetName": r.name,
        "BudgetLimit": {"Amount": f"{r.amount:.2f}", "Unit": "USD"},
        "TimeUnit": r.time_unit,
        "BudgetType": "COST",
    }
