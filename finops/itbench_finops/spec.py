"""Scenario spec and submission models of the FinOps domain.

A scenario declares an account (``resources``), the organization's written conventions
(``documents``, seeded as pages of the engineering handbook in S3) and ground truth. It may
also declare sets that every trial draws from (:mod:`itbench_finops.draw`): ``candidates``,
resources that appear in one of several ``forms`` (the waste, or a look-alike that must stay),
and ``settings``, values substituted for ``${name}`` placeholders. The environment, the
evaluator and the oracle receive the drawn, concrete spec.
"""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from itbench import ScenarioSpec, Submission
from itbench_finops.families import FAMILIES, Family, causes_text
from itbench_finops.server import MANAGEMENT_ACCOUNT

#: Availability zones a resource may be placed in.
Zone = Literal["us-east-1a", "us-east-1b", "us-east-1c"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Profile(_Strict):
    """Hourly utilization history of one metric with a daily and weekly shape.

    ``mean`` and ``peak`` are in the metric's unit (percent for CPU and memory, a count for
    connections, requests and I/O operations per second). ``quiet_days`` is the number of most
    recent days without datapoints (the resource was idle then); a stopped instance has none
    after it stopped and a recent one none before it was created, whatever this says.
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
        default=None,
        ge=0,
        description="Created this many days ago (billed only since); default: long before "
        "the billing period.",
    )


class AttachedVolume(_Strict):
    """A data volume attached to an instance."""

    size: int = Field(gt=0)
    volume_type: str = "gp3"
    iops: int | None = Field(default=None, gt=0, description="Provisioned IOPS (io1/io2, gp3).")
    throughput: int | None = Field(default=None, gt=0, description="gp3 throughput, MB/s.")
    ops: Profile | None = Field(
        default=None, description="I/O operations per second (VolumeReadOps + VolumeWriteOps)."
    )
    mbps: Profile | None = Field(
        default=None, description="MB per second read and written (VolumeReadBytes + ...)."
    )


class Instance(_Resource):
    """An EC2 instance (with an 8 GiB root volume and optional data volumes)."""

    kind: Literal["instance"]
    instance_type: str
    state: Literal["running", "stopped"] = "running"
    zone: Zone = "us-east-1a"
    volumes: list[AttachedVolume] = Field(default_factory=list)
    cpu: Profile | None = None
    memory: Profile | None = Field(
        default=None, description="Memory used, percent (the CloudWatch agent's metric)."
    )
    network_mb: Profile | None = Field(default=None, description="NetworkOut, MB per hour.")
    stopped_days_ago: int | None = Field(
        default=None, ge=0, description="Stopped this many days ago; default: before the period."
    )
    previous_type: str | None = Field(default=None, description="Type before a recent change.")
    changed_days_ago: int | None = Field(default=None, ge=0)
    schedule: Literal["always", "business_hours"] = "always"
    reserved: bool = Field(
        default=False, description="Covered by a reserved instance (billed at the reserved rate)."
    )
    nat: str | None = Field(
        default=None, description="Runs in the private subnet behind this NAT gateway."
    )
    cross_az_gb_day: float = Field(
        default=0, ge=0, description="Data sent to other availability zones, GB per day."
    )
    spike_gb_day: float = Field(default=0, ge=0, description="Extra cross-zone GB a spike day.")
    spike_days: int = Field(default=0, ge=0, description="Most recent days of the spike.")
    spike_ramp: list[float] = Field(
        default_factory=list,
        description="Extra usage of the spike's first days, before it reaches its full size.",
    )


class Volume(_Resource):
    """An EBS volume that is not attached to any instance."""

    kind: Literal["volume"]
    size: int = Field(gt=0)
    volume_type: str = "gp2"
    iops: int | None = Field(default=None, gt=0, description="Provisioned IOPS (io1/io2, gp3).")
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
    listener: bool = Field(default=True, description="A listener forwards to the target group.")
    standby_group: bool = Field(
        default=False,
        description="A second, empty target group, attached by a listener rule (blue/green).",
    )


class Database(_Resource):
    """An RDS instance."""

    kind: Literal["database"]
    instance_class: str
    engine: str = "postgres"
    storage_gb: int = Field(default=100, gt=0)
    connections: Profile | None = None
    cpu: Profile | None = None
    memory: Profile | None = Field(
        default=None, description="Memory used, percent (published as FreeableMemory)."
    )


class Bucket(_Resource):
    """An S3 bucket (sizes are billed, not stored)."""

    kind: Literal["bucket"]
    size_gb: float = Field(default=100, ge=0)
    egress_gb_day: float = Field(default=0, ge=0)
    spike_gb_day: float = Field(default=0, ge=0, description="Extra egress per day of a spike.")
    spike_days: int = Field(default=0, ge=0, description="Most recent days of the spike.")
    spike_ramp: list[float] = Field(
        default_factory=list,
        description="Extra usage of the spike's first days, before it reaches its full size.",
    )
    reads: Profile | None = Field(
        default=None, description="GET requests per hour (the bucket's request metrics)."
    )
    objects: int | None = Field(
        default=None, ge=0, description="Objects stored (NumberOfObjects); default: 1 MB each."
    )
    versions_gb: float = Field(
        default=0, ge=0, description="Noncurrent object versions kept, GB (versioning on)."
    )


class NatGateway(_Resource):
    """A NAT gateway in a public subnet, routing a private subnet of its own."""

    kind: Literal["nat_gateway"]
    gb_day: float = Field(default=0, ge=0, description="Data processed, GB per day.")
    s3_share: float = Field(
        default=0, ge=0, le=1, description="Share of the processed data that goes to S3."
    )
    s3_region: Literal["us-east-1", "eu-west-1", "us-west-2"] = Field(
        default="us-east-1",
        description="Region of the buckets its S3 traffic reaches (an endpoint serves only its "
        "VPC's region).",
    )
    spike_gb_day: float = Field(default=0, ge=0, description="Extra GB a spike day.")
    spike_days: int = Field(default=0, ge=0, description="Most recent days of the spike.")
    spike_ramp: list[float] = Field(
        default_factory=list,
        description="Extra usage of the spike's first days, before it reaches its full size.",
    )


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
    team: str | None = Field(
        default=None, description="Only costs tagged with this `team` (the budget's filter)."
    )
    accounts: list[str] = Field(
        default_factory=list, description="Only costs of these accounts (the budget's filter)."
    )
    services: list[str] = Field(
        default_factory=list,
        description="Only costs of these services, by price-table key (the budget's filter).",
    )
    forecast_share: float | None = Field(
        default=None,
        gt=0,
        description="Set the limit to this share of the budget's forecast at seeding (below 1: "
        "its forecast alert has fired); replaces `amount`.",
    )


Resource = Annotated[
    Instance
    | Volume
    | Snapshot
    | Address
    | LoadBalancer
    | Database
    | Bucket
    | NatGateway
    | AutoScalingGroup
    | Budget,
    Field(discriminator="kind"),
]
_RESOURCE: TypeAdapter[Resource] = TypeAdapter(Resource)


class Document(_Strict):
    """A page of the engineering handbook, an S3 object of the management account.

    The text (``text``, or the shipped page ``page`` of ``data/handbook/``) may hold
    ``${setting}`` placeholders, ``${list:FORM}`` (a bullet list of the names of the candidates
    drawn in form ``FORM``), ``${notes:FORM}`` (their forms' ``note`` lines, where ``{name}``,
    ``{date}``, ``{id}`` and ``{ip}`` stand for the resource's name, the day its event started,
    its id and its public IP), ``${date:NAME}``, ``${date:+N}``, ``${id:NAME}``,
    ``${ip:NAME}`` and ``${rule:NAME}`` (one of the wordings of a handbook rule of
    ``data/conventions.yaml``, drawn per trial; the organization-wide conventions its
    placeholders use are drawn as settings when the scenario does not declare them).
    """

    key: str = Field(min_length=1, description="Object key in the handbook bucket.")
    text: str = Field(default="", description="The page's Markdown text.")
    page: str | None = Field(
        default=None, description="A shipped page to use as the text (its file name's stem)."
    )

    @model_validator(mode="before")
    @classmethod
    def _shipped(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not data.get("page") or data.get("text"):
            return data
        from itbench_finops.handbook import shipped_page

        return {**data, "text": shipped_page(str(data["page"]))}


class Form(_Strict):
    """One way a candidate resource may appear in a trial."""

    role: Literal["waste", "keep"] = Field(
        default="keep",
        description="waste: part of the truth's waste; keep: a look-alike. A `${setting}` "
        "whose drawn value is one of them makes the role follow a drawn convention.",
    )
    set: dict[str, Any] = Field(
        default_factory=dict,
        description="Resource fields this form sets (tags are merged with the resource's).",
    )
    cause: str | None = Field(
        default=None, description="The truth's cause when drawn (anomaly, forecast, budget)."
    )
    service: str | None = Field(
        default=None, description="The truth's service key when drawn (anomaly, forecast)."
    )
    owner: str | None = Field(
        default=None, description="The resource's owner when drawn (allocation)."
    )
    note: str | None = Field(
        default=None, description="A line for the documents' `${notes:FORM}` placeholder."
    )
    truth: dict[str, Any] = Field(
        default_factory=dict,
        description="Truth fields this form adds when drawn (lists are extended, mappings "
        "merged, other values set).",
    )


class Candidate(_Strict):
    """A resource drawn per trial in one of its forms."""

    resource: dict[str, Any] = Field(description="The fields every form shares (with `kind`).")
    forms: dict[str, Form] = Field(min_length=1)

    @property
    def name(self) -> str:
        """The resource's name."""
        return str(self.resource.get("name", ""))

    def build(self, form: str) -> Resource:
        """The resource in ``form``.

        Raises:
            ValidationError: the form makes no valid resource.
        """
        data = dict(self.resource)
        for key, value in self.forms[form].set.items():
            if key == "tags" and isinstance(value, dict):
                data["tags"] = {**data.get("tags", {}), **value}
            else:
                data[key] = value
        return _RESOURCE.validate_python(data)

    def waste_forms(self) -> list[str]:
        """The names of the forms that make it waste."""
        return [n for n, f in self.forms.items() if f.role == "waste"]

    def keep_forms(self) -> list[str]:
        """The names of the forms that make it a look-alike."""
        return [n for n, f in self.forms.items() if f.role == "keep"]


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
    ``incident: false`` marks a control scenario whose right answer is "no incident". The
    fields a drawn candidate feeds (``waste``, ``resource``, ``cause``, ``service``,
    ``account``, ``owners``) are completed by the draw. Scenario files of the first catalog
    still load: ``removable`` and ``targets`` are read as ``waste``, ``budget`` as the only
    entry of ``budgets``.
    """

    @model_validator(mode="before")
    @classmethod
    def _first_catalog(cls, data: Any) -> Any:
        """The first catalog's field names, as their successors."""
        if not isinstance(data, dict) or not {"removable", "targets", "budget"} & set(data):
            return data
        data = dict(data)
        old = [*(data.pop("removable", None) or []), *(data.pop("targets", None) or [])]
        data["waste"] = [*(data.get("waste") or []), *old]
        if data.get("budget") is not None:
            data["budgets"] = [*(data.get("budgets") or []), data["budget"]]
        data.pop("budget", None)
        return data

    incident: bool = True
    account: str | None = Field(
        default=None, description="Root-cause account id (anomaly); default: management."
    )
    service: str | None = Field(
        default=None, description="Root-cause service key of the price table (anomaly)."
    )
    resource: str | None = Field(default=None, description="Root-cause resource name (anomaly).")
    cause: str | None = Field(default=None, description=causes_text())
    waste: list[str] = Field(
        default_factory=list,
        description="Names of the items to fix (idle: remove; rightsizing: resize; storage: "
        "migrate or add the lifecycle rule; transfer: route S3 traffic around the NAT "
        "gateway; commitment: reserve); every other resource must stay as it is.",
    )
    target_cpu: float = Field(
        default=80.0, gt=0, le=100, description="Highest CPU percent at the recorded peak."
    )
    target_memory: float = Field(
        default=90.0, gt=0, le=100, description="Highest memory percent at the recorded peak."
    )
    mode: Literal["apply", "recommend"] = Field(
        default="apply", description="Rightsizing: change the instances, or only recommend."
    )
    budgets: list[Budget] = Field(
        default_factory=list, description="Every budget as the policy wants it (budget)."
    )
    group: str | None = Field(default=None, description="Auto Scaling group name (autoscaling).")
    owners: dict[str, str] = Field(
        default_factory=dict, description="Name -> owner of each untagged resource (allocation)."
    )
    shared: Literal["none", "even", "proportional"] = Field(
        default="none",
        description="Allocation of untaggable shared costs: kept apart as `shared`, split "
        "evenly between the teams, or in proportion to each team's own cost.",
    )
    storage_class: str = Field(
        default="GLACIER_IR", description="The class cold buckets transition to (storage)."
    )
    transition_days: int = Field(
        default=30, gt=0, description="Days after which cold objects transition (storage)."
    )
    noncurrent_days: int = Field(
        default=30, gt=0, description="Days after which noncurrent versions expire (storage)."
    )
    exclude: list[str] = Field(
        default_factory=list,
        description="Instances whose usage a savings plan must not count (commitment).",
    )
    plan: Literal["savings_plan", "reserved"] = Field(
        default="savings_plan",
        description="Commitment: size a savings plan (`commitment_hourly`), or name the "
        "instances to reserve (`recommendations`, the waste).",
    )
    pass_fraction: float = Field(
        default=0.9, gt=0, le=1, description="Share of the optimum that passes."
    )
    explained: list[str] = Field(
        default_factory=list,
        description="Control scenarios (`incident: false`): names of the resources that "
        "explain what the task describes (an approved change, a look-alike the conventions "
        "keep). A no-incident report passes only when its `explained_by` names exactly "
        "these resources' ids; a control must name at least one.",
    )


#: The handbook bucket's name prefix (the management account's id follows).
HANDBOOK_PREFIX = "engineering-handbook-"


class FinOpsSpec(ScenarioSpec):
    """A FinOps scenario: an account inventory, its usage history and the ground truth."""

    domain: Literal["finops"]
    family: Family
    accounts: list[Account] = Field(default_factory=list)
    billing_days: int = Field(default=30, ge=7, le=90)
    metric_days: int = Field(default=14, ge=14, le=30)
    hourly_billing: bool = Field(default=False, description="Hourly rows in the billing export.")
    resources: list[Resource] = Field(default_factory=list)
    documents: list[Document] = Field(
        default_factory=list, description="Pages of the engineering handbook (S3)."
    )
    candidates: list[Candidate] = Field(
        default_factory=list, description="Resources drawn per trial in one of their forms."
    )
    waste_drawn: tuple[int, int] | None = Field(
        default=None,
        description="How many candidates take a waste form in a trial (least, most); default: "
        "at least one (none for a control), at most every candidate that has one.",
    )
    settings: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="`${name}` placeholders and their alternatives; one is drawn per trial.",
    )
    truth: Truth

    _template: dict[str, Any] | None = PrivateAttr(default=None)

    def facets(self) -> dict[str, str]:
        """The family reports break results down by."""
        return {"family": self.family}

    @model_validator(mode="wrap")
    @classmethod
    def _settled(cls, data: Any, handler: Any) -> Any:
        """Check every alternative of every setting; the spec holds the first of each.

        The document as written (placeholders in place) is kept for the draw.
        """
        if not isinstance(data, dict):
            return handler(data)
        from itbench_finops.conventions import implied_settings, rule_problems
        from itbench_finops.handbook import with_pages
        from itbench_finops.placeholders import SETTINGS_PROBLEM, settle

        data = with_pages(data)
        problems = rule_problems(data)
        if problems:
            raise ValueError("; ".join(problems))
        implied = implied_settings(data)
        if implied and isinstance(data.get("settings") or {}, dict):
            data = {**data, "settings": {**(data.get("settings") or {}), **implied}}
        if not data.get("settings"):
            return handler(data)
        settings = data["settings"]
        if not isinstance(settings, dict) or not all(
            isinstance(v, list) and v for v in settings.values()
        ):
            raise ValueError(SETTINGS_PROBLEM)
        # The first alternatives are the spec: their errors are the spec's own, by field.
        first = {k: v[0] for k, v in settings.items()}
        spec = handler({**settle(data, first), "settings": settings})
        choices = [
            ({name: value}, {**first, name: value})
            for name, values in settings.items()
            for value in values[1:]
        ]
        for changed, choice in choices:
            try:
                cls.model_validate(settle(data, choice))
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err["loc"])
                where = "".join(f"settings.{k} = {v!r}: " for k, v in changed.items())
                msg = str(err["msg"]).removeprefix("Value error, ")
                raise ValueError(f"{where}{loc + ': ' if loc else ''}{msg}") from None
        spec._template = dict(data)
        return spec

    @model_validator(mode="after")
    def _consistent(self) -> FinOpsSpec:
        problems = [*self._candidate_problems()]
        names = [r.name for r in self.resources] + [c.name for c in self.candidates]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            problems.append(f"resource names must be unique; repeated: {', '.join(dup)}")
        known = set(names)
        accounts = {a.id for a in self.accounts}
        for r in self.all_forms():
            if r.account is not None and r.account not in accounts:
                problems.append(f"resource {r.name!r}: account {r.account} is not in accounts")
        refs = [*self.truth.waste, *self.truth.owners, *self.truth.exclude]
        if self.truth.resource:
            refs.append(self.truth.resource)
        if self.truth.group:
            refs.append(self.truth.group)
        missing = sorted({n for n in refs if n not in known})
        if missing:
            problems.append(f"truth names unknown resources: {', '.join(missing)}")
        problems += [*self._unpriced(), *self._dangling(), *self._truth_problems()]
        from itbench_finops.placeholders import unknown_placeholders

        unknown = unknown_placeholders(self.model_dump(mode="json"), set(self.settings))
        if unknown:
            problems.append(
                f"placeholders without a setting: {', '.join('${' + n + '}' for n in unknown)}"
            )
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))
        return self

    def all_forms(self) -> list[Resource]:
        """Every resource and every form of every candidate (what validation checks)."""
        out: list[Resource] = list(self.resources)
        for c in self.candidates:
            for form in c.forms:
                try:
                    out.append(c.build(form))
                except ValidationError:
                    continue  # reported by _candidate_problems
        return out

    def _candidate_problems(self) -> list[str]:
        out = []
        for i, c in enumerate(self.candidates):
            for form in c.forms:
                try:
                    c.build(form)
                except ValidationError as exc:
                    err = exc.errors()[0]
                    loc = ".".join(str(p) for p in err["loc"])
                    out.append(f"candidates.{i} ({c.name}) form {form!r}: {loc}: {err['msg']}")
        with_waste = sum(1 for c in self.candidates if c.waste_forms())
        if self.waste_drawn is not None:
            low, high = self.waste_drawn
            if not 0 <= low <= high <= with_waste:
                out.append(
                    f"waste_drawn {list(self.waste_drawn)} must satisfy 0 <= least <= most <= "
                    f"{with_waste} (the candidates that have a waste form)"
                )
        for c in self.candidates:
            if not c.keep_forms() and not (self.waste_drawn and self.waste_drawn[0] == with_waste):
                out.append(f"candidate {c.name!r} has no keep form: it could be drawn as neither")
        return out

    def _unpriced(self) -> list[str]:
        """Types, classes and volume types the price table does not know."""
        from itbench_finops.prices import load_prices

        raw = load_prices().raw
        out: list[str] = []
        for r in self.all_forms():
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
        forms = self.all_forms()
        instances = {r.name for r in forms if isinstance(r, Instance)}
        nats = {r.name for r in forms if isinstance(r, NatGateway)}
        out = []
        for r in forms:
            refs: list[tuple[str, str | None, set[str]]] = []
            if isinstance(r, Address):
                refs = [("instance", r.instance, instances)]
            elif isinstance(r, Snapshot):
                refs = [("of_instance", r.of_instance, instances)]
            elif isinstance(r, LoadBalancer):
                refs = [("targets", t, instances) for t in r.targets]
            elif isinstance(r, Instance):
                refs = [("nat", r.nat, nats)]
            for field, name, valid in refs:
                if name is not None and name not in valid:
                    what = "NAT gateway" if field == "nat" else "instance"
                    out.append(f"resource {r.name!r}: {field} {name!r} is not an {what}")
        groups = {r.name for r in forms if isinstance(r, AutoScalingGroup)}
        if self.truth.group is not None and self.truth.group not in groups:
            out.append(f"truth.group: {self.truth.group!r} is not an Auto Scaling group")
        kinds = FAMILIES[self.family].waste_kinds
        for name in self.truth.waste:
            kind = next((r.kind for r in forms if r.name == name), None)
            if kinds and kind is not None and kind not in kinds:
                out.append(
                    f"truth.waste: {name!r} is a {kind}; family {self.family} fixes "
                    f"{', '.join(kinds)}"
                )
        return out

    def _truth_problems(self) -> list[str]:
        """Truth fields the family needs but lacks, and values outside their closed sets."""
        from itbench_finops.prices import load_prices

        t = self.truth
        rule = FAMILIES[self.family]
        out = []
        drawn = bool(self.candidates)
        if t.incident and not drawn:
            for name in rule.required:
                if not getattr(t, name):
                    out.append(f"family {self.family} needs truth.{name}")
        if not t.incident:
            explained = [
                *t.explained,
                *(
                    n
                    for c in self.candidates
                    for f in c.forms.values()
                    for n in f.truth.get("explained", [])
                ),
            ]
            if not explained:
                out.append("a control (truth.incident: false) needs truth.explained")
            names = {r.name for r in self.resources} | {c.name for c in self.candidates}
            unknown = sorted(set(explained) - names)
            if unknown:
                out.append(f"truth.explained names unknown resources: {', '.join(unknown)}")
        causes = [t.cause, *(f.cause for c in self.candidates for f in c.forms.values())]
        for cause in causes:
            if rule.causes and cause is not None and cause not in rule.causes:
                out.append(
                    f"cause {cause!r} is not a cause of family {self.family} "
                    f"(one of: {', '.join(rule.causes)})"
                )
        services = load_prices().raw["services"]
        named = [t.service, *(f.service for c in self.candidates for f in c.forms.values())]
        for service in named:
            if service is not None and service not in services:
                out.append(f"service {service!r} is unknown (one of: {', '.join(services)})")
        accounts = [MANAGEMENT_ACCOUNT, *(a.id for a in self.accounts)]
        if t.account is not None and t.account not in accounts:
            out.append(
                f"truth.account {t.account!r} is not an account of the scenario "
                f"(one of: {', '.join(accounts)})"
            )
        if any(b.forecast_share is not None for b in t.budgets):
            out.append("truth.budgets: forecast_share sets a seeded budget's limit, not a policy's")
        classes = load_prices().raw["s3_gb_month"]
        if t.storage_class not in classes:
            out.append(
                f"truth.storage_class {t.storage_class!r} is not priced "
                f"(one of: {', '.join(classes)})"
            )
        return out

    def resource(self, name: str) -> Resource:
        """The resource named ``name``."""
        for r in self.resources:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def handbook_bucket(self) -> str:
        """The bucket that holds the engineering handbook."""
        return f"{HANDBOOK_PREFIX}{MANAGEMENT_ACCOUNT}"


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
    start_date: _dt.date | None = Field(
        default=None, description="The day the root cause started (YYYY-MM-DD, UTC)."
    )
    recommendations: list[Recommendation] = Field(default_factory=list)
    allocations: dict[str, float] = Field(
        default_factory=dict, description="Owner -> cost (USD) over the billing export's period."
    )
    commitment_hourly: float | None = Field(
        default=None, ge=0, description="Savings-plan commitment, USD per hour."
    )
    explained_by: list[str] = Field(
        default_factory=list,
        description="With incident=false: the id of each resource (as the APIs and the "
        "billing export name it) that explains what the task describes, as the task asks: an "
        "instance's InstanceId (i-...), a volume's VolumeId (vol-...), a snapshot's SnapshotId "
        "(snap-...), an Elastic IP's AllocationId (eipalloc-...), a NAT gateway's NatGatewayId "
        "(nat-...), a load balancer's LoadBalancerArn; any other resource (a bucket, a "
        "database, a budget) by its name.",
    )
