"""Typed agent tools and the toolbox that calls them, journals every call and enforces the deadline."""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from itbench.deadline import Deadline
from itbench.errors import ToolError
from itbench.models import ToolSpec


@dataclass
class Tool:
    """One agent tool: a Python callable with a JSON-schema description of its parameters.

    Build one with :meth:`Tool.from_function`, which derives the schema (and validation)
    from the function's type-annotated keyword parameters and its docstring.
    """

    name: str
    description: str
    func: Callable[..., Any]
    args_model: type[BaseModel]
    action: bool = False

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        action: bool = False,
    ) -> Tool:
        """Wrap a typed function as a tool.

        Args:
            func: The implementation. Every parameter needs a type annotation; parameters
                with defaults are optional in the schema.
            name: Tool name (defaults to the function name).
            description: Text for the agent (defaults to the first docstring paragraph).
            action: True when the tool changes the environment.

        Returns:
            The tool.
        """
        sig = inspect.signature(func)
        hints = inspect.get_annotations(func, eval_str=True)
        fields: dict[str, Any] = {}
        for pname, param in sig.parameters.items():
            if pname == "self":
                continue
            annotation = hints.get(pname, Any)
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, default)
        tool_name = name or func.__name__
        # Arguments are JSON (from agents over HTTP too): NaN and infinities are no numbers.
        config = ConfigDict(extra="forbid", allow_inf_nan=False)
        model = create_model(f"{tool_name}_args", __config__=config, **fields)
        doc = description or (inspect.getdoc(func) or tool_name).split("\n\n")[0]
        return cls(name=tool_name, description=doc, func=func, args_model=model, action=action)

    def spec(self) -> ToolSpec:
        """The agent-facing description of this tool."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(
            name=self.name, description=self.description, parameters=schema, action=self.action
        )


@dataclass
class ToolCall:
    """One journaled call."""

    index: int
    tool: str
    arguments: dict[str, Any]
    started_at: str
    elapsed: float
    ok: bool
    result: Any = None
    error: str | None = None


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        json.dumps(value)
        return value
    except TypeError:
        return json.loads(json.dumps(value, default=str))


@dataclass
class Toolbox:
    """The tools of one trial.

    Every call is validated against the tool's schema, refused after the deadline or once
    the toolbox is closed, and appended to ``journal_path`` (JSON lines) when one is given.
    """

    tools: dict[str, Tool]
    deadline: Deadline | None = None
    journal_path: Path | None = None
    calls: list[ToolCall] = field(default_factory=list)
    _closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    first_call_at: float | None = None
    #: Calls started and not yet returned; notified when one returns.
    _running: int = 0
    _returned: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def of(cls, tools: list[Tool], **kwargs: Any) -> Toolbox:
        """Build a toolbox from a list of tools (names must be unique)."""
        by_name: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in by_name:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            by_name[tool.name] = tool
        return cls(tools=by_name, **kwargs)

    def specs(self) -> list[ToolSpec]:
        """Agent-facing specs of all tools."""
        return [t.spec() for t in self.tools.values()]

    def close(self) -> None:
        """Refuse every further call (used when the agent's time is up)."""
        with self._returned:
            self._closed = True

    @property
    def closed(self) -> bool:
        """Whether calls are refused."""
        return self._closed

    @property
    def running(self) -> int:
        """Calls started and not yet returned (threads of the agent may still be in one)."""
        return self._running

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no call runs, at most ``timeout`` seconds; whether none runs."""
        with self._returned:
            return self._returned.wait_for(lambda: self._running == 0, timeout)

    @property
    def action_calls(self) -> list[ToolCall]:
        """Journaled calls of tools that change the environment."""
        return [c for c in self.calls if c.tool in self.tools and self.tools[c.tool].action]

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Call tool ``name`` with keyword ``arguments``.

        Raises:
            ToolError: unknown tool, invalid arguments, deadline passed, toolbox closed, or the
                tool itself failed.
        """
        with self._returned:  # with close(): a call that starts is seen by wait_idle
            if self._closed:
                raise ToolError("the trial's time is up: tools are closed")
            if self.deadline is not None and self.deadline.passed():
                raise ToolError("deadline passed: tools are closed")
            self._running += 1
        start = time.time()
        if self.first_call_at is None:
            self.first_call_at = start
        ok, result, error = False, None, None
        try:
            tool = self.tools.get(name)
            if tool is None:
                raise ToolError(f"unknown tool {name!r}; tools: {', '.join(sorted(self.tools))}")
            try:
                parsed = tool.args_model.model_validate(arguments)
            except ValidationError as exc:
                raise ToolError(f"invalid arguments for {name}: {_short_errors(exc)}") from None
            kwargs = {k: getattr(parsed, k) for k in tool.args_model.model_fields}
            try:
                result = tool.func(**kwargs)
            except ToolError:
                raise
            except Exception as exc:  # a tool's own failure is reported to the agent
                raise ToolError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
            ok = True
            return result
        except ToolError as exc:
            error = str(exc)
            raise
        finally:
            try:
                self._record(name, arguments, start, ok, result, error)
            finally:
                with self._returned:
                    self._running -= 1
                    self._returned.notify_all()

    def _record(
        self,
        name: str,
        arguments: dict[str, Any],
        start: float,
        ok: bool,
        result: Any,
        error: str | None,
    ) -> None:
        with self._lock:
            call = ToolCall(
                index=len(self.calls),
                tool=name,
                arguments=_jsonable(arguments),
                started_at=datetime.fromtimestamp(start, UTC).isoformat(),
                elapsed=round(time.time() - start, 6),
                ok=ok,
                result=_jsonable(result) if ok else None,
                error=error,
            )
            self.calls.append(call)
            if self.journal_path is not None:
                with self.journal_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(call.__dict__, default=str) + "\n")


def _short_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)
