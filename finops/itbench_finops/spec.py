"""Scenario spec and submission models of the FinOps domain."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from itbench import ScenarioSpec, Submission
from itbench_finops.families import FAMILIES, Family, causes_text
from itbench_finops.server import MANAGEMENT_ACCOUNT


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Profile(_Strict):
    """Hourly utilization history of one metric with a daily and weekly shape.

    ``mean`` and ``peak`` are in the metric's unit (percent for CPU, a count for connections
    and requests). ``quiet_days`` is the number of most recent days without datapoints (the
    resource was stopped or idle then).
    """

    mean: float = Field(ge=0)
    peak: float = Field(ge=0)
    quiet_days: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _peak_above_mean(self) -> Profile:
        if self.peak < self.mean:
            raise ValueError("peak must be at least mean")
        return self


class _Resource(_Strict):
    name: str = Field(min_length=1, description="Value of the Name tag; unique in the scenario.")
    account: str | None = Field(default=None, description="Member account id; default: main.")
    tags: dict[str, str] = Field(default_factory=dict)
    launched_days_ago: int | None = Field(
        default=None, ge=0, description="Billed only for this many recent days."
    )


class AttachedVolume(_Strict):
    """A data volume attached to an instance."""

    size: int = Field(gt=0)
    volume_type: str = "gp3"
    iops: int | None = Field(default=None, gt=0, description="Provisioned IOPS (io1/io2).")


class Instance(_Resource):
    """An EC2 instance (with an 8 GiB root volume and optional data volumes)."""

    kind: Literal["instance"]
    instance_type: str
    state: Literal["running", "stopped"] = "running"
    volumes: list[AttachedVolume] = Field(default_factory=list)
    cpu: Profile | None = None
    network_mb: Profile | None = Field(default=None, description="NetworkOut, MB per hour.")
    stopped_days_ago: int | None = Field(default=None, ge=0)
    previous_type: str | None = Field(default=None, description="Type before a recent change.")
    changed_days_ago: int | None = Field(default=None, ge=0)
    schedule: Literal["always", "business_hours"] = "always"


class Volume(_Resource):
    """An EBS volume that is not attached to any instance."""

    kind: Literal["volume"]
    size: int = Field(gt=0)
    volume_type: str = "gp2"
    iops: int | None = Field(default=None, gt=0, description="Provisioned IOPS (io1/io2).")
    created_days_ago: int = Field(default=60, ge=0)


class Snapshot(_Resource):
    """An EBS snapshot, of a volume of the scenario or of one long deleted."""

    kind: Literal["snapshot"]
    size: int = Field(gt=0)
    of_instance: str | None = Field(default=None, description="Snapshot of this instance's root.")
    created_days_ago: int = Field(default=30, ge=0)
    image: bool = Field(default=False, description="A registered AMI uses the snapshot.")


class Address(_Resource):
    """An Elastic IP, associated with an instance of the scenario or not."""

    kind: Literal["address"]
    instance: str | None = None


class LoadBalancer(_Resource):
    """An application load balancer with one target group."""

    kind: Literal["load_balancer"]
    targets: list[str] = Field(default_factory=list, description="Instance names.")
    requests: Profile | None = Field(default=None, description="Requests per hour.")


class Database(_Resource):
    """An RDS instance."""

    kind: Literal["database"]
    instance_class: str
    engine: str = "postgres"
    storage_gb: int = Field(default=100, gt=0)
    connections: Profile | None = None
    cpu: Profile | None = None


class Bucket(_Resource):
    """An S3 bucket (sizes are billed, not stored)."""

    kind: Literal["bucket"]
    size_gb: float = Field(default=100, ge=0)
    egress_gb_day: float = Field(default=0, ge=0)
    spike_gb_day: float = Field(default=0, ge=0, description="Extra egress per day of a spike.")
    spike_days: int = Field(default=0, ge=0, description="Most recent days of the spike.")


class AutoScalingGroup(_Resource):
    """An Auto Scaling group; ``load_vcpus`` is the busy vCPUs of the whole group per hour."""

    kind: Literal["asg"]
    instance_type: str
    min_size: int = Field(ge=0)
    max_size: int = Field(ge=0)
    desired: int = Field(ge=0)
    load_vcpus: Profile


class BudgetNotification(_Strict):
    """One notification of a budget."""

    notification_type: Literal["ACTUAL", "FORECASTED"] = "ACTUAL"
    comparison: Literal["GREATER_THAN", "LESS_THAN", "EQUAL_TO"] = "GREATER_THAN"
    threshold: float = Field(gt=0)
    threshold_type: Literal["PERCENTAGE", "ABSOLUTE_VALUE"] = "PERCENTAGE"
    subscribers: list[str] = Field(default_factory=lambda: ["finops@example.com"])


class Budget(_Resource):
    """A cost budget of the main account."""

    kind: Literal["budget"]
    amount: float = Field(gt=0)
    time_unit: Literal["DAILY", "MONTHLY", "QUARTERLY", "ANNUALLY"] = "MONTHLY"
    notifications: list[BudgetNotification] = Field(default_factory=list)


Resource = Annotated[
    Instance
    | Volume
    | Snapshot
    | Address
    | LoadBalancer
    | Database
    | Bucket
    | AutoScalingGroup
    | Budget,
    Field(discriminator="kind"),
]


#: Fields whose values the price table must list, by resource model: (field path, table).
PRICED_FIELDS: tuple[tuple[type[_Resource], tuple[tuple[str, str], ...]], ...] = (
    (
        Instance,
        (
            ("instance_type", "ec2"),
            ("previous_type", "ec2"),
            ("volumes.volume_type", "ebs_gb_month"),
        ),
    ),
    (AutoScalingGroup, (("instance_type", "ec2"),)),
    (Volume, (("volume_type", "ebs_gb_month"),)),
    (Database, (("instance_class", "rds"),)),
)


def _values(model: BaseModel, path: str) -> list[Any]:
    """The values at a dotted field path, through lists, without the unset ones."""
    values: list[Any] = [model]
    for part in path.split("."):
        values = [getattr(v, part) for v in values]
        values = [x for v in values for x in (v if isinstance(v, list) else [v])]
    return [v for v in values if v is not None]


class Account(_Strict):
    """A member account of the organization."""

    id: str = Field(pattern=r"^[0-9]{12}$")
    name: str


class Truth(_Strict):
    """Ground truth, read only by the evaluator and the oracle.

    :data:`itbench_finops.families.FAMILIES` says which fields each family needs and reads.
    ``incident: false`` marks a control scenario whose right answer is "no incident".
    """

    incident: bool = True
    account: str | None = Field(
        default=None, description="Root-cause account id (anomaly); default: management."
    )
    service: str | None = Field(
        default=None, description="Root-cause service key of the price table (anomaly)."
    )
    resource: str | None = Field(default=None, description="Root-cause resource name (anomaly).")
    cause: str | None = Field(default=None, description=causes_text())
    removable: list[str] = Field(
        default_factory=list, description="Names of the waste (idle); the rest is in use."
    )
    targets: list[str] = Field(
        default_factory=list, description="Instance names to rightsize (rightsizing)."
    )
    target_cpu: float = Field(
        default=80.0, gt=0, le=100, description="Highest CPU percent at the recorded peak."
    )
    mode: Literal["apply", "recommend"] = Field(
        default="apply", description="Rightsizing: change the instances, or only recommend."
    )
    budget: Budget | None = Field(default=None, description="The budget as the policy wants it.")
    group: str | None = Field(default=None, description="Auto Scaling group name (autoscaling).")
    owners: dict[str, str] = Field(
        default_factory=dict, description="Name -> owner of each untagged resource (allocation)."
    )
    pass_fraction: float = Field(
        default=0.9, gt=0, le=1, description="Share of the optimum that passes."
    )


class FinOpsSpec(ScenarioSpec):
    """A FinOps scenario: an account inventory, its usage history and the ground truth."""

    domain: Literal["finops"]
    family: Family
    accounts: list[Account] = Field(default_factory=list)
    billing_days: int = Field(default=30, ge=7, le=90)
    metric_days: int = Field(default=14, ge=14, le=30)
    hourly_billing: bool = Field(default=False, description="Hourly rows in the billing export.")
    resources: list[Resource] = Field(default_factory=list)
    truth: Truth

    @model_validator(mode="after")
    def _consistent(self) -> FinOpsSpec:
        names = [r.name for r in self.resources]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"resource names must be unique; repeated: {', '.join(dup)}")
        known = set(names)
        accounts = {a.id for a in self.accounts}
        for r in self.resources:
            if r.account is not None and r.account not in accounts:
                raise ValueError(f"resource {r.name!r}: account {r.account} is not in accounts")
        refs = [*self.truth.removable, *self.truth.targets, *self.truth.owners]
        if self.truth.resource:
            refs.append(self.truth.resource)
        if self.truth.group:
            refs.append(self.truth.group)
        missing = sorted({n for n in refs if n not in known})
        if missing:
            raise ValueError(f"truth names unknown resources: {', '.join(missing)}")
        problems = [*self._unpriced(), *self._dangling(), *self._truth_problems()]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _unpriced(self) -> list[str]:
        """Types, classes and volume types the price table does not know."""
        from itbench_finops.prices import load_prices

        raw = load_prices().raw
        out: list[str] = []
        for r in self.resources:
            for model, fields in PRICED_FIELDS:
                if not isinstance(r, model):
                    continue
                for path, table in fields:
                    for value in _values(r, path):
                        if value not in raw[table]:
                            out.append(
                                f"resource {r.name!r}: {path} {value!r} is not in the price "
                                f"table (priced: {', '.join(raw[table])})"
                            )
        return out

    def _dangling(self) -> list[str]:
        """References to instances that are not in the scenario, or to the wrong kind."""
        instances = {r.name for r in self.resources if isinstance(r, Instance)}
        out = []
        for r in self.resources:
            refs: list[tuple[str, str | None]] = []
            if isinstance(r, Address):
                refs = [("instance", r.instance)]
            elif isinstance(r, Snapshot):
                refs = [("of_instance", r.of_instance)]
            elif isinstance(r, LoadBalancer):
                refs = [("targets", t) for t in r.targets]
            for field, name in refs:
                if name is not None and name not in instances:
                    out.append(f"resource {r.name!r}: {field} {name!r} is not an instance")
        for name in self.truth.targets:
            if name not in instances:
                out.append(f"truth.targets: {name!r} is not an instance")
        groups = {r.name for r in self.resources if isinstance(r, AutoScalingGroup)}
        if self.truth.group is not None and self.truth.group not in groups:
            out.append(f"truth.group: {self.truth.group!r} is not an Auto Scaling group")
        return out

    def _truth_problems(self) -> list[str]:
        """Truth fields the family needs but lacks, and values outside their closed sets."""
        from itbench_finops.prices import load_prices

        t = self.truth
        rule = FAMILIES[self.family]
        out = []
        if t.incident:
            for name in rule.required:
                if not getattr(t, name):
                    out.append(f"family {self.family} needs truth.{name}")
        if rule.causes and t.cause is not None and t.cause not in rule.causes:
            out.append(
                f"truth.cause {t.cause!r} is not a cause of family {self.family} "
                f"(one of: {', '.join(rule.causes)})"
            )
        services = load_prices().raw["services"]
        if t.service is not None and t.service not in services:
            out.append(f"truth.service {t.service!r} is unknown (one of: {', '.join(services)})")
        accounts = [MANAGEMENT_ACCOUNT, *(a.id for a in self.accounts)]
        if t.account is not None and t.account not in accounts:
            out.append(
                f"truth.account {t.account!r} is not an account of the scenario "
                f"(one of: {', '.join(accounts)})"
            )
        return out

    def resource(self, name: str) -> Resource:
        """The resource named ``name``."""
        for r in self.resources:
            if r.name == name:
                return r
        raise KeyError(name)


class Recommendation(BaseModel):
    """A recommended change of one resource."""

    resource_id: str = Field(description="Instance id (i-...) or database identifier.")
    recommended_type: str = Field(description="Instance type or database class to move to.")


class FinOpsSubmission(Submission):
    """What a FinOps agent reports. Fill the fields the task asks for.

    Remediation itself is scored from the account's final state, not from this report.
    """

    incident: bool = Field(
        default=True, description="False to state that the account has nothing to fix."
    )
    account_id: str | None = Field(default=None, description="Root-cause account id.")
    service: str | None = Field(default=None, description="Root-cause service (Cost Explorer).")
    resource_id: str | None = Field(default=None, description="Root-cause resource id.")
    resource_type: str | None = Field(
        default=None,
        description="Root-cause resource type, as the billing export's ResourceType names it.",
    )
    cause: str | None = Field(default=None, description=causes_text())
    recommendations: list[Recommendation] = Field(default_factory=list)
    allocations: dict[str, float] = Field(
        default_factory=dict, description="Owner -> cost (USD) over the billing export's period."
    )
    commitment_hourly: float | None = Field(
        default=None, ge=0, description="Savings-plan commitment, USD per hour."
    )
