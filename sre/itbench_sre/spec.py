"""Scenario spec, ground truth and submission models of the SRE domain."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from itbench_sre import faults, topology
from itbench_sre.app import phrases
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from itbench import ScenarioSpec, Submission

#: What an SRE scenario may ask of the agent.
TASK_TYPES = ("detection", "localization", "diagnosis", "mitigation")
#: Delay the ``latency_blip`` noise adds to its edge, ms (below every latency alert).
BLIP_DELAY_MS = 150
#: Delay the ``alert_blip`` noise adds to its edge, ms (enough for a latency alert).
ALERT_BLIP_DELAY_MS = 1200

NoiseKind = Literal["restart_replica", "compatible_release", "latency_blip", "alert_blip"]
DecoyKind = Literal["patch_release", "tuning", "stray_client", "follow_up", "registry"]


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
        "Deploys a newer release of the service that works.",
        "a service",
        tuple(s.name for s in topology.SERVICES),
    ),
    "latency_blip": NoiseKindDef(
        f"Adds {BLIP_DELAY_MS} ms to one call edge for `seconds`, then clears it.",
        "a call edge `caller->callee`",
        faults.get("edge_latency").targets,
    ),
    "alert_blip": NoiseKindDef(
        f"Adds {ALERT_BLIP_DELAY_MS} ms to one call edge for `seconds` (a latency alert fires "
        "at handover), then clears it: a blip that resolves by itself.",
        "a call edge `caller->callee`",
        faults.get("edge_latency").targets,
    ),
}

#: Configuration keys a routine tuning change may touch, with the values it may set.
TUNING: dict[str, tuple[Any, ...]] = {
    "memory_limit_mb": (176, 192),
    "cpu_limit": (1.5, 2.0),
    "max_threads": (768, 1024),
    "max_open_files": (320, 384),
    "pool_timeout": (1.5, 2.0),
    "pool_size": (6, 8),
}
#: Keys of one service a routine change may touch, with the values it may set (more
#: capacity, less work per request).
SERVICE_TUNING: dict[str, dict[str, tuple[Any, ...]]] = {
    "catalog": {"max_concurrency": (20, 24), "work_ms": (2, 5)},
}
#: The value of a routine change that points an upstream at the address its name resolves
#: to (the same healthy endpoint, by address): filled in when the change is played.
RESOLVED = "@resolved"
#: The value of a routine change that deploys a renewed, valid certificate.
RENEWED = "@renewed"
#: The value of a routine change that rotates the service's database password correctly
#: (the database learns the new password as the service's configuration gets it).
ROTATED = "@rotated"
#: Keys a follow-up change never touches: it must not mend (or worsen) the fault before it.
_NOT_FOLLOWED = (
    "upstreams.",
    "pool_",
    "timeouts.",
    "retries.",
    "serve_tls",
    "max_concurrency",
    "work_ms",
)

#: Routine changes of the name registry (key, values): its cache time lengthened, or a new
#: name added beside a service's own (``<service>-next.svc``, on the mesh, called by no one).
REGISTRY_CHANGES: dict[str, tuple[Any, ...]] = {
    "ttl_s": (2, 5),
    "alias": tuple(s.name for s in topology.SERVICES),
}
#: Share of the trials with decoys whose history holds a routine change of the name registry
#: (none when a fault changes the registry): a registry revision is no cause by itself.
REGISTRY_SHARE = 0.35

#: Share of the trials whose fault (one a rollback mends) gets a follow-up change.
FOLLOW_UP_SHARE = 0.5

#: Clock offsets, seconds, of a stray client (all outside the services' 30 s date window).
STRAY_OFFSETS: tuple[int, ...] = (-900, -420, 360, 3600)


def _one_of(value: str | None, values: list[str], what: str) -> list[str]:
    """The declared set of a field given as one ``value`` or a list ``values`` (not both)."""
    if (value is None) == (not values):
        raise ValueError(f"give exactly one of '{what}' or '{what}s'")
    return [value] if value is not None else list(values)


class FaultSpec(BaseModel):
    """One fault: a library mechanism, its target and its parameters.

    The target may be a declared set each trial draws one from, and parameters may be sets.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mechanism: str = Field(description="A mechanism of the fault library (see below).")
    target: str | None = Field(default=None, description="One of the mechanism's valid targets.")
    targets: list[str] = Field(
        default_factory=list,
        description="Declared targets: each trial draws one (instead of `target`).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="The mechanism's parameters; unset ones take defaults."
    )
    draw: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Parameter sets: each trial draws one value per parameter among those valid "
        "for its target (an empty list: every valid value).",
    )
    look_alikes: list[FaultSpec] = Field(
        default_factory=list,
        description="Faults of other mechanisms that show alike: each trial draws one of this "
        "fault and its look-alikes (each with its own targets and parameters).",
    )

    @field_validator("mechanism")
    @classmethod
    def _known_mechanism(cls, value: str) -> str:
        if value not in faults.MECHANISMS:
            known = ", ".join(sorted(faults.MECHANISMS))
            raise ValueError(f"unknown mechanism {value!r} (known: {known})")
        return value

    @model_validator(mode="after")
    def _valid_targets_and_params(self) -> FaultSpec:
        if any(alike.look_alikes for alike in self.look_alikes):
            raise ValueError("a look-alike has no look-alikes of its own")
        mech = faults.get(self.mechanism)
        for target in _one_of(self.target, self.targets, "target"):
            if target not in mech.targets:
                others = sorted(m.name for m in faults.MECHANISMS.values() if target in m.targets)
                hint = f"; mechanisms for {target!r}: {', '.join(others)}" if others else ""
                raise ValueError(
                    f"target {target!r} is not valid for {self.mechanism} "
                    f"(valid: {', '.join(mech.targets)}){hint}"
                )
            fixed = {k: v for k, v in self.params.items() if k not in self.draw}
            both = sorted(set(self.params) & set(self.draw))
            if both:
                raise ValueError(f"parameters {both} are both fixed and drawn")
            known = {p.name for p in mech.params}
            for name in self.draw:
                if name not in known:
                    raise ValueError(
                        f"unknown parameter {name!r} for {self.mechanism} "
                        f"(valid: {', '.join(sorted(known)) or 'none'})"
                    )
            problems = mech.param_problems(
                target,
                {
                    **fixed,
                    **{
                        k: self._drawable(target, k)[0]
                        for k in self.draw
                        if self._drawable(target, k)
                    },
                },
            )
            problems += [
                f"no value of {name!r} in {self.draw[name]!r} is valid for {target}"
                for name in self.draw
                if not self._drawable(target, name)
            ]
            if problems:
                raise ValueError("; ".join(problems))
        return self

    def _drawable(self, target: str, name: str) -> list[Any]:
        """The values of a drawn parameter that are valid on ``target``."""
        param = next(p for p in faults.get(self.mechanism).params if p.name == name)
        values = self.draw[name] or list(param.choices(target) if param.choices else ())
        return [v for v in values if param.problem(self.mechanism, target, v) is None]

    @property
    def declared(self) -> list[str]:
        """The targets a trial may get."""
        return [self.target] if self.target is not None else list(self.targets)

    def concrete(
        self, rng: random.Random, avoid: frozenset[str] | set[str] = frozenset()
    ) -> FaultSpec:
        """This fault with its target and drawn parameters chosen (``avoid``: taken targets).

        A fault with look-alikes first draws which of them it is.
        """
        if self.look_alikes:
            return rng.choice(self.alternatives()).concrete(rng, avoid)
        options = [t for t in self.declared if t not in avoid] or self.declared
        target = rng.choice(options)
        params = dict(self.params)
        for name in sorted(self.draw):
            params[name] = rng.choice(self._drawable(target, name))
        return FaultSpec(mechanism=self.mechanism, target=target, params=params)

    def alternatives(self) -> list[FaultSpec]:
        """This fault (without its look-alikes) and each look-alike: what a trial draws from."""
        return [self.model_copy(update={"look_alikes": []}), *self.look_alikes]

    @property
    def chosen(self) -> str:
        """The target of a concrete fault."""
        if self.target is None:
            raise ValueError("the fault's target has not been drawn")
        return self.target

    def merged_params(self) -> dict[str, Any]:
        """Mechanism defaults overridden by the scenario's parameters."""
        return {**faults.get(self.mechanism).defaults, **self.params}


class NoiseSpec(BaseModel):
    """A benign event the agent must not blame."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: NoiseKind
    target: str | None = Field(default=None, description="One of the kind's valid targets.")
    targets: list[str] = Field(
        default_factory=list, description="Declared targets: each trial draws one."
    )
    seconds: float = Field(default=3.0, gt=0, description="Duration of a latency blip.")

    @model_validator(mode="after")
    def _valid_target(self) -> NoiseSpec:
        kind = NOISE_KINDS[self.kind]
        for target in _one_of(self.target, self.targets, "target"):
            if target not in kind.targets:
                raise ValueError(
                    f"{self.kind} needs {kind.target}, got {target!r} "
                    f"(valid: {', '.join(kind.targets)})"
                )
        return self

    def concrete(self, rng: random.Random) -> NoiseSpec:
        """This noise with its target drawn."""
        target = self.target if self.target is not None else rng.choice(self.targets)
        return NoiseSpec(kind=self.kind, target=target, seconds=self.seconds)


FlagNames = dict[str, dict[str, str]]


def flag_name(names: FlagNames, service: str, flag: str) -> str:
    """The name a service's flag goes by in a trial (its own name when none was drawn)."""
    return names.get(service, {}).get(flag, flag)


def draw_flag_names(rng: random.Random) -> FlagNames:
    """For each service, a distinct name of :data:`topology.FLAG_NAMES` for each of its flags."""
    out: FlagNames = {}
    for s in topology.SERVICES:
        flags = topology.flags_of(s.name)
        out[s.name] = dict(zip(flags, rng.sample(topology.FLAG_NAMES, len(flags)), strict=True))
    return out


def draw_faulty_releases(rng: random.Random) -> dict[str, str]:
    """For each service, which of its newer releases is faulty (the others work)."""
    return {s.name: rng.choice(topology.candidates(s.name)) for s in topology.SERVICES}


def tuning_keys(service: str, names: FlagNames | None = None) -> dict[str, tuple[Any, ...]]:
    """The keys a routine change of ``service`` may set, with their values.

    The shared tuning keys (the pool resized within the database's capacity among them),
    each routine flag of the service switched off (a shipped feature with nothing behind it),
    each dormant flag switched on (a new feature that works), each upstream service pointed
    at the address its name resolves to (the same healthy endpoint), each upstream's timeout
    lengthened and its retries raised by one, the service's own capacity keys, a renewed
    certificate where it serves TLS and a rotated database password where it has one: the
    same keys the faults change, set to values that work.
    """
    names = names or {}
    flags: dict[str, tuple[Any, ...]] = {
        f"flags.{flag_name(names, service, f)}": (False,)
        for f in topology.ROUTINE_FLAGS.get(service, ())
    }
    flags.update(
        {
            f"flags.{flag_name(names, service, f)}": (True,)
            for f in topology.DORMANT_FLAGS.get(service, ())
        }
    )
    upstreams = topology.BY_NAME[service].upstreams
    calls = [u for u in upstreams if u not in topology.DATASTORES]
    moved: dict[str, tuple[Any, ...]] = {f"upstreams.{u}": (RESOLVED,) for u in calls}
    moved.update(
        {
            f"timeouts.{u}": ((1.5, 2.0) if u in topology.DATASTORES else (2.5, 3.0))
            for u in upstreams
        }
    )
    moved.update({f"retries.{u}": (2,) for u in calls})
    own = dict(SERVICE_TUNING.get(service, {}))
    if service == "payment":
        own["serve_tls"] = (RENEWED,)
    if "postgres" in upstreams:
        own["postgres.password"] = (ROTATED,)
    return {**TUNING, **flags, **moved, **own}


def _tuning(
    rng: random.Random,
    kind: DecoyKind,
    service: str,
    names: FlagNames,
    avoid: tuple[str, ...] = (),
    after: bool = False,
) -> DecoySpec:
    """A drawn routine tuning change of ``service`` (never of a key starting with ``avoid``).

    A follow-up never touches an upstream, a timeout, a retry count, a capacity or the
    certificate: on a faulted service it could mend or worsen the fault.
    """
    keys = tuning_keys(service, names)
    if kind == "follow_up":
        avoid = (*avoid, *_NOT_FOLLOWED)
    avoid = tuple(a for a in avoid if a)
    key = rng.choice(sorted(k for k in keys if not (avoid and k.startswith(avoid))))
    return DecoySpec(kind=kind, target=service, key=key, value=rng.choice(keys[key]), after=after)


class DecoySpec(BaseModel):
    """A red herring on a service that is no cause.

    ``patch_release`` and ``tuning`` are routine, compatible changes (a new revision, the
    instances restarted); ``stray_client`` is an outside client whose clock is off by ``value``
    seconds and that keeps calling the service's first instance, which refuses it (401);
    ``follow_up`` is a routine tuning change deployed on a faulted service after its fault, so
    the newest revision is not the one that broke it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: DecoyKind
    target: str = Field(description="A service.")
    key: str = Field(default="", description="The tuned configuration key (tuning and follow_up).")
    value: Any = Field(
        default=None,
        description="The tuned value (tuning, follow_up) or the client's clock offset, s "
        "(stray_client).",
    )
    after: bool = Field(
        default=False,
        description="Played right after the faults rather than before them (a routine change; "
        "a follow_up always is).",
    )

    @model_validator(mode="after")
    def _valid(self) -> DecoySpec:
        if self.kind == "registry":
            if self.target != topology.DNS:
                raise ValueError(f"a registry change targets {topology.DNS!r}")
            if self.value not in REGISTRY_CHANGES.get(self.key, ()):
                raise ValueError(f"registry key/value must be one of {REGISTRY_CHANGES}")
            return self
        if self.target not in topology.BY_NAME:
            raise ValueError(f"decoy target {self.target!r} is no service")
        keys = tuning_keys(self.target)
        tuned = self.kind in ("tuning", "follow_up")
        flag = self.key.removeprefix("flags.")
        if tuned and self.key.startswith("flags.") and flag in topology.FLAG_NAMES:
            if not isinstance(self.value, bool):
                raise ValueError(f"a tuned flag of {self.target} takes true or false")
        elif tuned and (self.key not in keys or self.value not in keys[self.key]):
            raise ValueError(f"tuning key/value of {self.target} must be one of {keys}")
        if self.kind == "stray_client" and self.value not in STRAY_OFFSETS:
            raise ValueError(f"a stray client's clock offset must be one of {STRAY_OFFSETS}")
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
        default_factory=list,
        description="Edges `[from, to]` a failure of the roots can spread along (the static "
        "chain; the evaluator grades against the edges it measured degrading).",
    )
    benign: list[str] = Field(
        default_factory=list,
        description="What explains a control's observations: the entities of its benign events "
        "(a restarted instance's service, a released or changed service, a blip's link "
        "`caller->callee`, a stray client's service).",
    )


class SreSpec(ScenarioSpec):
    """An SRE scenario: a problem (faults, noise, decoy history) and what the agent must do.

    Targets, parameters and decoys may be declared as sets: each trial draws its concrete
    scenario from them (:meth:`concrete`), with a seed only the harness knows.
    """

    domain: Literal["sre"]
    faults: list[FaultSpec] = Field(
        default_factory=list, description="Injected faults; none makes a control scenario."
    )
    noise: list[NoiseSpec] = Field(
        default_factory=list, description="Benign events played before the faults."
    )
    decoys: int = Field(
        default=2,
        ge=0,
        le=4,
        description="Red herrings each trial draws on services that are no fault's target: "
        "routine compatible changes (patch releases, tuning), the faults taking a drawn place "
        "among them, with a second tuning change on one of their services after the faults, "
        "or a stray client whose clock is off (the first decoy is always a change). Besides "
        "these, "
        "about half the trials of a fault a rollback mends get a follow-up change on its "
        "service after it (none when this is 0).",
    )
    decoy_changes: list[DecoySpec] = Field(
        default_factory=list, description="The drawn decoys (filled by the draw)."
    )
    drawn: bool = Field(
        default=False, description="Whether this is a trial's concrete draw (set by the draw)."
    )
    faulty_releases: dict[str, str] = Field(
        default_factory=dict,
        description="Per service, which of its newer releases is faulty (filled by the draw; "
        "none: the next minor release).",
    )
    phrasing: dict[str, int] = Field(
        default_factory=dict,
        description="The wording drawn for each of the shop's own messages (filled by the "
        "draw; none: the first wording of each).",
    )
    flag_names: FlagNames = Field(
        default_factory=dict,
        description="Per service, the name each flag goes by in the configuration (filled by "
        "the draw; none: the flags' own names).",
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
            for f in (one for fault in self.faults for one in fault.alternatives()):
                if not faults.get(f.mechanism).mitigable:
                    raise ValueError(
                        f"mechanism {f.mechanism} cannot be mitigated with the tools; "
                        "drop 'mitigation' from task_types"
                    )
            if not self.faults:
                raise ValueError("a scenario without faults cannot ask for mitigation")
        if not self.faults and not self.noise and not self.decoys and not self.decoy_changes:
            raise ValueError(
                "a control needs something to explain: give it noise or decoys (a constant "
                "'no incident' must not pass it)"
            )
        return self

    # --- the draw ------------------------------------------------------------------------
    def concrete(self, rng: random.Random) -> SreSpec:
        """One trial's scenario: every declared set drawn (targets distinct where possible)."""
        if self.drawn:
            return self
        names = self.flag_names or draw_flag_names(rng)
        phrasing = self.phrasing or phrases.draw(rng)
        faulty = self.faulty_releases or draw_faulty_releases(rng)
        taken: set[str] = set()
        drawn_faults = []
        for f in self.faults:
            one = f.concrete(rng, taken)
            taken.add(one.chosen)
            if "flag" in one.params or "flag" in faults.get(one.mechanism).defaults:
                flag = one.merged_params()["flag"]
                named = {**one.params, "flag_name": flag_name(names, one.chosen, flag)}
                one = one.model_copy(update={"params": named})
            drawn_faults.append(one)
        noise = [n.concrete(rng) for n in self.noise]
        busy = {_service(f.chosen) for f in drawn_faults} | {
            _service(n.target or "") for n in noise
        }
        for f in drawn_faults:
            # Services whose configuration the fault changes besides its target's.
            anchors = faults.get(f.mechanism).anchors
            if anchors is not None:
                busy |= {a for a in anchors(f.chosen, f.merged_params()) if a in topology.BY_NAME}
        held = tuple(k for f in drawn_faults for k in faults.get(f.mechanism).held(f.chosen))
        free = [s.name for s in topology.SERVICES if s.name not in busy]
        decoys = list(self.decoy_changes)
        chosen = rng.sample(free, min(self.decoys, len(free))) if not decoys else []
        for i, service in enumerate(chosen):
            # The first decoy is always a change: a fault's change is never the only one.
            pick = rng.random() * (2 / 3 if i == 0 else 1)
            if pick < 1 / 3:
                decoys.append(DecoySpec(kind="patch_release", target=service))
            elif pick >= 2 / 3:
                decoys.append(
                    DecoySpec(kind="stray_client", target=service, value=rng.choice(STRAY_OFFSETS))
                )
            else:
                decoys.append(_tuning(rng, "tuning", service, names, avoid=held))
        if not self.decoy_changes:
            decoys = self._after_the_faults(rng, decoys, drawn_faults, names, held)
            registry = topology.DNS in {f.chosen for f in drawn_faults}
            if decoys and not registry and rng.random() < REGISTRY_SHARE:
                key = rng.choice(sorted(REGISTRY_CHANGES))
                change = DecoySpec(
                    kind="registry",
                    target=topology.DNS,
                    key=key,
                    value=rng.choice(REGISTRY_CHANGES[key]),
                    after=rng.random() < 0.5,
                )
                decoys.insert(rng.randint(0, len(decoys)), change)
        return self.model_copy(
            update={
                "faults": drawn_faults,
                "noise": noise,
                "decoy_changes": decoys,
                "drawn": True,
                "flag_names": names,
                "phrasing": phrasing,
                "faulty_releases": faulty,
            }
        )

    def _after_the_faults(
        self,
        rng: random.Random,
        decoys: list[DecoySpec],
        drawn: list[FaultSpec],
        names: FlagNames,
        held: tuple[str, ...] = (),
    ) -> list[DecoySpec]:
        """A second routine change after the faults, maybe a follow-up, in drawn order.

        The second change lands on a service a routine decoy already changed, so neither the
        newest revision, nor the service restarted last, nor the one with the most new
        revisions names the cause. No change touches a key the faults hold (``held``).
        """
        routine = [d for d in decoys if d.kind in ("patch_release", "tuning")]
        # The faults take a drawn place among the routine changes (the rest come after them).
        later = set(rng.sample(range(len(routine)), rng.randint(0, len(routine))))
        moved = {id(routine[i]) for i in later}
        post = [d.model_copy(update={"after": True}) for d in routine if id(d) in moved]
        pre = [d for d in decoys if id(d) not in moved]
        if routine:
            first = rng.choice(routine)
            avoid = (first.key, *held)
            post.append(_tuning(rng, "tuning", first.target, names, avoid=avoid, after=True))
        rolled = [f for f in drawn if faults.get(f.mechanism).follow_up and self.decoys]
        if rolled and rng.random() < FOLLOW_UP_SHARE:
            fault = rng.choice(rolled)
            # Never a key the fault itself set (a crash loop's bad value stays in place).
            mech = faults.get(fault.mechanism)
            bad_key = str(fault.merged_params().get("key") or "")
            avoid = (*mech.keys, *([bad_key] if bad_key else []), *held)
            post.append(_tuning(rng, "follow_up", fault.chosen, names, avoid=avoid, after=True))
        rng.shuffle(post)
        return pre + post

    def drawn_record(self) -> dict[str, Any]:
        """What a concrete scenario drew (for the trial's result)."""
        return {
            "faults": [
                {"mechanism": f.mechanism, "target": f.target, "params": f.params}
                for f in self.faults
            ],
            "noise": [{"kind": n.kind, "target": n.target} for n in self.noise],
            "decoys": [d.model_dump(exclude_defaults=True) for d in self.decoy_changes],
        }

    def mechanisms(self) -> list[str]:
        """The fault mechanisms of this problem, in order (look-alikes after their fault)."""
        return [one.mechanism for f in self.faults for one in f.alternatives()]

    def facets(self) -> dict[str, str]:
        """Report categories: the mechanism (combinations joined with ``+``) and the kind."""
        if not self.faults:
            kind = "control"
        elif len(self.faults) > 1:
            kind = "multi-fault"
        elif self.noise:
            kind = "noisy"
        else:
            kind = "single"
        mechanisms = ["|".join(one.mechanism for one in f.alternatives()) for f in self.faults]
        return {"mechanism": "+".join(mechanisms) or "none", "kind": kind}

    def summary(self) -> dict[str, Any]:
        """Public catalog fields plus the problem's mechanisms and declared targets."""
        out = super().summary()
        out["mechanisms"] = self.mechanisms()
        out["targets"] = [one.declared for f in self.faults for one in f.alternatives()]
        out["noise"] = [n.kind for n in self.noise]
        out["decoys"] = self.decoys
        return out

    def truth(self) -> GroundTruth:
        """The ground truth of a concrete scenario: given explicitly, or derived from the faults.

        Raises:
            ValueError: the scenario's targets have not been drawn.
        """
        if self.ground_truth is not None:
            return self.ground_truth
        roots: list[str] = []
        aliases: dict[str, list[str]] = {}
        types: list[str] = []
        edges: list[tuple[str, str]] = []
        for f in self.faults:
            mech = faults.get(f.mechanism)
            root = mech.root(f.chosen)
            if root not in roots:
                roots.append(root)
            aliases.setdefault(root, [])
            aliases[root] += [a for a in mech.aliases(f.chosen) if a not in aliases[root]]
            if mech.fault_type not in types:
                types.append(mech.fault_type)
            for e in faults.propagation(root):
                if e not in edges:
                    edges.append(e)
        benign: list[str] = []
        if not self.faults:
            for event in [n.target or "" for n in self.noise] + [
                d.target for d in self.decoy_changes
            ]:
                name = event if topology.parse_edge(event) else _service(event)
                if name not in benign:
                    benign.append(name)
        return GroundTruth(
            incident=bool(self.faults),
            root_causes=roots,
            aliases=aliases,
            fault_types=types,
            propagation=edges,
            benign=benign,
        )


def _service(target: str) -> str:
    """The service a fault or noise target belongs to (an edge: its callee)."""
    edge = topology.parse_edge(target)
    if edge is not None:
        return edge[1]
    return topology.canonical(target) or target


class SreSubmission(Submission):
    """The agent's answer.

    ``incident`` is the detection verdict (``false`` means "no incident"). ``root_causes`` is a
    ranked list of entities (services, datastores, ``mesh``, the batch job ``reports``;
    aliases and replica names are accepted). ``propagation`` lists edges ``[from, to]`` along
    which the failure spread, from the root cause towards the shoppers. With no incident,
    ``benign`` names what explains what the agent observed.
    """

    incident: bool
    root_causes: list[str] = Field(default_factory=list)
    fault_type: str | None = Field(default=None, description="One of the listed fault types.")
    propagation: list[tuple[str, str]] = Field(default_factory=list)
    benign: list[str] = Field(
        default_factory=list,
        description="With no incident: the entities of every benign event that explains what "
        "you observed (a restarted instance's service, a service with a routine release or "
        "configuration change, a transient slow link as `caller->callee`, a service an outside "
        "client is refused by).",
    )
