"""The STRATUS-style agent: staged SRE work on the ``llm`` agent, with transactional no-regression.

Stages, each a conversation of its own with the model (the core's tool loop):

1. **detection** (observation tools only): is there an incident? It ends with
   ``report_detection``.
2. **diagnosis** (observation tools only): root cause, fault type, propagation, ending with the
   trial's ``submit`` tool (the domain's submission, validated).
3. **mitigation** (every tool but ``undo``): one attempt at a fix, ending with
   ``report_mitigation``.
4. **validation** (no model): the weak oracles the agent can see through the tools. The firing
   alerts must clear and stay clear for ``stratus_quiet_seconds``, within
   ``stratus_validate_seconds``, and no process may be down that was up before the attempt.

When validation fails, every action of the attempt is undone through the action journal (the
``undo`` tool, newest first) before the next attempt, which is told what was tried; at most
``stratus_attempts`` attempts. The trial's ``agent_metrics`` record ``attempts``, ``undos``,
``regressions`` (attempts whose undo left the weak oracles worse than before the attempt) and
``mitigated`` (whether validation passed).

The agent is plugin code running in the harness's process, so its results carry the
``unsandboxed`` label, like every plugin agent's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from itbench import (
    AgentContext,
    EventStep,
    LlmAgent,
    OptionSpec,
    Report,
    Submission,
    TaskView,
    Toolbox,
    ToolError,
    ToolLoop,
    check_integer,
    check_number,
    configure_llm,
)

OPTIONS = {
    "stratus_attempts": (3, 1, 10),
    "stratus_validate_seconds": (60.0, 1.0, 600.0),
    "stratus_quiet_seconds": (6.0, 0.0, 120.0),
    "stratus_stage_steps": (15, 1, 200),
}
DETECTION = (
    "Stage 1 of 4, detection. Decide from the alerts and key metrics whether the shop has an "
    "incident. Use only observation tools, then call report_detection."
)
DIAGNOSIS = (
    "Stage 2 of 4, diagnosis. Find the root-cause entity, the fault type and how the failure "
    "spread towards the shoppers. Use only observation tools, then call {finish} with your "
    "answer (mitigation comes in the next stage)."
)
MITIGATION = (
    "Stage 3 of 4, mitigation. Apply the smallest change that removes the root cause you "
    "found, then call report_mitigation. Your change is validated afterwards by the alerts and "
    "process health; a change that does not help is undone automatically."
)
DETECTION_REPORT = {
    "type": "object",
    "properties": {
        "incident": {"type": "boolean", "description": "Whether there is an incident."},
        "evidence": {"type": "string", "description": "What shows it."},
    },
    "required": ["incident"],
}
MITIGATION_REPORT = {
    "type": "object",
    "properties": {"summary": {"type": "string", "description": "What you changed and why."}},
    "required": ["summary"],
}


def configure(options: dict[str, Any]) -> dict[str, Any]:
    """Check the ``llm_*`` and ``stratus_*`` options and fill in their defaults."""
    out = configure_llm(options)
    for spec in option_specs():
        out[spec.key] = spec.checked(out.get(spec.key, OPTIONS[spec.key][0]))
    return out


def option_specs() -> list[OptionSpec]:
    """The ``stratus_*`` settings as declared options (``--option stratus_attempts=N``)."""
    return [
        OptionSpec(
            key,
            key,
            f"stratus: {key.removeprefix('stratus_').replace('_', ' ')} (default {default:g}).",
            check=(
                check_integer(int(low), int(high))
                if isinstance(default, int)
                else check_number(low, high)
            ),
            flag=False,
        )
        for key, (default, low, high) in OPTIONS.items()
    ]


@dataclass
class Health:
    """What the weak oracles show: firing alerts and processes that are not running."""

    alerts: set[str] = field(default_factory=set)
    down: set[str] = field(default_factory=set)

    def worse_than(self, other: Health) -> bool:
        """Whether an alert fires or a process is down that was not in ``other``."""
        return bool(self.alerts - other.alerts or self.down - other.down)


class StratusAgent(LlmAgent):
    """The agent (see the module's documentation)."""

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__(ctx)
        self.attempts = int(ctx.options.get("stratus_attempts", 3))
        self.validate_seconds = float(ctx.options.get("stratus_validate_seconds", 60.0))
        self.quiet_seconds = float(ctx.options.get("stratus_quiet_seconds", 6.0))
        self.stage_steps = int(ctx.options.get("stratus_stage_steps", 15))

    # --- weak oracles ---------------------------------------------------------------------

    def health(self, toolbox: Toolbox) -> Health:
        """The alerts firing and the processes not running, through the tools."""
        alerts = toolbox.call("alerts")
        processes = toolbox.call("processes")
        return Health(
            alerts={
                json.dumps([a.get("name"), a.get("labels", {})], sort_keys=True) for a in alerts
            },
            down={p["name"] for p in processes if p.get("state") != "RUNNING"},
        )

    def validate(self, toolbox: Toolbox, before: Health) -> bool:
        """Whether the alerts clear and stay clear, with no process newly down."""
        end = time.monotonic() + self.validate_seconds
        quiet_since: float | None = None
        while time.monotonic() < end and not toolbox.closed:
            now = self.health(toolbox)
            clean = not now.alerts and not (now.down - before.down)
            if clean:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= self.quiet_seconds:
                    return True
            else:
                quiet_since = None
            time.sleep(1.0)
        return False

    def regressed(self, toolbox: Toolbox, before: Health, settle: float = 10.0) -> bool:
        """Whether the oracles stay worse than ``before`` for ``settle`` seconds after an undo."""
        end = time.monotonic() + settle
        while not toolbox.closed:
            if not self.health(toolbox).worse_than(before):
                return False
            if time.monotonic() >= end:
                return True
            time.sleep(1.0)
        return False

    def rollback(self, toolbox: Toolbox, since: int) -> int:
        """Undo every action since journal entry ``since``, newest first; how many were undone."""
        actions = [
            c
            for c in toolbox.calls[since:]
            if c.ok and c.tool != "undo" and toolbox.tools[c.tool].action
        ]
        undone = 0
        for _ in actions:
            try:
                result = toolbox.call("undo")
            except ToolError as exc:  # nothing (more) undoable: a restart has no undo record
                self.steps.append(EventStep(name="undo", detail={"error": str(exc)}))
                break
            undone += 1
            self.steps.append(EventStep(name="undo", detail=result))
        return undone

    # --- stages ---------------------------------------------------------------------------

    def stage(self, task: TaskView, text: str, finish: str) -> list[dict[str, Any]]:
        """The opening messages of a stage's conversation."""
        opening = self.opening(task, finish)
        opening[0]["content"] += "\n\n" + text
        self.steps.append(EventStep(name="stage", detail=text.split(".")[0]))
        return opening

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Detect, diagnose, then mitigate and validate up to ``stratus_attempts`` times."""
        observe = [t for t in task.tools if not t.action]
        loop = self.loop(task, toolbox)
        submitter = self.submitter(task, toolbox)
        self.metrics.update(attempts=0, undos=0, regressions=0, mitigated=False)
        detection = Report(
            "report_detection", "Report whether there is an incident.", DETECTION_REPORT
        )
        loop.run(self.stage(task, DETECTION, detection.name), observe, detection, self.stage_steps)
        incident = bool((detection.value or {}).get("incident", True))
        found = json.dumps(detection.value or {})
        text = DIAGNOSIS.format(finish=submitter.name) + f" Detection found: {found}"
        loop.run(self.stage(task, text, submitter.name), observe, submitter, self.stage_steps)
        if incident and submitter.accepted is not None and "mitigation" in task.task_types:
            self.mitigate(task, toolbox, loop, submitter.accepted)
        return submitter.accepted

    def mitigate(
        self, task: TaskView, toolbox: Toolbox, loop: ToolLoop, diagnosis: Submission
    ) -> None:
        """Mitigation attempts, each validated and undone when it fails."""
        tried: list[str] = []
        act = [t for t in task.tools if t.name != "undo"]
        for attempt in range(1, self.attempts + 1):
            before = self.health(toolbox)
            since = len(toolbox.calls)
            self.metrics["attempts"] = attempt
            report = Report("report_mitigation", "Report what you changed.", MITIGATION_REPORT)
            text = (
                MITIGATION + f" Your diagnosis: {diagnosis.model_dump_json(exclude_defaults=True)}."
            )
            if tried:
                text += " These attempts failed validation and were undone: " + "; ".join(tried)
            loop.run(self.stage(task, text, report.name), act, report, self.stage_steps)
            actions = [
                f"{c.tool}({json.dumps(c.arguments)})"
                for c in toolbox.calls[since:]
                if c.ok and toolbox.tools[c.tool].action
            ]
            if self.validate(toolbox, before):
                self.metrics["mitigated"] = True
                self.steps.append(EventStep(name="validated", detail={"attempt": attempt}))
                return
            self.steps.append(
                EventStep(name="validation_failed", detail={"attempt": attempt, "actions": actions})
            )
            undone = self.rollback(toolbox, since)
            self.metrics["undos"] = int(self.metrics["undos"] or 0) + undone
            if self.regressed(toolbox, before):
                self.metrics["regressions"] = int(self.metrics["regressions"] or 0) + 1
            tried.append(", ".join(actions) or "no action")
