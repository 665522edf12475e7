"""Scenario spec, ground truth and submission models of the SRE domain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from itbench_sre import faults, topology
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from itbench import ScenarioSpec, Submission

#: What an SRE scenario may ask of the agent.
TASK_TYPES = ("detection", "localization", "diagnosis", "mitigation")
#: Delay the ``latency_blip`` noise adds to its edge, ms (below every latency alert).
BLIP_DELAY_MS = 150

NoiseKind = Literal["restart_replica", "compatible_release", "latency_blip"]


@dataclass(frozen=True)
class NoiseKindDef:
    """One kind of benign noise.

    Attributes:
        summary: What it does to the shop.
        target: What its target names.
        targets: The valid targets.
    """

    summary: str
    target: str
    targets: tuple[str, ...]


NOISE_KINDS: dict[NoiseKind, NoiseKindDef] = {
    "restart_replica": NoiseKindDef(
        "Restarts one instance, which comes back by itself.",
        "a service instance",
        tuple(topology.all_instances()),
    ),
    "compatible_release": NoiseKindDef(
        "Deploys the service's newest release, which works (services whose newest release is "
        "faulty, the targets of `bad_release`, are not valid).",
        "a service",
        tuple(s.name for s in topology.SERVICES if s.name not in faults.get("bad_release").targets),
    ),
    "latency_blip": NoiseKindDef(
        f"Adds {BLIP_DELAY_MS} ms to one call edge for `seconds`, then clears it.",
        "a call edge `caller->callee`",
        faults.get("edge_latency").targets,
    ),
}


class FaultSpec(BaseModel):
    """One injected fault: a library mechanism, its target and parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mechanism: str = Field(description="A mechanism of the fault library (see below).")
    target: str = Field(description="One of the mechanism's valid targets.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="The mechanism's parameters; unset ones take defaults."
    )

    @field_validator("mechanism")
    @classmethod
    def _known_mechanism(cls, value: str) -> str:
        if value not in faults.MECHANISMS:
            known = ", ".join(sorted(faults.MECHANISMS))
            raise ValueError(f"unknown mechanism {value!r} (known: {known})")
        return value

    @model_validator(mode="after")
    def _valid_target_and_params(self) -> FaultSpec:
        mech = faults.get(self.mechanism)
        if self.target not in mech.targets:
            others = [m.name for m in faults.MECHANISMS.values() if self.target in m.targets]
            hint = f"; mechanisms for {self.target!r}: {', '.join(others)}" if others else ""
            raise ValueError(
                f"target {self.target!r} is not valid for {self.mechanism} "
                f"(valid: {', '.join(mech.targets)}){hint}"
            )
        problems = mech.param_problems(self.target, self.params)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def merged_params(self) -> dict[str, Any]:
        """Mechanism defaults overridden by the scenario's parameters."""
        return {**faults.get(self.mechanism).defaults, **self.params}


class NoiseSpec(BaseModel):
    """A benign event the agent must not blame."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: NoiseKind
    target: str = Field(description="One of the kind's valid targets (see below).")
    seconds: float = Field(default=3.0, gt=0, description="Duration of a latency blip.")

    @model_validator(mode="after")
    def _valid_target(self) -> NoiseSpec:
        kind = NOISE_KINDS[self.kind]
        if self.target not in kind.targets:
            raise ValueError(
                f"{self.kind} needs {kind.target}, got {self.target!r} "
                f"(valid: {', '.join(kind.targets)})"
            )
        return self


class SloSpec(BaseModel):
    """The workload's service-level objective used by the mitigation check."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    success_ratio: float = Field(default=0.97, gt=0, le=1)
    p95_ms: float = Field(default=1000.0, gt=0)
    window: float = Field(default=8.0, gt=0, description="Sustained clean window, seconds.")
    settle: float = Field(
        default=40.0, gt=0, description="Longest wait after the agent for the window to start."
    )


class GroundTruth(BaseModel):
    """What happened, as the evaluator and the oracle see it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    incident: bool = Field(description="Whether there is an incident (false: a control).")
    root_causes: list[str] = Field(default_factory=list, description="Root-cause entities.")
    aliases: dict[str, list[str]] = Field(
        default_factory=dict, description="Extra names accepted for each root cause."
    )
    fault_types: list[str] = Field(
        default_factory=list, description="Fault types, from the fault-type vocabulary."
    )
    propagation: list[tuple[str, str]] = Field(
        default_factory=list, description="Edges `[from, to]` the failure spread along."
    )
    alerts: list[str] = Field(default_factory=list, description="Alerts the faults raise.")


class SreSpec(ScenarioSpec):
    """An SRE scenario: faults and noise on the shop, and what the agent must do."""

    domain: Literal["sre"]
    faults: list[FaultSpec] = Field(
        default_factory=list, description="Injected faults; none makes a control scenario."
    )
    noise: list[NoiseSpec] = Field(
        default_factory=list, description="Benign events played before the faults."
    )
    traces: bool = Field(default=True, description="Whether services record spans.")
    workload_rate: float = Field(
        default=8.0, gt=0, le=40, description="Requests per second of the load generator."
    )
    slo: SloSpec = Field(default_factory=SloSpec)
    ground_truth: GroundTruth | None = Field(
        default=None, description="Derived from the fault library when omitted."
    )

    @model_validator(mode="after")
    def _consistent(self) -> SreSpec:
        if "mitigation" in self.task_types:
            for f in self.faults:
                if not faults.get(f.mechanism).mitigable:
                    raise ValueError(
                        f"mechanism {f.mechanism} cannot be mitigated with the tools; "
                        "drop 'mitigation' from task_types"
                    )
            if not self.faults:
                raise ValueError("a scenario without faults cannot ask for mitigation")
        return self

    def truth(self) -> GroundTruth:
        """The ground truth: given explicitly, or derived from the faults."""
        if self.ground_truth is not None:
            return self.ground_truth
        roots: list[str] = []
        aliases: dict[str, list[str]] = {}
        types: list[str] = []
        edges: list[tuple[str, str]] = []
        alerts: list[str] = []
        for f in self.faults:
            mech = faults.get(f.mechanism)
            root = mech.root(f.target)
            if root not in roots:
                roots.append(root)
            aliases.setdefault(root, [])
            aliases[root] += [a for a in mech.aliases(f.target) if a not in aliases[root]]
            if mech.fault_type not in types:
                types.append(mech.fault_type)
            for e in faults.propagation(root):
                if e not in edges:
                    edges.append(e)
            for exp in mech.alerts(f.target):
                if exp.alert not in alerts:
                    alerts.append(exp.alert)
        return GroundTruth(
            incident=bool(self.faults),
            root_causes=roots,
            aliases=aliases,
            fault_types=types,
            propagation=edges,
            alerts=alerts,
        )


class SreSubmission(Submission):
    """The agent's answer.

    ``incident`` is the detection verdict (``false`` means "no incident"). ``root_causes`` is a
    ranked list of entities (services, datastores, ``mesh``, the batch job ``reports``;
    aliases and replica names are accepted). ``propagation`` lists edges ``[from, to]`` along
    which the failure spread, from the root cause towards the shoppers.
    """

    incident: bool
    root_causes: list[str] = Field(default_factory=list)
    fault_type: str | None = Field(default=None, description="One of the listed fault types.")
    propagation: list[tuple[str, str]] = Field(default_factory=list)
