"""Trajectories: every agent's steps of one trial, in one documented JSON format.

Each trial directory holds ``trajectory.json``, written by the runner when the trial ends, for
every agent. The document (``format: "itbench-trajectory"``, ``version`` :data:`VERSION`):

- ``trial``: ``trial_id``, ``handle``, ``scenario_id``, ``domain``, ``agent``, ``status``,
  ``error``, ``labels``, ``started_at``, ``finished_at``;
- ``model`` and ``settings``: the model and the agent's settings (temperature, seed, limits)
  when the agent used one, else ``null`` and ``{}``;
- ``usage``: ``input_tokens``, ``output_tokens``, ``cost_usd`` of the whole trial;
- ``agent_metrics``: figures the agent reported about itself (attempts, undos), never scored;
- ``submission``: what the harness accepted, or ``null``;
- ``steps``: in order, each with ``index``, ``kind``, ``at`` (when it started, UTC) and
  ``elapsed`` (seconds, when it took time):

  - ``message``: ``role`` (``system``, ``user``, ``assistant`` or ``tool``), ``content``,
    for an assistant message its ``tool_calls`` (``id``, ``name``, ``arguments`` as the model
    sent them) and ``usage`` (that response's tokens and cost), for a tool message the
    ``tool_call_id`` it answers;
  - ``tool``: one call of the trial's toolbox: ``tool``, ``arguments``, ``ok``, ``result``
    (cut at :data:`RESULT_CAP` characters of JSON, ``truncated`` then true) or ``error``, and
    ``journal_index`` (its line in ``tools.jsonl``, which keeps the whole result);
  - ``event``: something else that happened: ``name`` (``retry``, ``submit``,
    ``submit_rejected``, ``step_limit``, ``stage``, ...) and ``detail``.

Agents without model messages (a program, a reference agent) get their tool calls from the
journal; an agent that records its own steps (:attr:`itbench.agents.Agent.steps`) gets them
merged with the journal's tool calls unless it recorded tool steps itself. Trajectories are
harness-only: the trial directory is out of every agent's reach.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from itbench.errors import RunDirError
from itbench.models import MetricValue, TrialResult, Usage
from itbench.tools import ToolCall, _jsonable

VERSION = "1.0"
FORMAT = "itbench-trajectory"
FILE = "trajectory.json"
#: Characters of a tool result's JSON kept in a step (``tools.jsonl`` keeps it whole).
RESULT_CAP = 16_000


def now() -> datetime:
    """The current time in UTC (the ``at`` of a step)."""
    return datetime.now(UTC)


class ModelToolCall(BaseModel):
    """A tool call as a model asked for it."""

    id: str
    name: str
    arguments: str = Field(description="The arguments exactly as the model sent them.")


class StepUsage(BaseModel):
    """Tokens and cost of one model response."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class _Step(BaseModel):
    index: int = 0
    at: datetime = Field(default_factory=now)
    elapsed: float | None = None


class MessageStep(_Step):
    """A message of the conversation with a model."""

    kind: Literal["message"] = "message"
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ModelToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    usage: StepUsage | None = None


class ToolStep(_Step):
    """One call of the trial's toolbox."""

    kind: Literal["tool"] = "tool"
    tool: str
    arguments: Any = None
    ok: bool
    result: Any = None
    error: str | None = None
    truncated: bool = False
    journal_index: int | None = None

    @classmethod
    def from_call(cls, call: ToolCall) -> ToolStep:
        """A step of a journaled call, its result cut at :data:`RESULT_CAP` characters."""
        result, truncated = cap_result(call.result)
        return cls(
            at=datetime.fromisoformat(call.started_at),
            elapsed=call.elapsed,
            tool=call.tool,
            arguments=call.arguments,
            ok=call.ok,
            result=result,
            error=call.error,
            truncated=truncated,
            journal_index=call.index,
        )


class EventStep(_Step):
    """Something that happened besides messages and tool calls."""

    kind: Literal["event"] = "event"
    name: str
    detail: Any = None


Step = Annotated[MessageStep | ToolStep | EventStep, Field(discriminator="kind")]


class TrialInfo(BaseModel):
    """Which trial a trajectory belongs to, and how it ended."""

    trial_id: str
    handle: str
    scenario_id: str
    domain: str
    agent: str
    status: str
    error: str | None = None
    labels: list[str] = Field(default_factory=list)
    started_at: datetime
    finished_at: datetime


class Trajectory(BaseModel):
    """``trajectory.json`` of one trial (see the module's documentation)."""

    format: Literal["itbench-trajectory"] = "itbench-trajectory"
    version: str = VERSION
    trial: TrialInfo
    model: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    agent_metrics: dict[str, MetricValue] = Field(default_factory=dict)
    submission: dict[str, Any] | None = None
    steps: list[Step] = Field(default_factory=list)

    def messages(self) -> list[MessageStep]:
        """The model messages, in order."""
        return [s for s in self.steps if isinstance(s, MessageStep)]

    def tool_steps(self) -> list[ToolStep]:
        """The tool calls, in order."""
        return [s for s in self.steps if isinstance(s, ToolStep)]


def cap_result(value: Any, cap: int = RESULT_CAP) -> tuple[Any, bool]:
    """``value`` as JSON-able data, or its JSON text cut at ``cap`` characters when longer."""
    data = _jsonable(value)
    text = json.dumps(data, default=str)
    if len(text) <= cap:
        return data, False
    return text[:cap], True


def merged_steps(own: Sequence[Step], calls: Iterable[ToolCall]) -> list[Step]:
    """An agent's own steps, with the journal's tool calls merged in by time unless it has some.

    Steps are renumbered from 0 in the result.
    """
    steps: list[Step] = list(own)
    if not any(isinstance(s, ToolStep) for s in steps):
        journal = [ToolStep.from_call(c) for c in calls]
        # A stable sort keeps an agent's own order between steps of the same instant.
        steps = sorted([*steps, *journal], key=lambda s: s.at)
    return [s.model_copy(update={"index": i}) for i, s in enumerate(steps)]


def build(
    result: TrialResult,
    own: Sequence[Step],
    calls: Iterable[ToolCall],
    *,
    model: str | None = None,
    settings: dict[str, Any] | None = None,
    submission: dict[str, Any] | None = None,
) -> Trajectory:
    """The trajectory of a finished trial."""
    return Trajectory(
        trial=TrialInfo(
            trial_id=result.trial_id,
            handle=result.handle,
            scenario_id=result.scenario_id,
            domain=result.domain,
            agent=result.agent,
            status=result.status.value,
            error=result.error,
            labels=[str(label) for label in result.labels],
            started_at=result.started_at,
            finished_at=result.finished_at,
        ),
        model=model,
        settings=dict(settings or {}),
        usage=result.usage,
        agent_metrics=dict(result.agent_metrics),
        submission=submission,
        steps=merged_steps(own, calls),
    )


def write(trial_dir: Path, trajectory: Trajectory) -> Path:
    """Write ``trajectory.json`` into ``trial_dir`` (mode 0600, atomically)."""
    path = trial_dir / FILE
    tmp = path.with_suffix(".json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(trajectory.model_dump_json(indent=2))
    os.replace(tmp, path)
    return path


def read(trial_dir: Path) -> Trajectory:
    """Read the trajectory of a trial directory.

    Raises:
        RunDirError: no trajectory there, or one that does not parse (naming file and field).
    """
    path = trial_dir / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunDirError(
            f"{path}: not found (not a trial directory of a finished trial?)"
        ) from None
    try:
        return Trajectory.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(document)"
        raise RunDirError(f"{path}: field '{loc}': {err['msg']}") from None


def save(trial_dir: Path, result: TrialResult, agent: object, calls: Iterable[ToolCall]) -> None:
    """Write a finished trial's trajectory; never raises (a failure goes to a file beside it).

    Args:
        trial_dir: The trial's directory (its ``submission.json`` is the accepted submission).
        result: The trial's result.
        agent: The trial's agent object, or ``None`` when none was built; its ``steps``,
            ``model`` and ``settings`` attributes are read when present.
        calls: The trial's tool-call journal.
    """
    try:
        submission: dict[str, Any] | None = None
        with_submission = trial_dir / "submission.json"
        if with_submission.is_file():
            submission = json.loads(with_submission.read_text(encoding="utf-8"))
        model = getattr(agent, "model", None)
        settings = getattr(agent, "settings", None)
        trajectory = build(
            result,
            list(getattr(agent, "steps", None) or []),
            list(calls),
            model=model if isinstance(model, str) else None,
            settings=settings if isinstance(settings, dict) else None,
            submission=submission,
        )
        write(trial_dir, trajectory)
    except Exception as exc:  # a record that failed never fails the trial
        (trial_dir / "trajectory-error.txt").write_text(
            f"{type(exc).__name__}: {exc}\n", encoding="utf-8"
        )
