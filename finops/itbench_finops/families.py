"""The scenario families: what each one's scenarios seed, what its truth names, how it scores.

The spec validates scenarios against this table and the generated reference documents it, so
what a scenario author reads is what the loader checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Family = Literal[
    "anomaly",
    "forecast",
    "idle",
    "rightsizing",
    "storage",
    "transfer",
    "budget",
    "autoscaling",
    "allocation",
    "commitment",
]

#: Task types a FinOps scenario may name.
TASK_TYPES = ("detection", "localization", "diagnosis", "mitigation")

#: The diagnosis a root-cause report names (anomaly and forecast).
_DIAGNOSIS = ("account_id", "service", "resource_id", "resource_type", "cause", "start_date")
_DIAGNOSIS_PASSES = (
    "The reported account (default: the management account), service (its Cost Explorer "
    "name or an alias), resource id, resource type (the billing export's `ResourceType` or an "
    "alias), cause and start date (within a day of the day the cause started) all match."
)
#: The truth and report of the families that name a root cause.
_ROOT_CAUSE = {
    "required": ("resource", "service", "cause"),
    "optional": ("account",),
    "report": _DIAGNOSIS,
    "passes": _DIAGNOSIS_PASSES,
    "causes": ("new_resource", "type_change", "usage_spike"),
}
_ITEMS = (
    "Every item of `waste` is fixed (`items_fixed` = `items_total`; the dollars are reported "
    "beside it as `savings_monthly` against `optimal_savings_monthly`)"
)


@dataclass(frozen=True)
class FamilyRule:
    """One family of FinOps scenarios.

    Attributes:
        incident: The kind of incident, in a sentence.
        seeds: What the scenario's resources hold for it.
        required: Truth fields a scenario with an incident must set (or its draw fill).
        optional: Other truth fields the scorer or the oracle read.
        report: Submission fields the scorer reads.
        passes: When a trial passes (besides causing no harm).
        causes: The values ``truth.cause`` and the submission's ``cause`` take, if any.
        waste_kinds: The resource kinds ``truth.waste`` may name (empty: it names none).
        fix: What fixing one waste item means.
    """

    incident: str
    seeds: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    report: tuple[str, ...]
    passes: str
    causes: tuple[str, ...] = ()
    waste_kinds: tuple[str, ...] = ()
    fix: str = ""


FAMILIES: dict[Family, FamilyRule] = {
    "anomaly": FamilyRule(
        incident="The organization's daily spend jumped; one resource is the root cause.",
        seeds=(
            "Accounts with steady spend and one resource whose cost rose recently: launched "
            "recently (`launched_days_ago`), moved to a dearer type (`previous_type`, "
            "`changed_days_ago`) or used much more (`spike_gb_day`, `spike_days`, `spike_ramp` "
            "of a bucket's egress, a NAT gateway's processed data or an instance's cross-zone "
            "traffic, rising slowly at first); next to approved changes of the change log, some "
            "bigger, some made otherwise than approved."
        ),
        **_ROOT_CAUSE,  # type: ignore[arg-type]
    ),
    "forecast": FamilyRule(
        incident="A budget's forecast alert fired; one resource in the budget's scope drives it.",
        seeds=(
            "A budget limited by its filters (`team`, `accounts`, `services`) whose limit is set "
            "below its forecast (`forecast_share`), with a FORECASTED notification, and cost "
            "rises inside and outside its filters (only the one inside explains the alert)."
        ),
        **_ROOT_CAUSE,  # type: ignore[arg-type]
    ),
    "idle": FamilyRule(
        incident="The accounts pay for idle and orphaned resources.",
        seeds=(
            "Unattached volumes, unassociated Elastic IPs, instances stopped for weeks, old "
            "snapshots, load balancers that serve nothing, databases without connections, NAT "
            "gateways without traffic, next to look-alikes the conventions keep (recent, "
            "protected by a tag or a runbook, spiky but used)."
        ),
        required=("waste",),
        optional=(),
        report=("incident",),
        passes=f"{_ITEMS}.",
        waste_kinds=(
            "instance",
            "volume",
            "snapshot",
            "address",
            "load_balancer",
            "database",
            "nat_gateway",
        ),
        fix="removed (an instance terminated with its volumes, a NAT gateway with its address)",
    ),
    "rightsizing": FamilyRule(
        incident="Instances or databases run far below their capacity.",
        seeds=(
            "Instances and databases with `cpu` (and `memory`) profiles; the waste's peaks are "
            "well below the targets, the look-alikes need their size (busy, memory-bound, "
            "spiky, reserved, or exempt by the conventions)."
        ),
        required=("waste",),
        optional=("target_cpu", "target_memory", "mode", "pass_fraction"),
        report=("recommendations",),
        passes=(
            f"{_ITEMS}: the chosen type (`mode: apply`: the one in the final state, running; "
            "`mode: recommend`: the recommended one) is priced within `1 - pass_fraction` of "
            "the cheapest type of its family that keeps the recorded CPU and memory peaks at "
            "or below `target_cpu` and `target_memory`. A type below that need is harm."
        ),
        waste_kinds=("instance", "database"),
        fix="resized (or recommended) to the cheapest type that meets its need",
    ),
    "storage": FamilyRule(
        incident="Storage is kept in a dearer class or type than the conventions ask for.",
        seeds=(
            "Instances with gp2 data volumes (`ops` and `mbps`: their I/O per second and "
            "throughput) and buckets with their reads, objects and noncurrent versions, next to "
            "look-alikes that must stay as they are (other volume types, hot buckets, small "
            "objects, compliance-managed buckets)."
        ),
        required=("waste",),
        optional=("storage_class", "transition_days", "noncurrent_days"),
        report=("incident",),
        passes=f"{_ITEMS}.",
        waste_kinds=("instance", "bucket"),
        fix=(
            "an instance: every gp2 data volume moved to gp3 with the IOPS and throughput of "
            "its recorded peak, at most a tenth more, and its size; a bucket: a whole-bucket "
            "lifecycle rule moving current objects to `storage_class` after `transition_days` "
            "and expiring noncurrent versions after `noncurrent_days` (when it keeps any), and "
            "no rule expiring current objects"
        ),
    ),
    "transfer": FamilyRule(
        incident="Data transfer is paid where a free path exists.",
        seeds=(
            "NAT gateways whose private subnets send their S3 traffic through them "
            "(`s3_share`), next to ones whose traffic goes elsewhere or to S3 of another region "
            "(`s3_region`)."
        ),
        required=("waste",),
        optional=(),
        report=("incident",),
        passes=f"{_ITEMS}.",
        waste_kinds=("nat_gateway",),
        fix=(
            "an S3 gateway endpoint of its VPC serves the route table of its private subnet, "
            "and the gateway itself still serves it"
        ),
    ),
    "budget": FamilyRule(
        incident="A cost budget departs from the written policy in one field.",
        seeds=(
            "Budgets as they are configured (one of them misconfigured: a candidate whose "
            "waste forms carry the cause); the truth's `budgets` are the policy."
        ),
        required=("budgets",),
        optional=("cause",),
        report=("cause",),
        passes=(
            "Every budget of the truth has the policy's amount, time unit, filter and "
            "notifications in the final state, and the reported cause matches."
        ),
        causes=("amount", "threshold", "notification_type", "time_unit", "subscriber"),
    ),
    "autoscaling": FamilyRule(
        incident="An Auto Scaling group runs more capacity than its load needs.",
        seeds=(
            "An `asg` resource whose `desired` is above the capacity that serves the peak of "
            "its `load_vcpus` at `target_cpu`."
        ),
        required=("group",),
        optional=("target_cpu", "pass_fraction"),
        report=("incident",),
        passes=(
            "The monthly savings reach `pass_fraction` of lowering the group to the needed "
            "capacity, and its minimum size is at most that capacity. Desired or maximum size "
            "below it is harm, as is any change to another group."
        ),
    ),
    "allocation": FamilyRule(
        incident="Costs must be allocated to owners; some resources lack the owner tag.",
        seeds=(
            "Resources tagged with their owner and untagged ones whose owner follows from the "
            "conventions (a name prefix, an account, an attachment, a project); shared costs "
            "(`cost-pool: shared`)."
        ),
        required=("owners",),
        optional=("shared",),
        report=("allocations",),
        passes=(
            "Every resource of `owners` carries its owner in the owner tag, no owner tag that "
            "was set changed, and `allocations` matches the cost per owner of the billing "
            "export (shared costs split by `shared`) within the allocation tolerance."
        ),
    ),
    "commitment": FamilyRule(
        incident="A commitment must be sized to the compute usage.",
        seeds=(
            "Always-on and business-hours instances (`schedule`) with hourly billing "
            "(`hourly_billing: true`); or instances some of which qualify for a reservation "
            "by the conventions (steady, not retiring, not yet reserved)."
        ),
        required=(),
        optional=("plan", "waste", "pass_fraction"),
        report=("commitment_hourly", "recommendations"),
        passes=(
            "`plan: savings_plan`: the net savings of the reported hourly commitment over the "
            "billing period reach `pass_fraction` of those of the best commitment. "
            "`plan: reserved`: the recommended instances are exactly the waste."
        ),
        waste_kinds=("instance",),
    ),
}


def causes_text() -> str:
    """The causes of every family that has them, for the submission's field description."""
    seen: dict[tuple[str, ...], list[str]] = {}
    for family, rule in FAMILIES.items():
        if rule.causes:
            seen.setdefault(rule.causes, []).append(family.capitalize())
    return " ".join(f"{', '.join(fams)}: {' | '.join(c)}." for c, fams in seen.items())
