"""Tools: schemas from type hints, validation, the journal and the deadline."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal

import pytest

from itbench.deadline import Deadline
from itbench.errors import ToolError
from itbench.tools import Tool, Toolbox


def logs(
    service: str, since: float = 60.0, level: Literal["info", "error"] = "info", limit: int = 10
) -> list[str]:
    """Read a service's log lines.

    More text that the agent does not need.
    """
    return [f"{service}:{level}"] * min(limit, 2)


def test_schema_comes_from_the_signature_and_the_first_docstring_paragraph() -> None:
    spec = Tool.from_function(logs).spec()
    assert spec.description == "Read a service's log lines."
    params = spec.parameters
    assert params["required"] == ["service"]
    assert params["properties"]["level"]["enum"] == ["info", "error"]
    assert params["properties"]["limit"]["type"] == "integer"
    assert params["additionalProperties"] is False


def test_calls_are_validated_and_journaled(tmp_path: Path) -> None:
    box = Toolbox.of([Tool.from_function(logs)], journal_path=tmp_path / "j.jsonl")
    assert box.call("logs", service="cart", limit=1) == ["cart:info"]
    with pytest.raises(ToolError, match="limit"):
        box.call("logs", service="cart", limit="many")
    with pytest.raises(ToolError, match="unknown tool 'nope'"):
        box.call("nope")
    with pytest.raises(ToolError, match="Extra inputs"):
        box.call("logs", service="cart", colour="red")
    lines = [json.loads(x) for x in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert [x["ok"] for x in lines] == [True, False, False, False]
    assert lines[0]["arguments"] == {"service": "cart", "limit": 1}
    assert "limit" in lines[1]["error"]


def test_a_failing_tool_is_reported_to_the_agent_and_the_deadline_closes_tools() -> None:
    def boom() -> None:
        """Fail."""
        raise OSError("disk gone")

    box = Toolbox.of([Tool.from_function(boom)], deadline=Deadline.after(0.2))
    with pytest.raises(ToolError, match="boom failed: OSError: disk gone"):
        box.call("boom")
    time.sleep(0.25)
    with pytest.raises(ToolError, match="deadline"):
        box.call("boom")
    box2 = Toolbox.of([Tool.from_function(boom)])
    box2.close()
    with pytest.raises(ToolError, match="closed"):
        box2.call("boom")


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate tool name"):
        Toolbox.of([Tool.from_function(logs), Tool.from_function(logs)])
