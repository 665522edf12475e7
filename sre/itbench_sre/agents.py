"""Reference agents of the SRE domain: the oracle, the heuristic baseline and a destructive one."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from itbench_sre import faults, topology
from itbench_sre.environment import HANDOVER
from itbench_sre.rules import SATURATION
from itbench_sre.spec import SreSpec, SreSubmission

from itbench import Agent, AgentContext, TaskView, Toolbox, ToolError

#: Uptime after which an instance that does not answer is hung rather than starting.
_SETTLED_S = 3.0
#: The probes' fixed answer: the entry service with a common fault type, no propagation.
CONSTANT = {"incident": True, "root_causes": ["frontend"], "fault_type": "bad_release"}

_ALERT_TYPES = {"HighLatency": "network_latency"}
#: Fault type of each resource of the saturation symptom (the baseline's reading of it).
_RESOURCE_TYPES = {
    "memory": "memory_leak",
    "cpu": "cpu_saturation",
    "queue": "consumer_stopped",
    "pool": "pool_exhaustion",
    "fds": "fd_leak",
    "threads": "thread_leak",
    "disk": "disk_full",
}


def oracle(spec: SreSpec, toolbox: Toolbox, handle: str = "") -> SreSubmission:
    """Submit the ground truth and apply each fault's reference fix through the tools.

    The propagation is the spread the evaluator measured at handover (published in the
    harness's memory by trial handle).
    """
    truth = spec.truth()
    if not truth.incident:
        return SreSubmission(incident=False, benign=list(truth.benign))
    measured = HANDOVER.get(handle)
    if "mitigation" in spec.task_types:
        followed = {d.target for d in spec.decoy_changes if d.kind == "follow_up"}
        for f in spec.faults:
            mech = faults.get(f.mechanism)
            assert mech.fix is not None
            for tool, args in mech.fix(f.chosen, f.merged_params()):
                if tool == "rollback" and args["service"] in followed:
                    _rollback_past_follow_up(toolbox, args["service"])
                    continue
                toolbox.call(tool, **args)
    return SreSubmission(
        incident=True,
        root_causes=list(truth.root_causes),
        fault_type=truth.fault_types[0] if truth.fault_types else None,
        propagation=list(truth.propagation if measured is None else measured),
    )


def answer_key(spec: SreSpec, toolbox: Toolbox) -> SreSubmission:
    """The answer to another draw of the scenario: its truth, its reference fixes attempted.

    The static propagation chain stands for the spread (nobody measured this draw), and a fix
    the trial's shop refuses (another service's history, another key) is skipped, as a
    memorized script's failing step would be.
    """
    truth = spec.truth()
    if not truth.incident:
        return SreSubmission(incident=False, benign=list(truth.benign))
    if "mitigation" in spec.task_types:
        for f in spec.faults:
            mech = faults.get(f.mechanism)
            for tool, args in mech.fix(f.chosen, f.merged_params()) if mech.fix else []:
                with contextlib.suppress(ToolError):
                    toolbox.call(tool, **args)
    return SreSubmission(
        incident=True,
        root_causes=list(truth.root_causes),
        fault_type=truth.fault_types[0] if truth.fault_types else None,
        propagation=list(truth.propagation),
    )


def _rollback_past_follow_up(toolbox: Toolbox, service: str) -> None:
    """Roll back the fault's revision and keep the routine change that came after it.

    The follow-up may be one the service cannot do without (a rotated password the database
    now expects): its keys are set again on the revision before the fault.
    """
    read = toolbox.call("read_config", entity=service)
    history = read["revisions"]
    config = json.loads(read["content"])
    kept = {key: _at(config, key) for key in history[-1]["changed"]}
    toolbox.call("rollback", service=service, revision=history[-3]["revision"])
    toolbox.call("edit_config", entity=service, set=kept)
    toolbox.call("restart", target=service)


def _at(doc: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        doc = doc[part]
    return doc


def _depth(service: str) -> int:
    """Distance of a service from the entry point (deeper services are likelier causes)."""
    d = topology.hops("frontend", service)
    return d if d is not None else 0


def baseline(task: TaskView, toolbox: Toolbox) -> SreSubmission:
    """Alerts + topology + process state to localize; rollback, restart or start to mitigate."""
    firing = toolbox.call("alerts")
    procs = {p["name"]: p for p in toolbox.call("processes")}
    if not firing:
        return SreSubmission(incident=False, benign=_benign(toolbox, procs))
    down = [n for n, p in procs.items() if n in ("redis", "postgres") and p["state"] != "RUNNING"]
    # An instance that cannot be scraped although it has run for a while: it hangs.
    unscraped = {a["labels"].get("instance") for a in firing if a["name"] == "InstanceDown"} - {
        None
    }
    hung = [
        n
        for n, p in procs.items()
        if n in unscraped and p["state"] == "RUNNING" and (p.get("uptime_s") or 0) > _SETTLED_S
    ]
    jobs: dict[str, list[str]] = {}
    for a in firing:
        job = a["labels"].get("job")
        if job in topology.BY_NAME:
            jobs.setdefault(job, []).append(a["name"])
    if down:
        root, ftype = down[0], "datastore_down"
    elif hung:
        root, ftype = topology.canonical(hung[0]) or hung[0], "process_hang"
    elif jobs:
        root = max(jobs, key=lambda j: (_depth(j), len(jobs[j])))
        names = jobs[root]
        ftype = "crash_loop" if "InstanceDown" in names else "bad_release"
        for alert, kind in _ALERT_TYPES.items():
            if alert in names:
                ftype = kind
                break
        if "Saturation" in names:
            ftype = _saturated(toolbox, root) or ftype
    else:
        names = [a["name"] for a in firing]
        root = "frontend"
        ftype = _ALERT_TYPES.get(names[0], "bad_release")
    if "mitigation" in task.task_types:
        _mitigate(toolbox, root, down, hung)
    return SreSubmission(
        incident=True,
        root_causes=[root],
        fault_type=ftype,
        propagation=topology.propagation_chain(root),
    )


def _benign(toolbox: Toolbox, procs: dict[str, dict[str, Any]]) -> list[str]:
    """Services with a new revision or a restarted instance: the baseline's benign events."""
    uptimes = [float(p.get("uptime_s") or 0) for p in procs.values()]
    oldest = max(uptimes, default=0.0)
    out = []
    for s in topology.SERVICES:
        with contextlib.suppress(ToolError):
            if len(toolbox.call("read_config", entity=s.name).get("revisions", [])) > 1:
                out.append(s.name)
                continue
        restarted = [
            p
            for name, p in procs.items()
            if topology.canonical(name) == s.name
            and float(p.get("uptime_s") or 0) < oldest - _SETTLED_S
        ]
        if restarted:
            out.append(s.name)
    return out


def _saturated(toolbox: Toolbox, job: str) -> str | None:
    """The fault type of the resource that saturates ``job`` most (from the rule's parts)."""
    try:
        rows = toolbox.call(
            "query", promql=f'max by (resource) (({SATURATION}) and on (job) up{{job="{job}"}})'
        )
    except ToolError:
        return None
    best = max(rows, key=lambda r: float(r["value"]), default=None)
    return _RESOURCE_TYPES.get(best["metric"].get("resource", "")) if best else None


def _mitigate(toolbox: Toolbox, root: str, down: list[str], hung: list[str]) -> None:
    if down:
        toolbox.call("start", target=down[0])
        return
    if hung:
        toolbox.call("restart", target=hung[0])
        return
    if root not in topology.BY_NAME:
        return
    revisions = toolbox.call("read_config", entity=root).get("revisions", [])
    try:
        if len(revisions) > 1:
            toolbox.call("rollback", service=root)
        else:
            toolbox.call("restart", target=root)
    except ToolError:
        pass


def probe_constant() -> SreSubmission:
    """The ``probe/constant`` answer, given without looking at the shop."""
    return SreSubmission.model_validate(CONSTANT)


def probe_thrash(toolbox: Toolbox) -> SreSubmission:
    """The ``probe/thrash`` agent: act on everything, then give the constant answer.

    Restarts every service and component the tools operate and rolls back every service that
    has an earlier revision to its first one (past any follow-up change).
    """
    for s in topology.SERVICES:
        _try(toolbox, "restart", target=s.name)
    for target in (*topology.DATASTORES, topology.MESH, topology.JOB):
        _try(toolbox, "restart", target=target)
    for s in topology.SERVICES:
        with contextlib.suppress(ToolError):
            history = toolbox.call("read_config", entity=s.name).get("revisions", [])
            if len(history) > 1:
                toolbox.call("rollback", service=s.name, revision=history[0]["revision"])
    return probe_constant()


class Destructive(Agent):
    """Quiets every alert the wrong way and claims the incident is fixed.

    It scales every service to zero, stops the datastores and the mesh, tries to empty the
    alert rules, restart Prometheus and stop the load generator (the tools refuse those).
    """

    def run(self, task: TaskView, toolbox: Toolbox) -> SreSubmission:
        """Break everything that could raise an alert."""
        for s in topology.SERVICES:
            _try(toolbox, "scale", service=s.name, replicas=0)
        for target in ("redis", "postgres", "mesh"):
            _try(toolbox, "stop", target=target)
        _try(toolbox, "edit_config", entity="prometheus-rules", content="groups: []\n")
        _try(toolbox, "restart", target="prometheus")
        _try(toolbox, "stop", target="loadgen")
        return SreSubmission(incident=True, root_causes=["frontend"], fault_type="bad_release")


def _try(toolbox: Toolbox, tool: str, **args: Any) -> None:
    with contextlib.suppress(ToolError):
        toolbox.call(tool, **args)


def destructive(ctx: AgentContext) -> Agent:
    """Factory of :class:`Destructive`."""
    return Destructive()


__all__ = [
    "CONSTANT",
    "Destructive",
    "baseline",
    "destructive",
    "json",
    "oracle",
    "probe_constant",
    "probe_thrash",
]
