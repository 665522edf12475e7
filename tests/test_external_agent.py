"""Agents as external processes: the tool server, the `itbench tool` client and the command agent."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import CliFn, results, trial_dir

from itbench.errors import ToolError
from itbench.testing import bare_task
from itbench.tools import Tool, Toolbox
from itbench.toolserver import ToolClient, ToolServer

AGENT = Path(__file__).parent / "agents" / "toy_cli_agent.py"


def test_a_program_using_itbench_tool_solves_toy_scenarios(itbench: CliFn, tmp_path: Path) -> None:
    res = itbench(
        "evaluate",
        "--agent",
        "command",
        "-s",
        "toy/[hr]*",
        "--option",
        f"agent_command=/usr/bin/python3 {AGENT}",
        "--out",
        "x",
    )
    assert res.returncode == 0, res.stderr
    rows = results(tmp_path / "x")
    assert [r["status"] for r in rows] == ["passed"] * 4, [r["error"] for r in rows]
    calls = {r["scenario_id"]: r["tool_calls"] for r in rows}
    assert calls == {
        "toy/healthy": 3,
        "toy/registry-alpha-1": 3,
        "toy/registry-beta-2": 4,
        "toy/registry-gamma-3": 5,
    }
    assert all(r["usage"]["input_tokens"] == 42 for r in rows if r["scenario_id"] != "toy/healthy")
    journal = (
        (trial_dir(tmp_path / "x", "toy.registry-beta-2__command__0") / "tools.jsonl")
        .read_text()
        .splitlines()
    )
    assert [json.loads(line)["tool"] for line in journal] == ["keys", "read", "read", "write"]


def test_a_hanging_program_is_stopped_at_its_time_limit(itbench: CliFn, tmp_path: Path) -> None:
    marker = "itbench-test-hang-7781"
    cmd = f"/usr/bin/python3 -c 'import time, sys; sys.argv.append(\"{marker}\"); time.sleep(120)'"
    res = itbench(
        "evaluate",
        "--agent",
        "command",
        "-s",
        "toy/healthy",
        "--timeout",
        "1",
        "--option",
        f"agent_command={cmd}",
        "--out",
        "h",
    )
    assert res.returncode == 0
    [row] = results(tmp_path / "h")
    assert row["status"] == "timeout"
    time.sleep(0.5)
    leftovers = [
        p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])
    ]
    assert not leftovers


def test_a_failing_program_is_an_agent_failure_with_its_stderr(
    itbench: CliFn, tmp_path: Path
) -> None:
    cmd = "/usr/bin/python3 -c 'import sys; sys.exit(\"model quota exceeded\")'"
    itbench(
        "evaluate",
        "--agent",
        "command",
        "-s",
        "toy/healthy",
        "--option",
        f"agent_command={cmd}",
        "--out",
        "f",
    )
    [row] = results(tmp_path / "f")
    assert row["status"] == "failed" and "model quota exceeded" in row["error"]


def test_the_tool_server_needs_its_token_and_reports_tool_errors(tmp_path: Path) -> None:
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    box = Toolbox.of([Tool.from_function(add)])
    task = bare_task(box, tmp_path, handle="t")
    server = ToolServer(box, task).start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        client = ToolClient(server.url, server.token)
        assert client.call("add", a=2, b=3) == 5
        assert client.tools()[0]["name"] == "add" and client.task()["goal"] == "g"
        with pytest.raises(ToolError, match="invalid arguments"):
            client.call("add", a="x")
        with pytest.raises(ToolError, match="token"):
            ToolClient(server.url, "wrong").call("add", a=1)
        assert [c.ok for c in box.calls] == [True, False]
    finally:
        server.stop()
    with pytest.raises(ToolError, match="cannot reach"):
        ToolClient(server.url, server.token, timeout=2).call("add", a=1)


def test_itbench_tool_without_a_trial_is_a_usage_error(itbench: CliFn) -> None:
    res = itbench("tool", "list")
    assert res.returncode == 2 and "ITBENCH_TOOLS_URL" in res.stderr


def test_itbench_tool_and_the_standalone_client_answer_alike(
    itbench: CliFn, tmp_path: Path
) -> None:
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    box = Toolbox.of([Tool.from_function(add)])
    task = bare_task(box, tmp_path)
    client = Path(__file__).parents[1] / "itbench" / "toolclient.py"
    server = ToolServer(box, task).start()
    try:
        for args, code in [
            (["call", "add", "a=2", "--args-json", '{"b": 5}'], 0),
            (["call", "add", "a=x"], 1),
            (["call", "add", "nokey"], 2),
            (["call", "nope"], 1),
            (["list"], 0),
        ]:
            ours = itbench("tool", *args, env=server.env())
            alone = subprocess.run(
                ["/usr/bin/python3", str(client), "tool", *args],
                capture_output=True,
                text=True,
                env={"PATH": "/usr/bin:/bin", **server.env()},
                cwd="/tmp",
                timeout=60,
            )
            assert (ours.returncode, alone.returncode) == (code, code), (args, ours.stderr)
            assert ours.stdout == alone.stdout, args
            if code == 1:
                assert ours.stderr.split() == alone.stderr.split(), args
    finally:
        server.stop()
    assert json.loads(ours.stdout)[0]["name"] == "add"


def test_a_flood_of_endpoint_requests_is_journaled_up_to_the_cap_then_counted(
    toy_bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sandboxed program that sends many requests to its task's endpoint: the first ones are
    trajectory events, the rest one count, so a flood cannot grow the trajectory unbounded."""
    from itbench import command
    from itbench.models import RunConfig
    from itbench.runner import Runner

    monkeypatch.setattr(command, "MAX_JOURNALED", 3)
    program = tmp_path / "agent" / "flood.py"
    program.parent.mkdir()
    program.write_text(
        "import json, os, urllib.request\n"
        "url = json.load(open(os.environ['ITBENCH_TASK']))['context']['status_url']\n"
        "for _ in range(8):\n"
        "    urllib.request.urlopen(url, timeout=10).read()\n"
    )
    config = RunConfig(
        agent="command",
        scenarios=["toy/healthy"],
        options={"agent_command": f"/usr/bin/python3 {program}", "harness_server": 1},
    )
    [result] = Runner(toy_bench, config, tmp_path / "run").run().results
    trajectory = json.loads(
        (tmp_path / "run" / "trials" / result.handle / "trajectory.json").read_text()
    )
    events = [s["detail"] for s in trajectory["steps"] if s.get("name") == "endpoint_request"]
    assert [(e.get("method"), e.get("path"), e.get("status")) for e in events[:3]] == [
        ("GET", "/status", 200)
    ] * 3
    assert events[3:] == [{"not_journaled": 5}]
