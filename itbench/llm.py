"""The ``llm`` agent: a tool-calling loop over the OpenAI Chat Completions protocol.

The model gets the system prompt of the trial's domain (:meth:`itbench.Domain.system_prompt`;
``--option llm_system_prompt=FILE`` replaces it), the task (goal, task types,
time limit, public context) and the trial's tools as functions, plus a final ``submit`` tool
whose parameters are the domain's submission schema. The loop is the harness's own code: the
model reaches the environment only through validated tool calls and its submission. A
submission that does not validate is refused with the reasons and may be corrected
``llm_submit_retries`` times; malformed tool calls (arguments that are not a JSON object,
unknown tools) are answered with an error the model can act on; tool results longer than
``llm_tool_output_chars`` are cut and the cut is stated; every harness path is hidden from
what the model is shown (:mod:`itbench.redact`). The loop ends at the first accepted
submission, after ``llm_max_steps`` responses, or when the trial's time is up.

Tokens and cost go into the trial's usage, every message, tool call and retry into its
trajectory (:mod:`itbench.trajectory`). :class:`ToolLoop` is the reusable part: a plugin agent
(the STRATUS-style one) runs several loops with stage prompts, tool subsets and finishing
tools of its own.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from itbench.agents import Agent, AgentContext
from itbench.chat import ChatClient, LlmError, LlmSettings
from itbench.errors import ToolError
from itbench.mcpserver import object_schema
from itbench.models import Submission, TaskView, ToolSpec
from itbench.prompts import system_prompt, task_message
from itbench.redact import Redactor
from itbench.submit import Submitter
from itbench.tools import Toolbox, _jsonable
from itbench.trajectory import (
    EventStep,
    MessageStep,
    ModelToolCall,
    Step,
    ToolStep,
    now,
)

_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Finish(Protocol):
    """A tool that ends a loop: ``submit``, or a stage's report."""

    name: str

    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""

    def offer(self, arguments: Any) -> tuple[bool, str]:
        """Accept or refuse the model's arguments, with the message the model is shown."""

    @property
    def exhausted(self) -> bool:
        """Whether the model has used up its corrections."""


@dataclass
class Report:
    """A finishing tool that accepts any object its schema describes, for a stage's report.

    The schema is the model's guide; a report only has to be a JSON object with the
    ``required`` keys. The accepted arguments are in :attr:`value`.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    retries: int = 3
    value: dict[str, Any] | None = None
    refused: int = 0

    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def offer(self, arguments: Any) -> tuple[bool, str]:
        """Accept a JSON object carrying the schema's required keys."""
        missing = [k for k in self.parameters.get("required", []) if k not in (arguments or {})]
        if isinstance(arguments, dict) and not missing:
            self.value = arguments
            return True, "report accepted"
        self.refused += 1
        need = ", ".join(missing) or "an object"
        return False, f"report refused: it needs {need}. Call {self.name} again."

    @property
    def exhausted(self) -> bool:
        """Whether more refusals than :attr:`retries` have happened."""
        return self.refused > self.retries


def _function_calls(message: Any) -> list[tuple[str | None, str, str]]:
    """The (id, name, arguments) of each function call of a response's message."""
    out = []
    for call in getattr(message, "tool_calls", None) or []:
        fn = getattr(call, "function", None)
        if fn is not None:
            raw = fn.arguments
            # Some local servers send the arguments as an object instead of JSON text.
            text = raw if isinstance(raw, str) else json.dumps(raw) if raw is not None else ""
            out.append((getattr(call, "id", None), str(fn.name), text))
    return out


def function(spec: ToolSpec, name: str | None = None) -> dict[str, Any]:
    """A tool as a Chat Completions function definition."""
    parameters = object_schema(spec.parameters or {"properties": {}})
    return {
        "type": "function",
        "function": {
            "name": name or spec.name,
            "description": spec.description,
            "parameters": parameters,
        },
    }


class ToolLoop:
    """A conversation in which a model works through tools until it calls a finishing tool.

    Args:
        chat: The model's client.
        toolbox: The trial's toolbox (every call is validated and journaled there).
        steps: The trajectory to append to.
        redactor: Hides harness paths in whatever the model is shown.
        tool_output_chars: Characters of a tool result shown to the model.
        metrics: Where the number of model responses is kept up to date (``model_responses``),
            so that a trial stopped at its time limit still reports it.
    """

    def __init__(
        self,
        chat: ChatClient,
        toolbox: Toolbox,
        steps: list[Step],
        redactor: Redactor,
        tool_output_chars: int,
        metrics: dict[str, Any] | None = None,
    ) -> None:
        self.chat = chat
        self.toolbox = toolbox
        self.steps = steps
        self.redactor = redactor
        self.budget = tool_output_chars
        self.metrics = metrics if metrics is not None else {}
        self.metrics.setdefault("model_responses", 0)
        self._recorded: set[int] = set()

    def record(self, message: dict[str, Any], **fields: Any) -> None:
        """Append ``message`` to the trajectory as a message step (once per message)."""
        if id(message) in self._recorded:
            return
        self._recorded.add(id(message))
        self.steps.append(
            MessageStep(role=message["role"], content=message.get("content"), **fields)
        )

    def run(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[ToolSpec],
        finish: Finish,
        max_steps: int,
    ) -> bool:
        """Let the model work until ``finish`` accepts, the steps run out or time is up.

        Args:
            messages: The conversation so far (system and user messages); extended in place.
            tools: The tools the model may call in this loop (a subset of the toolbox's).
            finish: The finishing tool.
            max_steps: Model responses this loop may use.

        Returns:
            Whether ``finish`` accepted.

        Raises:
            LlmError: the model's API failed for good.
        """
        for m in messages:
            self.record(m)
        names = {self._name(s.name): s.name for s in tools}
        defs = [function(s, n) for n, s in zip(names, tools, strict=True)]
        defs.append(function(finish.spec()))
        for step in range(max_steps):
            if self.toolbox.closed or time.time() >= self.chat.deadline:
                self.steps.append(EventStep(name="time_up"))
                return False
            if step == max_steps - 1 and max_steps > 1:
                self._say(
                    messages,
                    f"This is your last turn: call {finish.name} now with your best answer.",
                )
            at = now()
            completion, usage, elapsed = self.chat.complete(messages, defs)
            self.metrics["model_responses"] += 1
            choice = completion.choices[0].message
            message: dict[str, Any] = {"role": "assistant", "content": choice.content or ""}
            requested = [
                ModelToolCall(id=call_id or f"call_{step}_{i}", name=name, arguments=arguments)
                for i, (call_id, name, arguments) in enumerate(_function_calls(choice))
            ]
            if requested:
                message["tool_calls"] = [
                    {
                        "id": r.id,
                        "type": "function",
                        "function": {"name": r.name, "arguments": r.arguments},
                    }
                    for r in requested
                ]
            messages.append(message)
            self._recorded.add(id(message))
            self.steps.append(
                MessageStep(
                    at=at,
                    elapsed=round(elapsed, 6),
                    role="assistant",
                    content=choice.content,
                    tool_calls=requested,
                    usage=usage,
                )
            )
            if not requested:
                self._say(messages, f"Continue with the tools, and call {finish.name} to finish.")
                continue
            for r in requested:
                done = self._answer(messages, r, names, finish)
                if done is not None:
                    return done
        self.steps.append(EventStep(name="step_limit", detail={"max_steps": max_steps}))
        return False

    @staticmethod
    def _name(name: str) -> str:
        return name if _FUNCTION_NAME.match(name) else re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]

    def _say(self, messages: list[dict[str, Any]], text: str) -> None:
        message = {"role": "user", "content": text}
        messages.append(message)
        self.record(message)

    def _reply(self, messages: list[dict[str, Any]], call_id: str, text: str) -> None:
        message = {"role": "tool", "tool_call_id": call_id, "content": text}
        messages.append(message)
        self.record(message, tool_call_id=call_id)

    def _answer(
        self,
        messages: list[dict[str, Any]],
        call: ModelToolCall,
        names: dict[str, str],
        finish: Finish,
    ) -> bool | None:
        """Carry out one requested call and answer it; ``True``/``False`` when the loop ends."""
        problem: str | None = None
        arguments: Any = None
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            problem = f"the arguments are not valid JSON ({exc})"
        if problem is None and not isinstance(arguments, dict):
            problem = "the arguments must be a JSON object"
        if problem is not None or not isinstance(arguments, dict):
            self.steps.append(
                EventStep(name="malformed_call", detail={"tool": call.name, "problem": problem})
            )
            self._reply(
                messages, call.id, f"error: {problem}; call {call.name} again with a JSON object"
            )
            return None
        if call.name == finish.name:
            accepted, text = finish.offer(arguments)
            self.steps.append(
                EventStep(
                    name="submit" if accepted else "submit_rejected",
                    detail={"tool": call.name, "message": text},
                )
            )
            self._reply(messages, call.id, text)
            if accepted:
                return True
            return False if finish.exhausted else None
        tool = names.get(call.name)
        if tool is None:
            known = ", ".join([*names, finish.name])
            self._reply(messages, call.id, f"error: unknown tool {call.name!r}; tools: {known}")
            return None
        self._reply(messages, call.id, self._call(tool, arguments))
        return None

    def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call a toolbox tool; the text the model is shown (result or error)."""
        before = len(self.toolbox.calls)
        try:
            result = self.toolbox.call(tool, **arguments)
        except ToolError as exc:
            text = f"error: {self.redactor.text(str(exc))}"
        else:
            text = json.dumps(self.redactor.data(_jsonable(result)), default=str)
        journaled = self.toolbox.calls[before:]
        if journaled:
            self.steps.append(ToolStep.from_call(journaled[0]))
        else:  # refused before the journal (deadline, closed toolbox)
            self.steps.append(ToolStep(tool=tool, arguments=arguments, ok=False, error=text))
        return self._cut(text)

    def _cut(self, text: str) -> str:
        if len(text) <= self.budget:
            return text
        return (
            text[: self.budget]
            + f"\n[truncated: showing the first {self.budget} of {len(text)} characters; "
            "narrow the call to see the rest]"
        )


class LlmAgent(Agent):
    """The ``llm`` agent (see the module's documentation)."""

    confined = True

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__()
        self.config = LlmSettings.from_options(ctx.options, seed=ctx.seed)
        self.model: str | None = self.config.model
        self.settings: dict[str, Any] = self.config.recorded()
        self.domain = ctx.domain
        hidden = [*ctx.protected, *([ctx.trial_dir] if ctx.trial_dir else [])]
        self.redactor = Redactor(hidden)

    def chat(self, task: TaskView) -> ChatClient:
        """The model's client for this trial."""
        return ChatClient(self.config, self.usage, self.steps, task.deadline.timestamp())

    def loop(self, task: TaskView, toolbox: Toolbox) -> ToolLoop:
        """A tool loop of this trial."""
        return ToolLoop(
            self.chat(task),
            toolbox,
            self.steps,
            self.redactor,
            self.config.tool_output_chars,
            self.metrics,
        )

    def submitter(self, task: TaskView, toolbox: Toolbox) -> Submitter:
        """The trial's ``submit`` tool."""
        model: type[Submission] = self.domain.submission_model
        return Submitter(model, task.output_schema, set(toolbox.tools), self.config.submit_retries)

    def opening(self, task: TaskView, finish: str) -> list[dict[str, Any]]:
        """The system and user messages that open the conversation."""
        return [
            {"role": "system", "content": system_prompt(self.domain, self.config.system_prompt)},
            {"role": "user", "content": task_message(task, finish)},
        ]

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Work on the task until the model submits, its steps run out or time is up."""
        submitter = self.submitter(task, toolbox)
        loop = self.loop(task, toolbox)
        loop.run(self.opening(task, submitter.name), task.tools, submitter, self.config.max_steps)
        return submitter.accepted


__all__ = [
    "Finish",
    "LlmAgent",
    "LlmError",
    "Report",
    "ToolLoop",
    "function",
]
