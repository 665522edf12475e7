"""The CISO scenario spec and submission models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from itbench import ScenarioSpec, Submission
from itbench_ciso.checks import FAMILIES, all_checks, ids_of
from itbench_ciso.contracts import CONTRACTS

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
    check: str = Field(
        description="Ground truth: id of the check in the library (see the check library)."
    )
    policy_set: list[str] = Field(
        default_factory=list,
        description="policy-update only: ids of the checks of the existing policy set.",
    )
    changed: str | None = Field(
        default=None, description="policy-update only: the policy of the set that must change."
    )
    variants: VariantPlan = Field(default_factory=VariantPlan)

    def facets(self) -> dict[str, str]:
        """Report categories: the scenario family and the check (never shown to the agent)."""
        return {"family": self.family, "check": self.check}

    @model_validator(mode="before")
    @classmethod
    def _from_library(cls, data: Any) -> Any:
        """Fill requirement, goal and title from the check library when the file omits them."""
        if not isinstance(data, dict) or not isinstance(data.get("check"), str):
            return data
        check = all_checks().get(data["check"])
        if check is None:
            return data
        data = dict(data)
        data.setdefault("requirement", check.requirement)
        data.setdefault("title", check.title)
        if "goal" not in data:
            contract = CONTRACTS.get(str(data.get("family", "")))
            instructions = contract.instructions if contract else ""
            data["goal"] = f"Requirement: {data['requirement']}\n\n{instructions}"
        return data

    @field_validator("check")
    @classmethod
    def _known_check(cls, value: str, info: ValidationInfo) -> str:
        if value in all_checks():
            return value
        family = info.data.get("family")
        if family in CONTRACTS:
            raise ValueError(f"unknown check {value!r}; {valid_checks(family)}")
        every = "; ".join(f"{f}: {', '.join(ids_of(f))}" for f in FAMILIES)
        raise ValueError(f"unknown check {value!r}; valid checks by family: {every}")

    @model_validator(mode="after")
    def _family_fits(self) -> CisoSpec:
        takes = CONTRACTS[self.family].checks
        check = all_checks()[self.check]
        if check.family != takes:
            raise ValueError(
                f"check {self.check!r} belongs to family {check.family!r}, not {self.family!r}; "
                + valid_checks(self.family)
            )
        if self.family == "policy-update":
            if not self.changed or self.changed not in self.policy_set:
                named = ", ".join(self.policy_set) or "none: policy_set is empty"
                raise ValueError(
                    f"policy-update needs `changed` naming one id of `policy_set` ({named})"
                )
            for cid in self.policy_set:
                other = all_checks().get(cid)
                if other is None:
                    raise ValueError(
                        f"policy_set: unknown check {cid!r}; {valid_checks(self.family)}"
                    )
                if other.family != takes:
                    raise ValueError(
                        f"policy_set: check {cid!r} belongs to family {other.family!r}, not "
                        f"{takes!r}; {valid_checks(self.family)}"
                    )
        elif self.policy_set or self.changed:
            raise ValueError("policy_set and changed belong to the policy-update family only")
        return self


def valid_checks(family: str) -> str:
    """The check ids a scenario of ``family`` may name, for error messages."""
    takes = CONTRACTS[family].checks
    of = f"family {family!r}" if takes == family else f"family {family!r} (the {takes} checks)"
    return f"valid checks of {of}: {', '.join(ids_of(takes))}"


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
