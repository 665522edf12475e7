"""``itbench tool call NAME KEY=VALUE...``: each VALUE parsed by its parameter's JSON schema."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from conftest import CliFn
from pydantic import BaseModel

from itbench.testing import bare_task
from itbench.toolclient import ArgumentProblem, UsageProblem, parse_arguments, typed_arguments
from itbench.tools import Tool, Toolbox
from itbench.toolserver import ToolServer

CLIENT = Path(__file__).parents[1] / "itbench" / "toolclient.py"


class Window(BaseModel):
    start: int
    end: int


def record(
    zip_code: str,
    count: int,
    ratio: float,
    dry_run: bool,
    names: list[str],
    labels: dict[str, str],
    limit: int | None = None,
    level: Literal["low", "high"] = "low",
    window: Window | None = None,
    anything: Any = None,
) -> dict[str, Any]:
    """Echo the arguments with their Python types."""
    args = dict(locals())
    args["window"] = window.model_dump() if window else None
    return {k: [type(v).__name__, v] for k, v in args.items()}


SCHEMA = Tool.from_function(record).spec().parameters


def test_values_follow_the_parameter_types_and_strings_stay_verbatim() -> None:
    words = {
        "zip_code": "02134",
        "count": "7",
        "ratio": "0.5",
        "dry_run": "false",
        "names": '["a", "b"]',
        "labels": '{"team": "sre"}',
        "limit": "null",
        "level": "high",
        "window": '{"start": 1, "end": 2}',
        "anything": "[1]",
    }
    assert typed_arguments("record", words, SCHEMA) == {
        "zip_code": "02134",
        "count": 7,
        "ratio": 0.5,
        "dry_run": False,
        "names": ["a", "b"],
        "labels": {"team": "sre"},
        "limit": None,
        "level": "high",
        "window": {"start": 1, "end": 2},
        "anything": [1],
    }
    # A string that looks like JSON stays a string, and a number parameter takes an integer.
    assert typed_arguments("record", {"zip_code": "[1]", "ratio": "3"}, SCHEMA) == {
        "zip_code": "[1]",
        "ratio": 3,
    }
    assert typed_arguments("record", {"dry_run": "Yes", "limit": "5"}, SCHEMA) == {
        "dry_run": True,
        "limit": 5,
    }


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("count", "seven", "an integer"),
        ("count", "1.5", "an integer"),
        ("count", "true", "an integer"),
        ("ratio", "fast", "a number"),
        ("dry_run", "maybe", "a boolean"),
        ("names", "a,b", "a JSON array"),
        ("labels", "[1]", "a JSON object"),
        ("limit", "none", "an integer or null"),
        ("window", "1-2", "a JSON object or null"),
    ],
)
def test_a_value_of_the_wrong_type_names_the_parameter_and_the_type(
    key: str, raw: str, expected: str
) -> None:
    with pytest.raises(ArgumentProblem) as caught:
        typed_arguments("record", {key: raw}, SCHEMA)
    message = str(caught.value)
    assert message.startswith("invalid arguments for record: ")
    assert f"parameter {key!r} expects {expected}" in message and repr(raw) in message


def test_without_a_schema_values_are_json_when_they_can_be() -> None:
    assert parse_arguments(["n=1", "s=x", "z=02134"]) == {"n": 1, "s": "x", "z": "02134"}
    assert parse_arguments(["n=1"], '{"n": 2, "m": [3]}', SCHEMA, "record") == {"n": 2, "m": [3]}
    with pytest.raises(UsageProblem, match="'oops' is not KEY=VALUE"):
        parse_arguments(["oops"], None, SCHEMA)


def pick(
    note: str | None,
    port: int | str,
    ratio: float | str = 0.0,
    scale: float = 1.0,
) -> None:
    """A tool whose parameters take a string beside null, an integer or a number."""


PICK = Tool.from_function(pick).spec().parameters


def test_a_string_alternative_keeps_what_is_no_canonical_literal() -> None:
    assert typed_arguments("pick", {"note": "", "port": "3000.0"}, PICK) == {
        "note": "",
        "port": "3000.0",
    }
    assert typed_arguments("pick", {"note": "null", "port": "3000"}, PICK) == {
        "note": None,
        "port": 3000,
    }
    assert typed_arguments("pick", {"ratio": "NaN", "port": "1e3"}, PICK) == {
        "ratio": "NaN",
        "port": "1e3",
    }
    assert typed_arguments("pick", {"ratio": "2.50", "scale": "-1E2"}, PICK) == {
        "ratio": 2.5,
        "scale": -100.0,
    }
    # An empty value is null where no string is allowed.
    assert typed_arguments("record", {"limit": ""}, SCHEMA) == {"limit": None}


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "0x10", "1_000", "+1"])
def test_nan_infinity_and_other_spellings_are_not_numbers(raw: str) -> None:
    with pytest.raises(ArgumentProblem, match="parameter 'scale' expects a number"):
        typed_arguments("pick", {"scale": raw}, PICK)
    with pytest.raises(ArgumentProblem, match="parameter 'count' expects an integer"):
        typed_arguments("record", {"count": raw}, SCHEMA)
    # Nor are they numbers inside JSON, nor where the schema says nothing.
    with pytest.raises(ArgumentProblem, match="expects a JSON array"):
        typed_arguments("record", {"names": f"[{raw}]"}, SCHEMA)
    assert typed_arguments("record", {"undescribed": raw}, SCHEMA) == {"undescribed": raw}


@pytest.mark.parametrize(
    ("schema", "detail"),
    [
        ({"properties": {"x": {"type": 5}}}, "parameter 'x': 'type' is 5"),
        ({"properties": {"x": {"type": "text"}}}, "parameter 'x': 'type' is 'text'"),
        ({"properties": {"x": {"enum": 5}}}, "parameter 'x': 'enum' is 5"),
        ({"properties": {"x": {"anyOf": 5}}}, "parameter 'x': 'anyOf' is 5"),
        ({"properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {"X": 5}}, "'#/$defs/X' is 5"),
        ({"properties": ["x"]}, "'properties' is ['x']"),
    ],
)
def test_a_malformed_schema_is_a_clear_error(schema: dict[str, Any], detail: str) -> None:
    with pytest.raises(ArgumentProblem) as caught:
        typed_arguments("odd", {"x": "1"}, schema)
    assert str(caught.value).startswith("the schema of odd is malformed")
    assert detail in str(caught.value)


def test_a_repeated_key_is_an_error_naming_it() -> None:
    with pytest.raises(UsageProblem, match="'count' is given twice"):
        parse_arguments(["count=1", "zip_code=1", "count=2"], None, SCHEMA)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ToolServer]:
    box = Toolbox.of([Tool.from_function(record)])
    task = bare_task(box, tmp_path)
    server = ToolServer(box, task).start()
    yield server
    server.stop()


ARGS = [
    "record",
    "zip_code=02134",
    "count=7",
    "ratio=2",
    "dry_run=true",
    "names=[]",
    "labels={}",
]


def _standalone(server: ToolServer, *args: str) -> subprocess.CompletedProcess[str]:
    """The tool client run on its own by the system Python, as inside the sandbox."""
    return subprocess.run(
        ["/usr/bin/python3", str(CLIENT), *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **server.env()},
        cwd="/tmp",
        timeout=60,
    )


def test_the_cli_and_the_standalone_client_send_typed_values(
    itbench: CliFn, server: ToolServer
) -> None:
    ours = itbench("tool", "call", *ARGS, env=server.env())
    assert ours.returncode == 0, ours.stderr
    result = json.loads(ours.stdout)
    assert result["zip_code"] == ["str", "02134"] and result["count"] == ["int", 7]
    assert result["dry_run"] == ["bool", True] and result["ratio"] == ["float", 2.0]
    alone = _standalone(server, "tool", "call", *ARGS)
    assert (alone.returncode, alone.stdout) == (0, ours.stdout), alone.stderr
    # A wrong type fails before the call, naming the parameter and its type, in both.
    bad = [*ARGS[:2], "count=many", *ARGS[3:]]
    ours = itbench("tool", "call", *bad, env=server.env())
    alone = _standalone(server, "call", *bad)
    for res in (ours, alone):
        assert res.returncode == 1 and res.stdout == ""
        assert "parameter 'count' expects an integer, got 'many'" in res.stderr
    assert not [c for c in server.toolbox.calls if c.arguments.get("count") == "many"]
    # A repeated key is a usage error in both, naming the key.
    twice = [*ARGS, "count=8"]
    ours = itbench("tool", "call", *twice, env=server.env())
    alone = _standalone(server, "call", *twice)
    for res in (ours, alone):
        assert res.returncode == 2 and "'count' is given twice" in res.stderr, res.stderr
