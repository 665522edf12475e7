"""The scenario families: what each one's scenarios seed, what its truth names, how it scores.

The spec validates scenarios against this table and the generated reference documents it, so
what a scenario author reads is what the loader checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Family = Literal[
    "anomaly", "idle", "rightsizing", "budget", "autoscaling", "allocation", "commitment"
]

#: Task types a FinOps scenario may name.
TASK_TYPES = ("detection", "localization", "diagnosis", "mitigation")


@dataclass(frozen=True)
class FamilyRule:
    """One family of FinOps scenarios.

    Attributes:
        incident: The kind of incident, in a sentence.
        seeds: What the scenario's resources hold for it.
        required: Truth fields a scenario with an incident must set.
        optional: Other truth fields the scorer or the oracle read.
        report: Submission fields the scorer reads.
        passes: When a trial passes (besides causing no harm).
        causes: The values ``truth.cause`` and the submission's ``cause`` take, if any.
    """

    incident: str
    seeds: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    report: tuple[str, ...]
    passes: str
    causes: tuple[str, ...] = ()


FAMILIES: dict[Family, FamilyRule] = {
    "anomaly": FamilyRule(
        incident="The organization's daily spend jumped; one resource is the root cause.",
        seeds=(
            "Accounts with steady spend and one resource whose cost rose recently: "
            "launched recently (`launched_days_ago`), moved to a dearer type "
            "(`previous_type`, `changed_days_ago`) or used much more (a bucket's "
            "`spike_gb_day`, `spike_days`)."
        ),
        required=("resource", "service", "cause"),
        optional=("account",),
        report=("account_id", "service", "resource_id", "resource_type", "cause"),
        passes=(
            "The reported account (default: the management account), service (its Cost "
            "Explorer name or an alias), resource id, resource type (the billing export's "
            "`ResourceType` or an alias) and cause all match the truth."
        ),
        causes=("new_resource", "type_change", "usage_spike"),
    ),
    "idle": FamilyRule(
        incident="The accounts pay for idle and orphaned resources.",
        seeds=(
            "Unattached volumes, unassociated Elastic IPs, instances stopped for weeks, old "
            "snapshots, load balancers without targets or databases without connections, next "
            "to look-alikes that are in use."
        ),
        required=("removable",),
        optional=("pass_fraction",),
        report=("incident",),
        passes=(
            "The monthly savings of the final state reach `pass_fraction` of removing every "
            "resource of `removable` (an instance with its volumes)."
        ),
    ),
    "rightsizing": FamilyRule(
        incident="Instances run far below their capacity.",
        seeds="Instances with a `cpu` profile; the targets' peak is well below `target_cpu`.",
        required=("targets",),
        optional=("target_cpu", "mode", "pass_fraction"),
        report=("recommendations",),
        passes=(
            "For every target, the chosen type (`mode: apply`: its type in the final state; "
            "`mode: recommend`: the recommended type) is priced within `1 - pass_fraction` of "
            "the cheapest type of its instance family that keeps the recorded peak at or below "
            "`target_cpu`. A type below that need is harm."
        ),
    ),
    "budget": FamilyRule(
        incident="A cost budget departs from the written policy in one field.",
        seeds="A `budget` resource as it is misconfigured; the truth's `budget` is the policy.",
        required=("budget",),
        optional=("cause",),
        report=("cause",),
        passes=(
            "The final budget of the truth's name has the truth's amount, time unit and "
            "notifications, and the reported cause matches when the truth names one."
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
            "below it is harm."
        ),
    ),
    "allocation": FamilyRule(
        incident="Costs must be allocated to owners; some resources lack the owner tag.",
        seeds=(
            "Resources tagged with their owner and untagged ones whose owner follows from a "
            "rule the goal states (a name prefix, an account, an attachment)."
        ),
        required=("owners",),
        optional=(),
        report=("allocations",),
        passes=(
            "Every resource of `owners` carries its owner in the owner tag, no owner tag that "
            "was set changed, and `allocations` matches the cost per owner of the billing "
            "export within the allocation tolerance."
        ),
    ),
    "commitment": FamilyRule(
        incident="A savings-plan commitment must be sized to the compute usage.",
        seeds=(
            "Always-on and business-hours instances (`schedule`) with hourly billing "
            "(`hourly_billing: true`); the optimum is computed from the usage."
        ),
        required=(),
        optional=("pass_fraction",),
        report=("commitment_hourly",),
        passes=(
            "The net savings of the reported hourly commitment over the billing period reach "
            "`pass_fraction` of those of the best commitment."
        ),
    ),
}


def causes_text() -> str:
    """The causes of every family that has them, for the submission's field description."""
    return " ".join(
        f"{family.capitalize()}: {' | '.join(rule.causes)}."
        for family, rule in FAMILIES.items()
        if rule.causes
    )
