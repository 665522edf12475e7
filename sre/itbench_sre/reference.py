"""Sections of the SRE scenario reference, generated from the fault library and the topology.

Everything listed here (mechanisms, parameters, targets, noise kinds, services) comes from the
tables the spec validates against, so the reference cannot drift from what loads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from itbench_sre import faults, topology
from itbench_sre.embedded import JOB_PROGRAM
from itbench_sre.spec import NOISE_KINDS

_MITIGATION = "mitigation"


def _code(values: Iterable[Any]) -> str:
    """Values as inline code, comma-separated (strings bare, others as JSON)."""
    return ", ".join(f"`{v}`" if isinstance(v, str) else f"`{json.dumps(v)}`" for v in values)


def _table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> list[str]:
    cells = [[" ".join(c.split()).replace("|", "\\|") for c in row] for row in rows]
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in cells),
    ]


def _valid_values(param: faults.Param, targets: tuple[str, ...]) -> str:
    parts = [param.bounds()] if param.bounds() else []
    if param.choices is not None:
        choice = param.choices
        parts += [f"{t}: {_code(choice(t)) or 'none'}" for t in targets]
    return "; ".join(parts) or "any"


def _mechanism(mech: faults.Mechanism) -> str:
    lines = [
        f"### `{mech.name}`",
        "",
        mech.summary,
        "",
        f"Fault type `{mech.fault_type}`; "
        + (
            "mitigable with the agent's tools."
            if mech.mitigable
            else "not mitigable with the "
            f"agent's tools (a scenario asking for `{_MITIGATION}` cannot use it)."
        )
        + (
            " Its propagation is scored against the spread measured at handover."
            if mech.spread
            else " Its propagation is not scored: its spread cannot be measured reliably at "
            "handover (it shows in a resource first, comes and goes, or degrades no call)."
        ),
        "",
    ]
    if mech.params:
        lines += _table(
            ("parameter", "type", "default", "valid values", "meaning"),
            (
                (
                    f"`{p.name}`",
                    p.type_name,
                    f"`{json.dumps(p.default)}`",
                    _valid_values(p, mech.targets),
                    p.meaning,
                )
                for p in mech.params
            ),
        )
    else:
        lines.append("No parameters.")
    lines += [""]
    # The readiness expressions stay out of the reference: a published threshold is a
    # ready-made detector, and the docs describe what a fault looks like, not its numbers.
    lines += _table(
        ("target", "root cause"), ((f"`{t}`", f"`{mech.root(t)}`") for t in mech.targets)
    )
    if mech.observable:
        lines += ["", f"Observable: {mech.observable}."]
    return "\n".join(lines)


def mechanisms() -> str:
    """The fault library: an overview, then each mechanism's parameters and targets."""
    lines = [
        "A fault names a `mechanism`, one of its `target`s and optionally `params`; unset "
        "parameters take their defaults, unknown or wrongly typed ones are rejected. Ground "
        "truth (root cause, fault type, propagation, alerts) is derived from the table below "
        "unless `ground_truth` is given. `targets` (instead of `target`) declares a set each "
        "trial draws one from, and `draw` declares parameter sets (an empty list: every valid "
        "value); the drawn values are recorded in the trial's result. The agent starts once "
        "every fault shows its observable signature (never an alert: some faults raise none).",
        "",
    ]
    lines += _table(
        ("mechanism", "fault type", "mitigable", "propagation scored", "targets"),
        (
            (
                f"`{m.name}`",
                f"`{m.fault_type}`",
                "yes" if m.mitigable else "no",
                "yes" if m.spread else "no",
                _code(m.targets),
            )
            for m in faults.MECHANISMS.values()
        ),
    )
    for mech in faults.MECHANISMS.values():
        lines += ["", _mechanism(mech)]
    return "\n".join(lines)


def fault_types() -> str:
    """The fault-type vocabulary the agent answers from."""
    return (
        "The agent's `fault_type` is one of these (it sees the list; which one applies it "
        f"does not): {_code(faults.FAULT_TYPES)}."
    )


def noise() -> str:
    """The benign noise kinds with their valid targets."""
    lines = [
        "Noise is played before the faults and must not be blamed by the agent.",
        "",
        *_table(
            ("kind", "what it does", "target", "valid targets"),
            (
                (f"`{kind}`", d.summary, d.target, _code(d.targets))
                for kind, d in NOISE_KINDS.items()
            ),
        ),
    ]
    return "\n".join(lines)


def controls() -> str:
    """How a scenario without faults behaves."""
    return (
        "A scenario with no `faults` is a control: its ground truth is `incident: false` with "
        "no root cause, and the agent starts once Prometheus scrapes the whole shop (with an "
        "`alert_blip` noise: once its alert fires). A control cannot ask for "
        f"`{_MITIGATION}`, and must have noise or decoys: its answer names them as `benign` "
        '(what explains what the agent sees), so a constant "no incident" fails it. Tag it '
        "`control` (reports show controls apart). Noise makes controls harder to tell from "
        "incidents."
    )


def double_faults() -> str:
    """How a scenario with several faults is judged."""
    return (
        "Several entries in `faults` are injected together (their drawn targets differ where "
        "the sets allow). The derived ground truth lists the root causes in the order of the "
        "faults (each once) and the fault types; the agent starts once every fault shows its "
        "signature. Localization passes only when the submitted entities are exactly the root "
        "causes. A scenario asking for "
        f"`{_MITIGATION}` needs every fault to be mitigable, and is mitigated only when the "
        "whole shop meets its SLO again."
    )


def topology_section() -> str:
    """The shop's services, datastores, call edges and the entities an agent may name."""
    lines = _table(
        (
            "service",
            "replicas (max)",
            "instances",
            "calls",
            "releases",
            "routine flags",
            "flags with a fault",
        ),
        (
            (
                f"`{s.name}`",
                f"{s.replicas} ({s.max_replicas})",
                _code(topology.instances(s.name)),
                _code(s.upstreams) or "none",
                _code(s.releases),
                _code(topology.ROUTINE_FLAGS.get(s.name, ())) or "none",
                _code(topology.FLAGS.get(s.name, ())) or "none",
            )
            for s in topology.SERVICES
        ),
    )
    call_edges = [f"{c}->{u}" for c, u in topology.edges()]
    lines += [
        "",
        "Flags are listed by what they do; each trial draws the name every flag goes by "
        "(routine ones, the ones with a fault behind them and two dormant ones per service) "
        "from one shared pool, so no name says what a flag does. "
        "Instances beyond the baseline replicas run only after a scale-up. The first "
        "release listed is deployed; each service can also deploy three newer ones (its "
        "patch, the next minor and that one's patch), of which each trial draws the one that "
        "is faulty (what `bad_release` deploys); `compatible_release` and routine changes "
        "deploy one of the others, which work.",
        "",
        f"Datastores: {_code(topology.DATASTORES)}. Monitoring (the harness's own, never a "
        f"target): {_code(topology.MONITORING)}. Every call edge runs through the mesh "
        f"(entity `{topology.MESH}`). The batch job `{JOB_PROGRAM}` works on `postgres`.",
        "",
        f"Call edges `caller->callee`: {_code(call_edges)}.",
        "",
        f"Root-cause entities an agent may name: {_code(topology.entities())}.",
    ]
    return "\n".join(lines)


def sections() -> dict[str, str]:
    """Heading to Markdown body of every SRE-specific reference section."""
    return {
        "Fault mechanisms": mechanisms(),
        "Fault types": fault_types(),
        "Noise": noise(),
        "Controls": controls(),
        "Double faults": double_faults(),
        "Topology": topology_section(),
    }
