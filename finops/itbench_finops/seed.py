"""Seeds a fresh sandbox account from a scenario's inventory, through the AWS API.

Everything is created through the ordinary API and then dated by the endpoint's harness API
(:mod:`itbench_finops.harness_api`): launch, creation, snapshot and stop times come from the
trial's :class:`~itbench_finops.timeline.Timeline`, like the metric history and the billing.
"""

from __future__ import annotations

import contextlib
import random
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from itbench_finops.aws import Clients, Credentials
from itbench_finops.flowlogs import flow_records
from itbench_finops.handbook import render_seeded
from itbench_finops.prices import load_prices
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
    NatGateway,
    Profile,
    Snapshot,
    Volume,
)
from itbench_finops.timeline import Timeline

WORKERS = 6
IMAGE_ID = "ami-0a1b2c3d4e5f60718"
ZONE = "us-east-1a"
DB_PASSWORD = "sandbox-password-1"  # a throwaway sandbox database
#: The log group that holds the VPC flow logs of the NAT gateways' interfaces.
FLOW_LOG_GROUP = "/vpc/flow-logs"
#: The S3 service of the region, as gateway endpoints name it.
S3_SERVICE = "com.amazonaws.us-east-1.s3"


@dataclass
class Nat:
    """What seeding made for one NAT gateway."""

    nat_id: str
    vpc_id: str
    subnet_id: str
    route_table_id: str
    allocation_id: str
    eni: str


@dataclass
class Seeded:
    """What seeding created: the id of each named resource and the member accounts' keys."""

    ids: dict[str, str] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)  # name -> account id
    lb_dimensions: dict[str, str] = field(default_factory=dict)  # lb name -> metric dimension
    root_volumes: dict[str, str] = field(default_factory=dict)  # instance name -> volume id
    data_volumes: dict[str, list[str]] = field(default_factory=dict)  # instance -> volume ids
    nats: dict[str, Nat] = field(default_factory=dict)  # NAT gateway name -> its network
    ips: dict[str, str] = field(default_factory=dict)  # address name -> public IP
    now: datetime = field(default_factory=lambda: hour_floor(datetime.now(UTC)))


def _tags(name: str, tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": "Name", "Value": name}, *({"Key": k, "Value": v} for k, v in tags.items())]


def _iops(volume_type: str, iops: int | None, throughput: int | None = None) -> dict[str, int]:
    out = {}
    if volume_type in ("io1", "io2"):
        out["Iops"] = iops or 1000
    elif volume_type == "gp3":
        if iops:
            out["Iops"] = iops
        if throughput:
            out["Throughput"] = throughput
    return out


def data_device(index: int) -> str:
    """The device name of an instance's data volume ``index`` (``/dev/sdf`` first)."""
    return f"/dev/sd{chr(ord('f') + index)}"


def _seed_of(base: int, *parts: str) -> int:
    return zlib.crc32("/".join(parts).encode()) ^ base


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).isoformat()


class Seeder:
    """Creates a scenario's resources, metric history and handbook (budgets come later).

    Args:
        spec: The concrete scenario.
        clients: Clients of the sandbox endpoint.
        seed: The trial's seed (drives the metric noise and the ages of old resources).
        admin: Calls the endpoint's harness API (``path``, JSON body).
    """

    def __init__(self, spec: FinOpsSpec, clients: Clients, seed: int, admin: Any) -> None:
        self.spec = spec
        self.clients = clients
        self.seed = seed
        self.admin = admin
        self.out = Seeded()
        self.timeline = Timeline(spec, self.out.now, seed)
        # Dates in tag values (``${date:+90}``) are written as the trial's days.
        self.spec = spec.model_copy(
            update={
                "resources": [
                    r.model_copy(
                        update={"tags": {k: self.timeline.render(v) for k, v in r.tags.items()}}
                    )
                    for r in spec.resources
                ]
            }
        )
        self._metrics: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._times: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def run(self) -> Seeded:
        """Create everything and date it; returns the ids."""
        self._accounts()
        # NAT gateways first (instances run behind them), then instances (the others refer
        # to them), then the rest; independent resources are created concurrently.
        phases: list[tuple[type, ...]] = [
            (NatGateway,),
            (Instance,),
            (Volume, Snapshot, Address, LoadBalancer, Database, Bucket, AutoScalingGroup),
        ]
        # A trial's own order: listings then show the drawn resources nowhere in particular.
        order = random.Random(self.seed ^ 0x5EED).sample(
            self.spec.resources, len(self.spec.resources)
        )
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            pending = []
            for kinds in phases:
                batch = [r for r in order if isinstance(r, kinds)]
                for fut in [pool.submit(getattr(self, f"_{r.kind}"), r) for r in batch]:
                    fut.result()
            chunks = [
                (account, namespace, data[i : i + 1000])
                for (account, namespace), data in self._metrics.items()
                for i in range(0, len(data), 1000)
            ]
            pending += [pool.submit(self._put_metrics, *c) for c in chunks]
            pending += self._handbook(pool)
            for fut in pending:
                fut.result()
        self.admin("times", {"resources": self._times})
        return self.out

    def _dated(self, kind: str, account: str | None, rid: str, **times: datetime | None) -> None:
        with self._lock:
            self._times.append(
                {
                    "kind": kind,
                    "account": account or MANAGEMENT_ACCOUNT,
                    "id": rid,
                    **{k: _stamp(v) for k, v in times.items() if v is not None},
                }
            )

    # --- accounts and handbook ------------------------------------------------------------

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

    def _handbook(self, pool: ThreadPoolExecutor) -> list[Future[Any]]:
        """Create the handbook bucket and start writing its pages (after the resources)."""
        s3 = self.clients.client("s3")
        bucket = self.spec.handbook_bucket
        s3.create_bucket(Bucket=bucket)
        created = self.out.now - timedelta(days=900)
        self._dated("bucket", None, bucket, created=created)
        return [
            pool.submit(
                s3.put_object,
                Bucket=bucket,
                Key=doc.key,
                Body=render_seeded(
                    self.timeline.render(doc.text), self.out.ids, self.out.ips
                ).encode(),
                ContentType="text/markdown",
            )
            for doc in self.spec.documents
        ]

    def _ec2(self, account: str | None) -> Any:
        return self.clients.client("ec2", account)

    # --- resources ------------------------------------------------------------------------

    def _nat_gateway(self, r: NatGateway) -> None:
        ec2 = self._ec2(r.account)
        public = ec2.describe_subnets(
            Filters=[
                {"Name": "default-for-az", "Values": ["true"]},
                {"Name": "availability-zone", "Values": [ZONE]},
            ]
        )["Subnets"][0]
        vpc = public["VpcId"]
        index = [n.name for n in self.spec.resources if isinstance(n, NatGateway)].index(r.name)
        private = ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"172.31.{96 + 16 * index}.0/20",
            AvailabilityZone=ZONE,
            TagSpecifications=[
                {"ResourceType": "subnet", "Tags": _tags(f"{r.name}-private", r.tags)}
            ],
        )["Subnet"]["SubnetId"]
        alloc = ec2.allocate_address(
            Domain="vpc",
            TagSpecifications=[{"ResourceType": "elastic-ip", "Tags": _tags(r.name, r.tags)}],
        )["AllocationId"]
        nat = ec2.create_nat_gateway(
            SubnetId=public["SubnetId"],
            AllocationId=alloc,
            TagSpecifications=[{"ResourceType": "natgateway", "Tags": _tags(r.name, r.tags)}],
        )["NatGateway"]
        table = ec2.create_route_table(
            VpcId=vpc,
            TagSpecifications=[
                {"ResourceType": "route-table", "Tags": _tags(f"{r.name}-private", r.tags)}
            ],
        )["RouteTable"]["RouteTableId"]
        ec2.create_route(
            RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat["NatGatewayId"]
        )
        ec2.associate_route_table(SubnetId=private, RouteTableId=table)
        eni = nat["NatGatewayAddresses"][0]["NetworkInterfaceId"]
        with self._lock:
            self.out.ids[r.name] = nat["NatGatewayId"]
            self.out.nats[r.name] = Nat(nat["NatGatewayId"], vpc, private, table, alloc, eni)
        events = self.timeline.of(r.name)
        self._dated("nat_gateway", r.account, nat["NatGatewayId"], created=events.created)
        gb = Profile(
            mean=r.gb_day / 24 * 1e9,
            peak=r.gb_day / 24 * 1e9 * 1.8 if r.gb_day else 0,
        )
        if r.gb_day or r.spike_gb_day or r.spike_ramp:
            self._metric(
                r.account,
                "AWS/NATGateway",
                "BytesOutToDestination",
                "NatGatewayId",
                nat["NatGatewayId"],
                gb,
                "Bytes",
                first=events.created,
                extra=lambda t: self.timeline.spike_extra(r, t) / 24 * 1e9,
            )
        self._flow_logs(r, eni)

    def _flow_logs(self, r: NatGateway, eni: str) -> None:
        logs = self.clients.client("logs", r.account)
        with self._lock, contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_group(logGroupName=FLOW_LOG_GROUP)
        logs.create_log_stream(logGroupName=FLOW_LOG_GROUP, logStreamName=f"{eni}-all")
        events = flow_records(r, eni, self.spec, self.timeline, self.seed)
        if events:
            logs.put_log_events(
                logGroupName=FLOW_LOG_GROUP, logStreamName=f"{eni}-all", logEvents=events
            )

    def _instance(self, r: Instance) -> None:
        ec2 = self._ec2(r.account)
        root = {
            "DeviceName": "/dev/sda1",
            "Ebs": {"VolumeSize": 8, "VolumeType": "gp3", "DeleteOnTermination": True},
        }
        # moto's RunInstances drops a mapping's IOPS and throughput: volumes that provision
        # them are created and attached once the instance runs.
        provisioned = {
            i for i, v in enumerate(r.volumes) if _iops(v.volume_type, v.iops, v.throughput)
        }
        mappings = [root] + [
            {
                "DeviceName": data_device(i),
                "Ebs": {
                    "VolumeSize": v.size,
                    "VolumeType": v.volume_type,
                    "DeleteOnTermination": True,
                },
            }
            for i, v in enumerate(r.volumes)
            if i not in provisioned
        ]
        placement: dict[str, Any] = {"Placement": {"AvailabilityZone": r.zone}}
        if r.nat is not None:
            placement["SubnetId"] = self.out.nats[r.nat].subnet_id
            placement["Placement"] = {"AvailabilityZone": ZONE}
        resp = ec2.run_instances(
            ImageId=IMAGE_ID,
            MinCount=1,
            MaxCount=1,
            InstanceType=r.instance_type,
            BlockDeviceMappings=mappings,
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": _tags(r.name, r.tags)},
                {"ResourceType": "volume", "Tags": _tags(r.name, r.tags)},
            ],
            **placement,
        )
        inst = resp["Instances"][0]
        iid = inst["InstanceId"]
        by_device = {
            m["DeviceName"]: m["Ebs"]["VolumeId"] for m in inst.get("BlockDeviceMappings", [])
        }
        for i in sorted(provisioned):
            v = r.volumes[i]
            vid = ec2.create_volume(
                AvailabilityZone=r.zone if r.nat is None else ZONE,
                Size=v.size,
                VolumeType=v.volume_type,
                **_iops(v.volume_type, v.iops, v.throughput),
                TagSpecifications=[{"ResourceType": "volume", "Tags": _tags(r.name, r.tags)}],
            )["VolumeId"]
            ec2.attach_volume(VolumeId=vid, InstanceId=iid, Device=data_device(i))
            by_device[data_device(i)] = vid
        data = [by_device[data_device(i)] for i in range(len(r.volumes))]
        with self._lock:
            self.out.ids[r.name] = iid
            self.out.root_volumes[r.name] = by_device["/dev/sda1"]
            self.out.data_volumes[r.name] = data
        if r.state == "stopped":
            ec2.stop_instances(InstanceIds=[iid])
        events = self.timeline.of(r.name)
        self._dated("instance", r.account, iid, created=events.created, stopped=events.stopped)
        first, last = events.created, events.stopped
        business = r.schedule == "business_hours"
        for metric, profile, unit, namespace in (
            ("CPUUtilization", r.cpu, "Percent", "AWS/EC2"),
            ("mem_used_percent", r.memory, "Percent", "CWAgent"),
        ):
            if profile is not None:
                self._metric(
                    r.account,
                    namespace,
                    metric,
                    "InstanceId",
                    iid,
                    profile,
                    unit,
                    business=business,
                    first=first,
                    last=last,
                )
        if r.network_mb is not None:
            scaled = Profile(
                mean=r.network_mb.mean * 1e6,
                peak=r.network_mb.peak * 1e6,
                quiet_days=r.network_mb.quiet_days,
            )
            self._metric(
                r.account,
                "AWS/EC2",
                "NetworkOut",
                "InstanceId",
                iid,
                scaled,
                "Bytes",
                first=first,
                last=last,
            )
        for vid, v in zip(data, r.volumes, strict=True):
            # Reads and writes share one shape, so the busiest hour of their sum (what the
            # handbook sizes a volume to) holds the whole recorded peak.
            for metric, profile, share, scale, shape in (
                ("VolumeReadOps", v.ops, 0.6, 3600.0, "VolumeOps"),
                ("VolumeWriteOps", v.ops, 0.4, 3600.0, "VolumeOps"),
                ("VolumeReadBytes", v.mbps, 0.7, 3600e6, "VolumeBytes"),
                ("VolumeWriteBytes", v.mbps, 0.3, 3600e6, "VolumeBytes"),
            ):
                if profile is None:
                    continue
                # Each hour's sum: the rate times the hour (the shares add up to the rate).
                per_hour = Profile(
                    mean=profile.mean * share * scale,
                    peak=profile.peak * share * scale,
                    quiet_days=profile.quiet_days,
                )
                self._metric(
                    r.account,
                    "AWS/EBS",
                    metric,
                    "VolumeId",
                    vid,
                    per_hour,
                    "Bytes" if "Bytes" in metric else "Count",
                    first=first,
                    last=last,
                    shape=shape,
                )

    def _volume(self, r: Volume) -> None:
        resp = self._ec2(r.account).create_volume(
            AvailabilityZone=ZONE,
            Size=r.size,
            VolumeType=r.volume_type,
            **_iops(r.volume_type, r.iops),
            TagSpecifications=[{"ResourceType": "volume", "Tags": _tags(r.name, r.tags)}],
        )
        self.out.ids[r.name] = resp["VolumeId"]
        self._dated("volume", r.account, resp["VolumeId"], created=self.timeline.of(r.name).created)

    def _snapshot(self, r: Snapshot) -> None:
        ec2 = self._ec2(r.account)
        tags = _tags(r.name, r.tags)
        created = self.timeline.of(r.name).created
        if r.image:
            # An AMI registered here owns its own root snapshot: that one is the look-alike.
            image = ec2.register_image(Name=f"{r.name}-image", RootDeviceName="/dev/sda1")
            desc = ec2.describe_images(ImageIds=[image["ImageId"]])["Images"][0]
            snap_id = next(
                m["Ebs"]["SnapshotId"] for m in desc["BlockDeviceMappings"] if "Ebs" in m
            )
            ec2.create_tags(Resources=[snap_id], Tags=tags)
            self.out.ids[r.name] = snap_id
            self._dated("image", r.account, image["ImageId"], created=created)
            self._dated("snapshot", r.account, snap_id, created=created)
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
        self._dated("snapshot", r.account, snap["SnapshotId"], created=created)

    def _address(self, r: Address) -> None:
        ec2 = self._ec2(r.account)
        alloc = ec2.allocate_address(
            Domain="vpc",
            TagSpecifications=[{"ResourceType": "elastic-ip", "Tags": _tags(r.name, r.tags)}],
        )
        self.out.ids[r.name] = alloc["AllocationId"]
        self.out.ips[r.name] = alloc["PublicIp"]
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
        groups = ["tg"] + (["tg-green"] if r.standby_group else [])
        arns = [
            elb.create_target_group(
                Name=f"{r.name}-{g}", Protocol="HTTP", Port=80, VpcId=vpc_id, TargetType="instance"
            )["TargetGroups"][0]["TargetGroupArn"]
            for g in groups
        ]
        if r.listener:
            listener = elb.create_listener(
                LoadBalancerArn=arn,
                Protocol="HTTP",
                Port=80,
                DefaultActions=[{"Type": "forward", "TargetGroupArn": arns[0]}],
            )["Listeners"][0]["ListenerArn"]
            if r.standby_group:
                elb.create_rule(
                    ListenerArn=listener,
                    Priority=10,
                    Conditions=[{"Field": "path-pattern", "Values": ["/next/*"]}],
                    Actions=[{"Type": "forward", "TargetGroupArn": arns[1]}],
                )
        if r.targets:
            elb.register_targets(
                TargetGroupArn=arns[0],
                Targets=[{"Id": self.out.ids[t], "Port": 80} for t in r.targets],
            )
        events = self.timeline.of(r.name)
        self._dated("load_balancer", r.account, arn, created=events.created)
        if r.requests is not None:
            self._metric(
                r.account,
                "AWS/ApplicationELB",
                "RequestCount",
                "LoadBalancer",
                self.out.lb_dimensions[r.name],
                r.requests,
                "Count",
                first=events.created,
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
        events = self.timeline.of(r.name)
        self._dated("database", r.account, r.name, created=events.created)
        memory_bytes = load_prices().database(r.instance_class).memory_gib * 2**30
        for metric, profile, unit in (
            ("DatabaseConnections", r.connections, "Count"),
            ("CPUUtilization", r.cpu, "Percent"),
            ("FreeableMemory", r.memory, "Bytes"),
        ):
            if profile is not None:
                self._metric(
                    r.account,
                    "AWS/RDS",
                    metric,
                    "DBInstanceIdentifier",
                    r.name,
                    profile,
                    unit,
                    first=events.created,
                    # FreeableMemory falls as use rises: the lowest free memory is at the peak.
                    transform=(
                        (lambda used: memory_bytes * (1 - used / 100))
                        if metric == "FreeableMemory"
                        else None
                    ),
                )

    def _bucket(self, r: Bucket) -> None:
        s3 = self.clients.client("s3", r.account)
        s3.create_bucket(Bucket=r.name)
        if r.tags:
            s3.put_bucket_tagging(
                Bucket=r.name,
                Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in r.tags.items()]},
            )
        if r.versions_gb:
            s3.put_bucket_versioning(Bucket=r.name, VersioningConfiguration={"Status": "Enabled"})
        if r.reads is not None:
            s3.put_bucket_metrics_configuration(
                Bucket=r.name, Id="EntireBucket", MetricsConfiguration={"Id": "EntireBucket"}
            )
        self.out.ids[r.name] = r.name
        events = self.timeline.of(r.name)
        self._dated("bucket", r.account, r.name, created=events.created)
        if r.reads is not None:
            self._metric(
                r.account,
                "AWS/S3",
                "GetRequests",
                "BucketName",
                r.name,
                r.reads,
                "Count",
                first=events.created,
                dims=[{"Name": "FilterId", "Value": "EntireBucket"}],
            )
        for metric, storage, value in (
            ("BucketSizeBytes", "StandardStorage", r.size_gb * 1e9),
            ("BucketSizeBytes", "NoncurrentVersionStorage", r.versions_gb * 1e9),
            ("NumberOfObjects", "AllStorageTypes", float(objects_of(r))),
        ):
            if value:
                self._daily(r, metric, storage, value, events.created)

    def _daily(self, r: Bucket, metric: str, storage: str, value: float, first: datetime) -> None:
        """One datapoint a day, as S3 publishes its storage metrics."""
        start = max(first, self.out.now - timedelta(days=self.spec.metric_days))
        day = start.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        points = []
        while day < self.out.now:
            points.append(
                {
                    "MetricName": metric,
                    "Dimensions": [
                        {"Name": "BucketName", "Value": r.name},
                        {"Name": "StorageType", "Value": storage},
                    ],
                    "Timestamp": day,
                    "Value": round(value, 0),
                    "Unit": "Bytes" if metric == "BucketSizeBytes" else "Count",
                }
            )
            day += timedelta(days=1)
        with self._lock:
            self._metrics.setdefault((r.account or MANAGEMENT_ACCOUNT, "AWS/S3"), []).extend(points)

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
        events = self.timeline.of(r.name)
        self._dated("asg", r.account, r.name, created=events.created)
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

    # --- budgets (after billing: their calculated spend comes from it) -----------------------

    def budgets(self, spend: dict[str, tuple[float, float]]) -> None:
        """Create the scenario's budgets with their actual and forecast spend.

        Args:
            spend: Budget name -> (actual spend this month, forecast for the month), USD.
        """
        for r in self.spec.resources:
            if isinstance(r, Budget):
                actual, forecast = spend.get(r.name, (0.0, 0.0))
                if r.forecast_share is not None:
                    r = r.model_copy(update={"amount": round(forecast * r.forecast_share, 2)})
                self.clients.client("budgets").create_budget(
                    AccountId=MANAGEMENT_ACCOUNT,
                    Budget={
                        **budget_document(r),
                        "CalculatedSpend": {
                            "ActualSpend": {"Amount": f"{actual:.2f}", "Unit": "USD"},
                            "ForecastedSpend": {"Amount": f"{forecast:.2f}", "Unit": "USD"},
                        },
                    },
                    NotificationsWithSubscribers=notifications_document(r),
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
        first: datetime | None = None,
        last: datetime | None = None,
        dims: list[dict[str, str]] | None = None,
        extra: Callable[[datetime], float] | None = None,
        transform: Callable[[float], float] | None = None,
        shape: str | None = None,
    ) -> None:
        """Hourly datapoints of one metric between ``first`` and ``last`` (when set).

        ``extra`` adds a value that depends on the time (a spike); ``transform`` maps each
        value of the profile to the metric's (a metric that falls as use rises). Metrics of
        one resource with the same ``shape`` rise and fall together (default: their own).
        """
        points = series(
            profile,
            self.out.now,
            self.spec.metric_days,
            _seed_of(self.seed, namespace, shape or metric, dim_value),
            business_only=business,
            first=first,
            last=last,
        )
        if transform is not None:
            points = [(t, transform(v)) for t, v in points]
        with self._lock:
            data = self._metrics.setdefault((account or MANAGEMENT_ACCOUNT, namespace), [])
            data.extend(
                {
                    "MetricName": metric,
                    "Dimensions": [{"Name": dim, "Value": dim_value}, *(dims or [])],
                    "Timestamp": t,
                    "Value": round(v + (extra(t) if extra is not None else 0.0), 3),
                    "Unit": unit,
                }
                for t, v in points
            )

    def _put_metrics(self, account: str, namespace: str, data: list[dict[str, Any]]) -> None:
        self.clients.client("cloudwatch", account).put_metric_data(
            Namespace=namespace, MetricData=data
        )


def objects_of(r: Bucket) -> int:
    """How many objects a bucket holds (1 MB each unless the scenario says)."""
    return r.objects if r.objects is not None else max(1, round(r.size_gb * 1000))


def budget_document(r: Budget) -> dict[str, Any]:
    """The ``Budget`` argument of ``create_budget`` for a budget spec."""
    doc: dict[str, Any] = {
        "BudgetName": r.name,
        "BudgetLimit": {"Amount": f"{r.amount:.2f}", "Unit": "USD"},
        "TimeUnit": r.time_unit,
        "BudgetType": "COST",
    }
    filters: dict[str, list[str]] = {}
    if r.team:
        filters["TagKeyValue"] = [f"user:team${r.team}"]
    if r.accounts:
        filters["LinkedAccount"] = list(r.accounts)
    if r.services:
        filters["Service"] = [load_prices().service_name(s) for s in r.services]
    if filters:
        doc["CostFilters"] = filters
    return doc


def notifications_document(r: Budget) -> list[dict[str, Any]]:
    """The ``NotificationsWithSubscribers`` argument of ``create_budget`` for a budget spec."""
    return [
        {
            "Notification": {
                "NotificationType": n.notification_type,
                "ComparisonOperator": n.comparison,
                "Threshold": n.threshold,
                "ThresholdType": n.threshold_type,
            },
            "Subscribers": [{"SubscriptionType": "EMAIL", "Address": a} for a in n.subscribers],
        }
        for n in r.notifications
    ]
