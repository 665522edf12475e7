"""The CISO scenario spec and submission models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from itbench import ScenarioSpec, Submission

INSTRUCTIONS = {
    "kubernetes": (
        "Automate the check: write a Rego policy that returns every pod of a cluster snapshot "
        "that violates the requirement, and no other pod. It will be run on other clusters "
        "than the one you can inspect. The task context gives the policy contract."
    ),
    "linux": (
        "Automate the check: write an Ansible playbook that collects the evidence from each "
        "host of the inventory as JSON, and a Rego policy that reports a violation for a host "
        "exactly when the host does not meet the requirement. Both will be run on other hosts "
        "than the ones you can inspect. The task context gives the contract."
    ),
    "cloud": (
        "Automate the check: write a Python evidence collector (boto3 against the endpoint in "
        "the task context, JSON on stdout) and a Rego policy that reports a violation exactly "
        "when the account does not meet the requirement. Both will be run on other accounts "
        "than the one you can inspect. The task context gives the contract."
    ),
    "policy-update": (
        "The requirement above replaces an existing one. Update the policy set in your "
        "workspace: change the policy concerned so it enforces the new requirement, and leave "
        "every other policy's results unchanged. Submit the whole set."
    ),
}

Family = Literal["kubernetes", "linux", "cloud", "policy-update"]


class VariantPlan(BaseModel):
    """How many hidden variants the evaluator builds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compliant: int = Field(default=3, ge=1, le=12, description="Hidden compliant variants.")
    non_compliant: int = Field(default=4, ge=1, le=12, description="Hidden violating variants.")


class CisoSpec(ScenarioSpec):
    """A compliance-as-code scenario.

    The public part is the requirement (``goal``) and the visible systems; the ground truth is
    ``check`` (and for the policy-update family ``policy_set``/``changed``): the name of a
    check of the built-in library that generates hidden variants with known verdicts and holds
    the reference evidence collection and policy.
    """

    domain: Literal["ciso"]
    family: Family
    requirement: str = Field(min_length=10, description="The compliance requirement, verbatim.")
    check: str = Field(description="Ground truth: id of the check in the library.")
    policy_set: list[str] = Field(
        default_factory=list,
        description="policy-update only: ids of the checks of the existing policy set.",
    )
    changed: str | None = Field(
        default=None, description="policy-update only: the policy of the set that must change."
    )
    variants: VariantPlan = Field(default_factory=VariantPlan)

    @model_validator(mode="before")
    @classmethod
    def _from_library(cls, data: Any) -> Any:
        """Fill requirement, goal and title from the check library when the file omits them."""
        from itbench_ciso.checks import all_checks

        if not isinstance(data, dict) or not isinstance(data.get("check"), str):
            return data
        check = all_checks().get(data["check"])
        if check is None:
            return data
        data = dict(data)
        data.setdefault("requirement", check.requirement)
        data.setdefault("title", check.title)
        if "goal" not in data:
            family = str(data.get("family", ""))
            data["goal"] = f"Requirement: {data['requirement']}\n\n{INSTRUCTIONS.get(family, '')}"
        return data

    @field_validator("check")
    @classmethod
    def _known_check(cls, value: str) -> str:
        from itbench_ciso.checks import all_checks

        if value not in all_checks():
            raise ValueError(f"unknown check {value!r}")
        return value

    @model_validator(mode="after")
    def _family_fits(self) -> CisoSpec:
        from itbench_ciso.checks import all_checks

        check = all_checks()[self.check]
        family = "kubernetes" if self.family == "policy-update" else self.family
        if check.family != family:
            raise ValueError(f"check {self.check!r} belongs to family {check.family!r}")
        if self.family == "policy-update":
            if not self.changed or self.changed not in self.policy_set:
                raise ValueError("policy-update needs `changed` naming one id of `policy_set`")
            for cid in self.policy_set:
                if cid not in all_checks() or all_checks()[cid].family != "kubernetes":
                    raise ValueError(f"policy_set: {cid!r} is not a kubernetes check")
        elif self.policy_set or self.changed:
            raise ValueError("policy_set and changed belong to the policy-update family only")
        return self


class CisoSubmission(Submission):
    """The agent's compliance artifacts.

    Kubernetes: ``policy``. Linux hosts: ``playbook`` and ``policy``. Cloud: ``collector`` (a
    Python script) or ``playbook``, and ``policy``. Policy update: ``policies`` (file name ->
    Rego source, the whole set).
    """

    policy: str | None = Field(default=None, description="Rego source (package compliance).")
    playbook: str | None = Field(default=None, description="Ansible playbook YAML (evidence).")
    collector: str | None = Field(
        default=None, description="Python evidence collector printing JSON (cloud family)."
    )
    policies: dict[str, str] = Field(
        default_factory=dict, description="policy-update: the updated set, file name -> Rego."
    )
